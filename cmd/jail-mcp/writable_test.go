//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// TestWritableInPlace: --writable directories of the project, through the
// real server on each backend. The server makes the missing ones; a
// command writes there, the host project changes there and nowhere else
// (not next to them, not through a link planted in them); jail_status
// names them; and a path through such a link is refused at start, with
// nothing made where it leads.
func TestWritableInPlace(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		victim := testkit.HostDir(t)
		writeFiles(t, project, map[string]string{"keep.txt": "keep\n", "build/keep.txt": "keep\n"})
		writeFiles(t, victim, map[string]string{"file": "victim\n"})
		nm, out := filepath.Join(project, "node_modules"), filepath.Join(project, "build", "out")
		// Next to them the project is read-only: no view (TestOverlayWithWritable
		// has --writable under the view).
		ts := b.Start(t, project, testkit.ServerEnv(), "--auth", "none", "--writable", "node_modules, build/out", "--overlay", "off")

		for _, d := range []string{nm, out} {
			if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
				t.Fatalf("%s not made at start: %v", d, err)
			}
		}
		if st := ts.Status(); !slices.Equal(st.Writable, []string{nm, out}) {
			t.Errorf("jail_status writable = %q, want %q", st.Writable, []string{nm, out})
		}

		// What npm does: write, stage, rename into place, link.
		res, raw := ts.Exec(map[string]any{"command": `set -e
mkdir -p node_modules/.staging/pkg node_modules/.bin
echo 'module.exports = 1' > node_modules/.staging/pkg/index.js
mv node_modules/.staging/pkg node_modules/pkg
ln -s ../pkg/index.js node_modules/.bin/pkg
ln node_modules/pkg/index.js node_modules/hard.js
echo built > build/out/app.js
cd node_modules && echo x > x`})
		if res.ExitCode != 0 {
			t.Fatalf("writes in the writable directories: %+v %s", res, testkit.ResultText(raw))
		}
		if refusedWrite(raw) != "" {
			t.Errorf("a write in a writable directory was reported refused: %q", refusedWrite(raw))
		}
		for path, want := range map[string]string{
			filepath.Join(nm, "pkg", "index.js"): "module.exports = 1\n",
			filepath.Join(nm, "hard.js"):         "module.exports = 1\n",
			filepath.Join(nm, "x"):               "x\n",
			filepath.Join(out, "app.js"):         "built\n",
		} {
			if got := testkit.MustRead(t, path); got != want {
				t.Errorf("%s on the host = %q, want %q", path, got, want)
			}
		}

		// Next to them, the project stays read-only.
		for _, script := range []string{
			`echo x > next.txt`,
			`echo x >> keep.txt`,
			`echo x > build/new.txt`,
			`echo x >> build/keep.txt`,
			`mv node_modules/x moved`,
			`ln node_modules/x linked`,
			// A copy may be left in node_modules (reads are free), never
			// the project's file itself.
			`mv keep.txt node_modules/moved`,
			`ln keep.txt node_modules/linked`,
		} {
			res, raw := ts.Exec(map[string]any{"command": script})
			if res.ExitCode == 0 {
				t.Errorf("%q succeeded: %s", script, testkit.ResultText(raw))
			}
		}
		for _, p := range []string{"next.txt", "build/new.txt", "moved", "linked", "node_modules/linked"} {
			if testkit.FileExists(filepath.Join(project, p)) {
				t.Errorf("%s exists on the host", p)
			}
		}
		for _, p := range []string{"keep.txt", "build/keep.txt"} {
			if got := testkit.MustRead(t, filepath.Join(project, p)); got != "keep\n" {
				t.Errorf("%s = %q", p, got)
			}
			if n := testkit.StateOf(filepath.Join(project, p)).Nlink; n != 1 {
				t.Errorf("%s has %d links", p, n)
			}
		}

		// A link planted in a writable directory leads nowhere writable,
		// in this call or a later one.
		res, raw = ts.Exec(map[string]any{"command": `ln -s "$VICTIM" node_modules/evil && ln -s "$VICTIM/file" node_modules/evil-file && ln -s "$VICTIM/missing" node_modules/dangling && ln -s .. node_modules/up`, "env": map[string]any{"VICTIM": victim}})
		if res.ExitCode != 0 {
			t.Fatalf("plant links: %+v %s", res, testkit.ResultText(raw))
		}
		for _, script := range []string{
			`echo bad > node_modules/evil/new`,
			`echo bad >> node_modules/evil-file`,
			`echo bad > node_modules/dangling`,
			`mkdir node_modules/evil/dir`,
			`echo bad > node_modules/up/new.txt`,
			`mv node_modules/pkg node_modules/evil/pkg`,
		} {
			res, raw := ts.Exec(map[string]any{"command": script})
			if res.ExitCode == 0 {
				t.Errorf("%q succeeded through a planted link: %s", script, testkit.ResultText(raw))
			}
		}
		if got := testkit.MustRead(t, filepath.Join(victim, "file")); got != "victim\n" {
			t.Errorf("the victim file = %q", got)
		}
		for _, p := range []string{"new", "dir", "missing", "pkg"} {
			if testkit.FileExists(filepath.Join(victim, p)) {
				t.Errorf("%s made outside the project", filepath.Join(victim, p))
			}
		}
		if testkit.FileExists(filepath.Join(project, "new.txt")) {
			t.Error("new.txt made in the read-only project through a link")
		}

		// A later server naming a path through the links refuses to
		// start, and makes nothing where they lead.
		ts.End("EOF")
		for _, w := range []string{"node_modules/evil", "node_modules/evil/sub", "node_modules/dangling", "node_modules/dangling/sub", "node_modules/up/src"} {
			res := runInProcess(t, []string{"--project", project, "--writable", w}, cfgEnv())
			if res.code != 2 {
				t.Errorf("--writable %s: exit %d, want 2; stderr:\n%s", w, res.code, res.stderr)
			}
			cfgOneLine(t, res.stderr)
		}
		for _, p := range []string{filepath.Join(victim, "sub"), filepath.Join(victim, "missing"), filepath.Join(project, "src")} {
			if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s made through a link at start: %v", p, err)
			}
		}
	})
}

// refusedWrite is a result's refused_write.
func refusedWrite(raw any) string {
	var r struct {
		StructuredContent struct {
			RefusedWrite string `json:"refused_write"`
		} `json:"structuredContent"`
	}
	b, _ := json.Marshal(raw)
	json.Unmarshal(b, &r)
	return r.StructuredContent.RefusedWrite
}

// TestWritableStatusEmpty: without --writable, jail_status says so with
// an empty list, not a missing field.
func TestWritableStatusEmpty(t *testing.T) {
	ts := testkit.StartServer(t, testkit.NewProject(t), testkit.ServerEnv(), "--auth", "none")
	res, err := ts.Call(t.Context(), "jail_status", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(b), `"writable":[]`) {
		t.Errorf("jail_status without --writable: %s", b)
	}
}
