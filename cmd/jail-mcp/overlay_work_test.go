//go:build linux

package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/tools"
)

// The real work of issue 29's table, each through the real server over
// stdio with --overlay, in a fixture project: it must pass, and the host
// project must be unchanged afterwards. The registries are those CI
// reaches (npm's, the Go module proxy); pytest is Debian's (.ci/run
// installs it).

// workFixture is one row: the project's files, what runs, and what its
// output must hold.
type workFixture struct {
	name    string
	files   map[string]string
	setup   string // run on the host first (git history, a lock file)
	command string
	want    []string
	needs   []string // host programs the command needs
	// changes are what jail_diff must list afterwards, "change path"
	// each, and ignored its summaries, "change dir".
	changes, ignored []string
}

// check says which of want res's output lacks, if any.
func (fx workFixture) check(res tools.ExecResult) error {
	out := res.Stdout + res.Stderr
	for _, w := range fx.want {
		if !strings.Contains(out, w) {
			return fmt.Errorf("%s: no %q in\n%s", fx.command, w, out)
		}
	}
	return nil
}

var workFixtures = []workFixture{
	{
		name: "npm-ci",
		files: map[string]string{
			"package.json": `{"name":"fx","version":"1.0.0","private":true,"scripts":{"test":"node test.js"},"dependencies":{"is-number":"7.0.0"}}` + "\n",
			"test.js":      "const isNumber = require('is-number');\nif (!isNumber(5) || isNumber('x')) process.exit(1);\nconsole.log('npm test ok');\n",
		},
		setup:   "npm install --package-lock-only --no-audit --no-fund >/dev/null",
		command: "npm ci --no-audit --no-fund && npm test",
		want:    []string{"npm test ok"},
		needs:   []string{"npm"},
		changes: []string{"added node_modules", "added node_modules/.package-lock.json", "added node_modules/is-number",
			"added node_modules/is-number/LICENSE", "added node_modules/is-number/README.md", "added node_modules/is-number/index.js",
			"added node_modules/is-number/package.json"},
	},
	{
		name: "configure-make",
		files: map[string]string{
			"configure": "#!/bin/sh\nexec 5>config.log\necho 'checking for a C compiler' >&5\nprintf 'int main(void){return 0;}\\n' > conftest.c\n" +
				"${CC:-cc} -o conftest conftest.c >&5 2>&1 || { echo 'error: no C compiler' >&2; exit 1; }\nrm -f conftest conftest.c\n" +
				"echo '#define GREETING \"hello\"' > config.h\necho \"CC = ${CC:-cc}\" > config.mk\necho configured\n",
			"Makefile": "include config.mk\nall: hello\ngreet.o: greet.c config.h\n\t$(CC) -c -o $@ greet.c\nlibgreet.a: greet.o\n\tar rcs $@ greet.o\n" +
				"hello: main.c libgreet.a\n\t$(CC) -o $@ main.c libgreet.a\ntest: hello\n\t./hello | grep -q hello && echo 'make test ok'\n.PHONY: all test\n",
			"greet.c": "#include \"config.h\"\nconst char *greeting(void) { return GREETING; }\n",
			"main.c":  "#include <stdio.h>\nconst char *greeting(void);\nint main(void) { puts(greeting()); return 0; }\n",
		},
		setup:   "chmod +x configure",
		command: "./configure && make && make test",
		want:    []string{"configured", "make test ok"},
		needs:   []string{"cc", "make", "ar"},
		changes: []string{"added config.h", "added config.log", "added config.mk", "added greet.o", "added hello", "added libgreet.a"},
	},
	{
		name: "pytest-filterwarnings-error",
		files: map[string]string{
			"pytest.ini":   "[pytest]\nfilterwarnings =\n    error\n",
			"calc.py":      "def add(a, b):\n    return a + b\n",
			"test_calc.py": "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n",
		},
		// No byte code: its file names name the Python and pytest versions.
		command: "PYTHONDONTWRITEBYTECODE=1 pytest-3 -q",
		want:    []string{"1 passed"},
		needs:   []string{"pytest-3"},
		// pytest's cache ignores itself (its own .gitignore).
		changes: []string{"added .pytest_cache"},
		ignored: []string{"added .pytest_cache/"},
	},
	{
		name:  "git-stash-switch-commit",
		files: map[string]string{"f.txt": "one\n"},
		setup: "git init -q && git config user.email t@example.com && git config user.name t && git add f.txt && git commit -qm one && echo two >> f.txt",
		command: "git stash && cat f.txt && git stash pop && git switch -c feature && git commit -qam two && " +
			"git log --format=%s && git status --short && echo clean",
		want:  []string{"one\n", "Switched to a new branch 'feature'", "two\none\nclean"},
		needs: []string{"git"},
		// The commit stays in the view's .git; f.txt is the host's.
		ignored: []string{"mixed .git/"},
	},
	{
		name: "go-get-tidy-generate-gofmt",
		files: map[string]string{
			"go.mod":      "module example.com/fx\n\ngo 1.22\n",
			"main.go":     "package main\n\n//go:generate go run ./gen\n\nimport (\n\t\"fmt\"\n\n\t\"github.com/google/uuid\"\n)\n\nfunc main() {\n\tfmt.Println(  uuid.NewString() != \"\", Generated   )\n}\n",
			"gen/main.go": "package main\n\nimport \"os\"\n\nfunc main() {\n\tos.WriteFile(\"generated.go\", []byte(\"package main\\n\\nconst Generated = true\\n\"), 0o644)\n}\n",
		},
		// -modcacherw: a module cache the test's own clean-up can remove
		// where the server's HOME has none to show (a normal user's test).
		command: "export GOFLAGS=-modcacherw; go get github.com/google/uuid@v1.6.0 && go mod tidy && grep -q google/uuid go.mod && go generate ./... && " +
			"gofmt -l main.go && gofmt -w main.go gen && test -z \"$(gofmt -l main.go gen generated.go)\" && go run .",
		want:    []string{"main.go\n", "true true"},
		needs:   []string{"go", "gofmt"},
		changes: []string{"added generated.go", "modified go.mod", "added go.sum", "modified main.go"},
	},
}

