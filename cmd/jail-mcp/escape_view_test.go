//go:build linux

package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// The escape suite runs with the defaults: under bubblewrap the project
// view is on (--overlay auto), so a command's write to the project
// exits 0 into the session's layer, never the host. What counts there is
// the host: the project is in the snapshot every vector is checked
// against, and its files' bytes are compared once more at the suite's end
// (projectIntact). Writes outside the project (the victim, the servers'
// HOME, /etc, another session's jail, the project's .agent-home) must
// still fail.

// linksOut are the names attacks give their jails' symlinks out of the
// project (to the victim, the root, another jail): a line naming one is
// never written off as the view's.
var linksOut = []string{"to-file", "to-dir", "to-root", "to-other", "to-victim"}

// linksIn are the names of the jails' symlinks into the project.
var linksIn = []string{"to-keep", "to-project"}

// procRoot matches a path through a process's root (the sandbox's own,
// where the project is the view); procNeutral a process's directory, its
// working directory or one of its descriptors, which another word of the
// line names (the attempt's $0).
var (
	procRoot    = regexp.MustCompile(`^/proc/(self|thread-self|[0-9]+|\$\$|\$PPID)/root(/.*)?$`)
	procNeutral = regexp.MustCompile(`^/proc/(self|thread-self|[0-9]+|\$\$|\$PPID)(/cwd(/.*)?|/fd/[0-9]+)?$`)
)

// inView tells whether an attempt's ESCAPED line, under the project view,
// names only what the view makes writable: a path of the project outside
// its .agent-home (or one through a process's root), the calling session's
// own jail, or the jail's links into the project; and at least one
// project path or link in. Such an attempt wrote the session's layer: the
// host snapshot, not its exit status, is its verdict. Anything else named
// (the victim, the host's HOME, /etc, another jail, a descriptor) keeps
// the line an escape.
func (fx *escapeFixture) inView(line, jail string) bool {
	named := false
	for _, w := range strings.Fields(strings.TrimPrefix(line, "ESCAPED:")) {
		w = strings.Trim(w, `"'`)
		for _, l := range linksOut {
			if strings.Contains(w, l) {
				return false
			}
		}
		for _, l := range linksIn {
			if strings.Contains(w, l) {
				named = true
			}
		}
		// "/" alone is what a link points to (ln -s / ...), not where
		// the attempt writes.
		if !strings.HasPrefix(w, "/") || w == "/" {
			continue
		}
		if m := procRoot.FindStringSubmatch(w); m != nil {
			if w = m[2]; w == "" {
				continue
			}
		} else if procNeutral.MatchString(w) {
			continue
		}
		switch {
		case jail != "" && testkit.Within(w, jail):
		case testkit.Within(w, fx.project) && !testkit.Within(w, filepath.Join(fx.project, ".agent-home")):
			named = true
		default:
			return false
		}
	}
	return named
}

// resetViews empties, with jail_reset, the layer of each of the
// fixture's sessions a vector wrote through its view, so that the next
// vector finds the project as the host has it (not a keep.txt the layer
// deleted, not a project chmod 000 that leaves the session's calls no
// working directory), and puts back the session's secret. The jails of
// a and d are not snapshotted; b's is, and is taken into the baseline
// again, after the vector's host check.
func (fx *escapeFixture) resetViews(t *testing.T) {
	t.Helper()
	if !fx.view {
		return
	}
	for _, s := range []struct {
		name   string
		ts     *testkit.Server
		secret string
	}{{"a", fx.a, "a-secret"}, {"b", fx.b, "b-secret"}, {"d", fx.d, ""}} {
		upper := filepath.Join(fx.jails[s.name], ".overlay", "upper")
		ents, err := os.ReadDir(upper)
		st := testkit.StateOf(upper)
		if err == nil && len(ents) == 0 && st.Mode == fx.upperMode[s.name] {
			continue
		}
		s.ts.End("reset")
		if s.secret != "" {
			if res, raw := s.ts.Exec(map[string]any{"command": `echo ` + s.secret + ` > "$HOME/` + s.secret + `"`}); res.ExitCode != 0 {
				t.Fatalf("put back %s after a reset: %q", s.secret, testkit.ResultText(raw))
			}
		}
		if s.name == "b" {
			fx.rebase(t, fx.jails["b"])
		}
	}
}

// projectFiles are the project's files and directories outside its
// .agent-home and its --writable node_modules, by path: mode and, of a
// regular file, its bytes.
type projectFile struct {
	mode fs.FileMode
	data []byte
}

func (fx *escapeFixture) projectFiles(t *testing.T) map[string]projectFile {
	t.Helper()
	out := map[string]projectFile{}
	skip := map[string]bool{filepath.Join(fx.project, ".agent-home"): true, filepath.Join(fx.project, "node_modules"): true}
	err := filepath.WalkDir(fx.project, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if skip[p] {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		f := projectFile{mode: fi.Mode()}
		if fi.Mode().IsRegular() {
			if f.data, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		out[p] = f
		return nil
	})
	if err != nil {
		t.Fatalf("read the host project: %v", err)
	}
	return out
}

// projectIntact: after every attack of the suite, each file and
// directory the host project had when the attacks began is still there,
// byte-identical and with its mode, whatever the sessions' views took.
func (fx *escapeFixture) projectIntact(t *testing.T) {
	t.Helper()
	now := fx.projectFiles(t)
	for p, want := range fx.hostProject {
		got, ok := now[p]
		switch {
		case !ok:
			fx.escape(t, "the host project lost %s", p)
		case got.mode != want.mode:
			fx.escape(t, "the host project's %s: mode %v, was %v", p, got.mode, want.mode)
		case !bytes.Equal(got.data, want.data):
			fx.escape(t, "the host project's %s changed: %q, was %q", p, testkit.Tail(string(got.data)), testkit.Tail(string(want.data)))
		}
	}
}
