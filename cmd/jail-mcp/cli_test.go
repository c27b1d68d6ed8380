package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/session/jailfs/jailfstest"
	"github.com/jail-mcp/jail-mcp/tools"
)

// fakeFile is a well-formed but worthless credential or config file.
type fakeFile struct {
	rel, content string
	mode         fs.FileMode
	// state marks a file the jail shows as a private writable copy (state
	// files, and the settings in a CLI's state directory)
	// (auth.Path.State) rather than read-only.
	state bool
}

// realCLIs are installed from the npm registry at exact versions, so that
// CI is reproducible; bump them together with a run of this test.
//
// claude-code declares node >=22 but ships a native binary per platform;
// only its postinstall runs on node, and that works on node 20.
var realCLIs = []struct {
	name, pkg, version string
	files              []fakeFile
}{
	{
		name: "claude", pkg: "@anthropic-ai/claude-code", version: "2.1.332",
		files: []fakeFile{
			{rel: ".claude/.credentials.json", mode: 0o600, content: `{"claudeAiOauth":{"accessToken":"sk-ant-oat01-fake","refreshToken":"sk-ant-ort01-fake","expiresAt":4102444800000,"scopes":["user:inference","user:profile"],"subscriptionType":"max"}}` + "\n"},
			{rel: ".claude.json", mode: 0o600, state: true, content: `{"numStartups":1,"installMethod":"npm","autoUpdates":false,"hasCompletedOnboarding":true,"userID":"fake"}` + "\n"},
		},
	},
	{
		name: "codex", pkg: "@openai/codex", version: "0.171.0",
		files: []fakeFile{
			{rel: ".codex/auth.json", mode: 0o600, content: `{"OPENAI_API_KEY":"sk-fake"}` + "\n"},
			{rel: ".codex/config.toml", mode: 0o644, state: true, content: "model = \"gpt-5\"\ncli_auth_credentials_store = \"file\"\n"},
		},
	},
	{
		name: "gemini", pkg: "@google/gemini-cli", version: "0.61.0",
		files: []fakeFile{
			{rel: ".gemini/settings.json", mode: 0o644, state: true, content: `{"security":{"auth":{"selectedType":"oauth-personal"}}}` + "\n"},
			{rel: ".gemini/oauth_creds.json", mode: 0o600, content: `{"access_token":"ya29.fake","refresh_token":"1//fake","scope":"https://www.googleapis.com/auth/cloud-platform","token_type":"Bearer","expiry_date":4102444800000}` + "\n"},
		},
	},
}

// TestRealCLIsStartInTheJail installs the real assistant CLIs and runs
// them in the jail with fake credentials in the operator's HOME: they must
// start, see their credentials, and leave that HOME exactly as it was. It
// runs on every backend, the backends at once: the CLIs are slow to start,
// and each backend has its own project, HOME and server.
func TestRealCLIsStartInTheJail(t *testing.T) {
	withCLIsOnEachBackend(t, testRealCLIs)
}

// withCLIsOnEachBackend installs the CLIs once, in bin, and runs test on
// every backend, the backends at once: the CLIs are slow to start, and
// each backend has its own project, HOME and server.
func withCLIsOnEachBackend(t *testing.T, test func(t *testing.T, b testkit.Backend, bin string)) {
	bin := installCLIs(t)
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		t.Parallel()
		test(t, b, bin)
	})
}