// TestOverlayRealWork runs each fixture of workFixtures in the view a
// server started with the defaults shows.
func TestOverlayRealWork(t *testing.T) {
	for _, fx := range workFixtures {
		t.Run(fx.name, func(t *testing.T) {
			for _, p := range fx.needs {
				if _, err := exec.LookPath(p); err != nil {
					t.Fatalf("%s is not installed here (.ci/run installs what the tests need): %v", p, err)
				}
			}
			project := testkit.NewProject(t)
			writeFiles(t, project, fx.files)
			if fx.setup != "" {
				cmd := exec.Command("sh", "-c", fx.setup)
				cmd.Dir = project
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("setup: %v\n%s", err, out)
				}
			}
			before := projectTree(t, project)
			// The defaults: no --overlay, no --backend (issue 46).
			ts := startDefaultView(t, project, "--timeout", "5m", "--max-output", "1048576")
			res, raw := ts.Exec(map[string]any{"command": fx.command, "timeout_ms": (5 * time.Minute).Milliseconds()})
			if res.ExitCode != 0 {
				t.Fatalf("%s: %s", fx.command, testkit.ResultText(raw))
			}
			if err := fx.check(res); err != nil {
				t.Fatal(err)
			}
			sameTree(t, project, before)
			diff, raw := testkit.DiffOf(ts, map[string]any{})
			var changes, ignored []string
			for _, c := range diff.Changes {
				changes = append(changes, c.Change+" "+c.Path)
			}
			for _, s := range diff.Ignored {
				ignored = append(ignored, s.Change+" "+s.Dir)
			}
			if !slices.Equal(changes, fx.changes) || !slices.Equal(ignored, fx.ignored) {
				t.Fatalf("jail_diff lists\n%q\n%q\nwant\n%q\n%q\n%s", changes, ignored, fx.changes, fx.ignored, testkit.ResultText(raw))
			}
			if fx.name == "go-get-tidy-generate-gofmt" {
				// The formatting reaches the host by jail_apply.
				res, err := ts.Call(t.Context(), "jail_apply", map[string]any{"paths": []string{"main.go"}})
				if err != nil || res.IsError {
					t.Fatalf("jail_apply: %v %s", err, testkit.ResultText(res))
				}
				out, err := exec.Command("gofmt", "-l", filepath.Join(project, "main.go")).Output()
				if err != nil || len(out) != 0 {
					t.Fatalf("the host's main.go is not formatted after jail_apply: %q %v", out, err)
				}
			}
		})
	}
}