func testRealCLIs(t *testing.T, b testkit.Backend, bin string) {
	home := fakeHome(t)
	before := snapshot(t, home)

	project := testkit.NewProject(t)
	ts := b.Start(t, project, testkit.ServerEnv(
		"HOME="+home, "ANTHROPIC_API_KEY=sk-ant-fake", "OPENAI_API_KEY=sk-fake",
		// A tester's own relocations would expose their real credentials.
		"CLAUDE_CONFIG_DIR=", "CODEX_HOME=",
	), "--session", "cli", "--auth", "all")
	env := map[string]any{"PATH": bin + string(os.PathListSeparator) + os.Getenv("PATH")}
	confined := func(t *testing.T, what string, res tools.ExecResult) {
		t.Helper()
		if !res.Confined || res.Backend != b.Name {
			t.Errorf("%s ran with confined %t backend %q", what, res.Confined, res.Backend)
		}
	}

	// Read first: the CLIs below may rewrite the state copy of .claude.json.
	for _, c := range realCLIs {
		for _, f := range c.files {
			res, _ := ts.Exec(map[string]any{"argv": []string{"/bin/sh", "-c", `cat "$HOME/$1"`, "sh", f.rel}})
			confined(t, "cat "+f.rel, res)
			if res.ExitCode != 0 || res.Stdout != f.content {
				t.Errorf("$HOME/%s in the jail: exit %d stdout %q stderr %q", f.rel, res.ExitCode, res.Stdout, res.Stderr)
			}
		}
	}
	res, _ := ts.Exec(map[string]any{"command": `echo "$ANTHROPIC_API_KEY $OPENAI_API_KEY"`})
	if res.Stdout != "sk-ant-fake sk-fake\n" {
		t.Errorf("credential variables in the jail: %q", res.Stdout)
	}

	for _, c := range realCLIs {
		for _, tc := range []struct {
			arg  string
			want *regexp.Regexp
		}{
			{"--version", regexp.MustCompile(`^(codex-cli )?` + regexp.QuoteMeta(c.version) + `( \(Claude Code\))?\n$`)},
			{"--help", regexp.MustCompile(`(?m)^Usage: ` + c.name + ` `)},
		} {
			t.Run(c.name+" "+tc.arg, func(t *testing.T) {
				res, raw := ts.Exec(map[string]any{"argv": []string{c.name, tc.arg}, "env": env, "timeout_ms": 120000})
				confined(t, c.name, res)
				if res.ExitCode != 0 || !tc.want.MatchString(res.Stdout) {
					t.Fatalf("exit %d (%s)\nstdout:\n%s\nstderr:\n%s", res.ExitCode, testkit.ResultText(raw), res.Stdout, res.Stderr)
				}
				// What a CLI could not write shows up here: codex its
				// ~/.codex/tmp helpers, gemini ~/.gemini/projects.json.
				first, _, _ := strings.Cut(res.Stderr, "\n")
				t.Logf("%d ms; stderr %d bytes: %s", res.DurationMS, res.StderrBytes, first)
			})
		}
	}

	fileOps := []struct{ name, script string }{
		{"write", `echo x >> "$HOME/$1"`},
		{"truncate", `: > "$HOME/$1"`},
		{"delete", `rm -f "$HOME/$1"`},
		{"rename", `mv -f "$HOME/$1" "$HOME/$1.moved"`},
		{"chmod", `chmod 666 "$HOME/$1"`},
		{"touch", `touch -d 2001-01-01 "$HOME/$1"`},
	}
	// The CLIs' directories are private per-session copies (writable, see
	// below); removing or renaming them still cannot touch the secrets.
	dirOps := []struct{ name, script string }{
		{"remove", `rm -rf "$HOME/$1"`},
		{"rename", `mv -f "$HOME/$1" "$HOME/$1.moved"`},
	}
	// bwrap shows the credentials as read-only mounts: every one of these
	// operations is refused. landlock places symlinks to them in the jail:
	// a write through one is refused (and, by seccomp, a root server's
	// chmod); deleting or renaming the jail's own link, or its directory,
	// is the jail's business and leaves the host as it was; a change of
	// metadata through a link is not promised (promise 1 is listed as not
	// kept, see TestStatus), so it is logged and undone for the HOME check
	// below, which covers all the rest.
	refused := regexp.MustCompile(`Read-only file system|Device or resource busy`)
	if b.Name == "landlock" {
		refused = regexp.MustCompile(`Permission denied|Operation not permitted`)
	}
	try := func(t *testing.T, op, script, rel string) {
		t.Helper()
		res, _ := ts.Exec(map[string]any{"argv": []string{"/bin/sh", "-c", script, "sh", rel}})
		confined(t, script, res)
		mustRefuse := true
		if b.Name == "landlock" {
			switch op {
			case "delete", "rename", "remove", "touch":
				mustRefuse = false
			case "chmod":
				mustRefuse = os.Geteuid() == 0
			}
		}
		if mustRefuse && (res.ExitCode == 0 || !refused.MatchString(res.Stderr)) {
			t.Errorf("not refused by the jail: exit %d stderr %q", res.ExitCode, res.Stderr)
		}
		e, ok := before[rel]
		if !ok || !e.Mode.IsRegular() {
			return
		}
		now := snapshot(t, filepath.Join(home, rel))["."]
		if now.SHA256 != e.SHA256 {
			t.Errorf("%s changed on the host", rel)
		}
		if !mustRefuse && now != e {
			t.Logf("not promised under landlock: %s changed %s on the host: now %v, was %v", op, rel, now, e)
			os.Chmod(filepath.Join(home, rel), e.Mode.Perm())
			os.Chtimes(filepath.Join(home, rel), time.Unix(0, e.ModTime), time.Unix(0, e.ModTime))
		}
	}
	dirs := map[string]bool{}
	for _, c := range realCLIs {
		for _, f := range c.files {
			if f.state {
				continue
			}
			if d := filepath.Dir(f.rel); d != "." {
				dirs[d] = true
			}
			for _, op := range fileOps {
				t.Run(op.name+" "+f.rel, func(t *testing.T) { try(t, op.name, op.script, f.rel) })
			}
			res, _ := ts.Exec(map[string]any{"argv": []string{"/bin/sh", "-c", `cat "$HOME/$1"`, "sh", f.rel}})
			if res.Stdout != f.content {
				t.Errorf("$HOME/%s in the jail after the attempts: %q", f.rel, res.Stdout)
			}
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		for _, op := range dirOps {
			t.Run(op.name+" "+d, func(t *testing.T) { try(t, op.name, op.script, d) })
		}
	}

	// The CLIs write their state into their directories: those are the
	// session's own, so real commands get past start-up. Without network
	// they fail later; what matters is that no write was refused.
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		res, _ := ts.Exec(map[string]any{"argv": []string{"/bin/sh", "-c", `mkdir -p "$HOME/$1/tmp" && echo x > "$HOME/$1/added"`, "sh", d}})
		if res.ExitCode != 0 {
			t.Errorf("%s is not writable for its CLI: %q", d, res.Stderr)
		}
	}
	for _, argv := range [][]string{
		{"codex", "exec", "--skip-git-repo-check", "say hi"},
		{"gemini", "-p", "say hi"},
	} {
		res, _ := ts.Exec(map[string]any{"argv": argv, "env": env, "timeout_ms": 8000, "network": false})
		confined(t, argv[0], res)
		out := res.Stderr + res.Stdout
		if b.Name == "landlock" && os.Geteuid() == 0 {
			// Documented: as root, the landlock backend denies chmod in
			// the jail too; codex says so and goes on.
			out = strings.ReplaceAll(out, "could not create PATH aliases: Operation not permitted", "")
		}
		if refused.MatchString(out) {
			t.Errorf("%v: a write was refused:\n%s", argv, res.Stderr)
		}
		first, _, _ := strings.Cut(res.Stderr, "\n")
		t.Logf("%v: exit %d timed out %t in %d ms; stderr: %s", argv, res.ExitCode, res.TimedOut, res.DurationMS, first)
	}

	// A state file is the jail's own copy: writable there, never flowing
	// back to the host (checked below with the rest of HOME).
	for _, c := range realCLIs {
		for _, f := range c.files {
			if !f.state {
				continue
			}
			res, _ := ts.Exec(map[string]any{"argv": []string{"/bin/sh", "-c", `echo '{"jail":true}' > "$HOME/$1" && cat "$HOME/$1"`, "sh", f.rel}})
			if res.ExitCode != 0 || res.Stdout != "{\"jail\":true}\n" {
				t.Errorf("write the state copy of %s: exit %d stdout %q stderr %q", f.rel, res.ExitCode, res.Stdout, res.Stderr)
			}
		}
	}

	ts.Client.Close()
	after := snapshot(t, home)
	for rel, e := range before {
		if a, ok := after[rel]; !ok {
			t.Errorf("%s was removed from HOME", rel)
		} else if a != e {
			t.Errorf("%s changed in HOME: now %v, was %v", rel, a, e)
		}
	}
	for rel := range after {
		if _, ok := before[rel]; !ok {
			t.Errorf("%s was added to HOME", rel)
		}
	}
}

// installCLIs installs realCLIs under a fresh prefix and returns its bin
// directory. npm's cache outlives the test so that re-runs are quick. The
// prefix is not under /tmp, which bubblewrap shadows: its bin directory
// would be bound back, but not the packages its links point into.
func installCLIs(t *testing.T) string {
	t.Helper()
	prefix := testkit.HostDir(t)
	var pkgs []string
	for _, c := range realCLIs {
		pkgs = append(pkgs, c.pkg+"@"+c.version)
	}
	npmInstall(t, prefix, pkgs...)
	return filepath.Join(prefix, "node_modules", ".bin")
}

// npmInstall installs pkgs (name@version) under prefix. npm's cache, one
// per user under $TMPDIR, outlives the test so that re-runs are quick.
func npmInstall(t *testing.T, prefix string, pkgs ...string) {
	t.Helper()
	args := append([]string{"install", "--prefix", prefix, "--no-audit", "--no-fund", "--loglevel=error", "--prefer-offline"}, pkgs...)
	// Ten minutes: with an empty cache on a busy machine (.ci/stress) the
	// three CLIs once took longer than 150 s; a hung npm still ends the
	// test well before the suite's deadline.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", args...)
	cmd.Env = append(os.Environ(),
		"npm_config_cache="+filepath.Join(os.TempDir(), fmt.Sprintf("jail-mcp-npm-cache-%d", os.Getuid())),
		"npm_config_update_notifier=false",
	)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("npm install %s took %v", strings.Join(pkgs, " "), time.Since(start).Round(time.Millisecond))
}

// fakeHome is a HOME holding the fake files of realCLIs, every file and
// directory dated in the past so that a touch cannot go unnoticed.
func fakeHome(t testing.TB) string {
	t.Helper()
	home := t.TempDir()
	for _, c := range realCLIs {
		for _, f := range c.files {
			p := filepath.Join(home, f.rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(f.content), f.mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	past := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
	err := filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, past, past)
	})
	if err != nil {
		t.Fatal(err)
	}
	return home
}

// entry is what must not change about one path under HOME.
type entry struct {
	Mode    fs.FileMode
	ModTime int64
	SHA256  [sha256.Size]byte
	Link    string
}

func (e entry) String() string {
	s := fmt.Sprintf("mode %v mtime %s", e.Mode, time.Unix(0, e.ModTime).UTC().Format(time.RFC3339Nano))
	if e.Mode.IsRegular() {
		s += fmt.Sprintf(" sha256 %x", e.SHA256)
	}
	if e.Link != "" {
		s += " link " + e.Link
	}
	return s
}

// snapshot records every path under root, root included.
func snapshot(t *testing.T, root string) map[string]entry {
	t.Helper()
	return jailfstest.Tree(t, root, func(p string, fi fs.FileInfo) (entry, error) {
		e := entry{Mode: fi.Mode(), ModTime: fi.ModTime().UnixNano()}
		var err error
		switch {
		case fi.Mode().IsRegular():
			var b []byte
			b, err = os.ReadFile(p)
			e.SHA256 = sha256.Sum256(b)
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Link, err = os.Readlink(p)
		}
		return e, err
	})
}
