package layer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestApply(t *testing.T) {
	tests := []struct {
		name        string
		host, upper []node
		paths       []string
		applied     []string               // the changes written
		remaining   []string               // Compute's changes after, with All
		upperLeft   []string               // what the upper layer holds after
		hostFiles   map[string]string      // host files and their bytes after
		hostModes   map[string]os.FileMode // host permission bits after
		hostGone    []string
	}{{
		name:      "modification",
		host:      []node{file("a.txt", "one\n"), file("b.txt", "same\n")},
		upper:     []node{file("a.txt", "two and more\n"), file("b.txt", "same\n")},
		paths:     []string{"a.txt"},
		applied:   []string{"modified file a.txt"},
		remaining: []string{},
		upperLeft: []string{"b.txt"}, // an unchanged copy-up stays
		hostFiles: map[string]string{"a.txt": "two and more\n"},
	}, {
		name: "everything but the ignored",
		host: []node{file(".gitignore", "node_modules/\n"), file("old.txt", "old")},
		upper: []node{
			file("node_modules/x.js", "x"), file("src/new.go", "package src\n"), whiteout("old.txt"),
		},
		paths:     []string{"."},
		applied:   []string{"deleted file old.txt", "added dir src", "added file src/new.go"},
		remaining: []string{"added dir node_modules", "added file node_modules/x.js"},
		upperLeft: []string{"node_modules", "node_modules/x.js"},
		hostFiles: map[string]string{"src/new.go": "package src\n"},
		hostGone:  []string{"old.txt"},
	}, {
		name:      "ignored, by its path",
		host:      []node{file(".gitignore", "node_modules/\n")},
		upper:     []node{file("node_modules/p/x.js", "x"), file("src.go", "s")},
		paths:     []string{"node_modules/p"},
		applied:   []string{"added dir node_modules/p", "added file node_modules/p/x.js"},
		remaining: []string{"added file src.go"}, // node_modules now the host's too
		upperLeft: []string{"node_modules", "src.go"},
		hostFiles: map[string]string{"node_modules/p/x.js": "x"},
	}, {
		name:      "type changes",
		host:      []node{file("x", "x"), file("y/a", "a"), link("z", "x")},
		upper:     []node{file("x/f", "f"), file("y", "y"), file("z", "z")},
		paths:     []string{"."},
		applied:   []string{"type_changed dir x host=file", "added file x/f", "type_changed file y host=dir", "deleted file y/a", "type_changed file z host=symlink"},
		remaining: []string{},
		upperLeft: nil,
		hostFiles: map[string]string{"x/f": "f", "y": "y", "z": "z"},
	}, {
		name:      "opaque directory dropped once applied",
		host:      []node{file("o/keep", "k"), file("o/gone", "g")},
		upper:     []node{opaque("o"), file("o/keep", "k"), file("o/new", "n")},
		paths:     []string{"o"},
		applied:   []string{"deleted file o/gone", "added file o/new"},
		remaining: []string{},
		upperLeft: nil,
		hostFiles: map[string]string{"o/keep": "k", "o/new": "n"},
		hostGone:  []string{"o/gone"},
	}, {
		name:      "opaque directory kept while it holds a change not applied",
		host:      []node{file("o/keep", "k"), file("o/gone", "g")},
		upper:     []node{opaque("o"), file("o/keep", "k"), file("o/new", "n")},
		paths:     []string{"o/new"},
		applied:   []string{"added file o/new"},
		remaining: []string{"deleted file o/gone"},
		upperLeft: []string{"o", "o/keep", "o/new"}, // the view shows o's upper entries alone
		hostFiles: map[string]string{"o/keep": "k", "o/new": "n", "o/gone": "g"},
	}, {
		name:      "mode",
		host:      []node{file("run.sh", "echo\n")},
		upper:     []node{exe("run.sh", "echo\n")},
		paths:     []string{"run.sh"},
		applied:   []string{"modified file run.sh mode=0755"},
		remaining: []string{},
		hostModes: map[string]os.FileMode{"run.sh": 0o755},
	}, {
		name:      "a file without its new directory",
		upper:     []node{file("new/sub/f", "f"), {"new/sub/g", 'f', "g", 0o4755}},
		paths:     []string{"new/sub/f", "new/sub/g"},
		applied:   []string{"added file new/sub/f", "added file new/sub/g mode=0755"},
		remaining: []string{},
		upperLeft: []string{"new", "new/sub"}, // changes not applied, now equal to the host's
		hostFiles: map[string]string{"new/sub/f": "f", "new/sub/g": "g"},
		hostModes: map[string]os.FileMode{"new": 0o755, "new/sub/g": 0o755}, // never setuid
	}, {
		name:      "a deleted directory takes its ignored files",
		host:      []node{file(".gitignore", "*.o\n"), file("build/a.c", "c"), file("build/x.o", "o")},
		upper:     []node{whiteout("build")},
		paths:     []string{"build"},
		applied:   []string{"deleted dir build", "deleted file build/a.c", "deleted file build/x.o"},
		remaining: []string{},
		hostGone:  []string{"build"},
	}, {
		name:      "an odd but harmless name, by its listed form",
		upper:     []node{file("no\u00a0break", "nb")},
		paths:     []string{`"no\u00a0break"`},
		applied:   []string{`added file "no\u00a0break"`},
		remaining: []string{},
		hostFiles: map[string]string{"no\u00a0break": "nb"},
	}, {
		name:      "a read-only new directory",
		upper:     []node{{"ro", 'd', "", 0o555}, file("ro/f", "f")},
		paths:     []string{"ro"},
		applied:   []string{"added dir ro mode=0555", "added file ro/f"},
		remaining: []string{},
		hostFiles: map[string]string{"ro/f": "f"},
		hostModes: map[string]os.FileMode{"ro": 0o555},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up, project := setup(t, tt.host, tt.upper)
			t.Cleanup(func() { makeWritable(project); makeWritable(up) })
			before := treeHash(t, project)
			dry, err := Apply(up, project, tt.paths, true)
			if err != nil {
				t.Fatal(err)
			}
			if got := briefs(dry.Changes); !slices.Equal(got, tt.applied) || len(dry.Refused) != 0 || !dry.DryRun {
				t.Errorf("dry run: %q, refused %v", got, dry.Refused)
			}
			if treeHash(t, project) != before {
				t.Fatal("the dry run wrote to the project")
			}

			res, err := Apply(up, project, tt.paths, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := briefs(res.Changes); !slices.Equal(got, tt.applied) || len(res.Refused) != 0 {
				t.Errorf("applied %q, refused %v; want %q", got, res.Refused, tt.applied)
			}
			d, err := Compute(up, project, Options{All: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := briefs(d.Changes); !slices.Equal(got, tt.remaining) {
				t.Errorf("remaining %q, want %q", got, tt.remaining)
			}
			if got := upperNames(t, up); !slices.Equal(got, tt.upperLeft) {
				t.Errorf("upper layer holds %q, want %q", got, tt.upperLeft)
			}
			for p, want := range tt.hostFiles {
				got, err := os.ReadFile(filepath.Join(project, p))
				if err != nil || string(got) != want {
					t.Errorf("host %s: %q, %v; want %q", p, got, err, want)
				}
			}
			for p, want := range tt.hostModes {
				fi, err := os.Lstat(filepath.Join(project, p))
				if err != nil || fi.Mode()&(os.ModePerm|os.ModeSetuid) != want {
					t.Errorf("host %s: mode %v, %v; want %v", p, fi.Mode(), err, want)
				}
			}
			for _, p := range tt.hostGone {
				if _, err := os.Lstat(filepath.Join(project, p)); !os.IsNotExist(err) {
					t.Errorf("host %s still there: %v", p, err)
				}
			}
			if ents, _ := os.ReadDir(project); slices.ContainsFunc(ents, func(e os.DirEntry) bool {
				return strings.HasPrefix(e.Name(), ".jail-apply-")
			}) {
				t.Error("a staging directory was left in the project")
			}
		})
	}
}

// refusal is a refusal as the tests write it: the path and the start of
// the reason.
type refusal struct{ path, reason string }

func TestApplyRefused(t *testing.T) {
	tests := []struct {
		name        string
		host, upper []node
		paths       []string
		refused     []refusal // path and the start of the reason
	}{{
		name:    "a git hook the host does not have",
		upper:   []node{exe(".git/hooks/pre-commit", "#!/bin/sh\ncurl evil\n")},
		paths:   []string{".git/hooks/pre-commit"},
		refused: []refusal{{".git/hooks/pre-commit", "protected: .git"}},
	}, {
		name:    "a hook by any letter case",
		upper:   []node{exe(".GIT/hooks/pre-commit", "x")},
		paths:   []string{".GIT"},
		refused: []refusal{{".GIT", "protected: .git"}, {".GIT/hooks", "protected: .git"}, {".GIT/hooks/pre-commit", "protected: .git"}},
	}, {
		name:    ".mcp.json among good changes",
		upper:   []node{file(".mcp.json", "{}"), file("good.txt", "g")},
		paths:   []string{"."},
		refused: []refusal{{".mcp.json", "protected: .mcp.json"}},
	}, {
		name:    ".claude/settings.json",
		host:    []node{file(".claude/settings.json", "{}")},
		upper:   []node{file(".claude/settings.json", `{"hooks":{}}`)},
		paths:   []string{"."},
		refused: []refusal{{".claude/settings.json", "protected: .claude"}},
	}, {
		name:    "core.hooksPath",
		host:    []node{file(".git/config", "[core]\n\tbare = false\n[Core]\n\thooksPath = tools/hooks\n")},
		upper:   []node{exe("tools/hooks/pre-commit", "x"), file("tools/other", "o")},
		paths:   []string{"tools"},
		refused: []refusal{{"tools/hooks", "protected: tools/hooks"}, {"tools/hooks/pre-commit", "protected: tools/hooks"}},
	}, {
		name:    "a deleted directory holding the hooks",
		host:    []node{file(".git/config", "[core]\nhooksPath = tools/hooks\n"), file("tools/hooks/pre-push", "x")},
		upper:   []node{whiteout("tools")},
		paths:   []string{"tools"},
		refused: []refusal{{"tools", "protected: tools/hooks"}, {"tools/hooks", "protected: tools/hooks"}, {"tools/hooks/pre-push", "protected: tools/hooks"}},
	}, {
		name:    "a deleted directory holding a repository",
		host:    []node{file("sub/.git/config", "[core]\n"), file("sub/a", "a")},
		upper:   []node{whiteout("sub")},
		paths:   []string{"sub"},
		refused: []refusal{{"sub", "protected: sub/.git"}, {"sub/.git", "protected: .git"}, {"sub/.git/config", "protected: .git"}},
	}, {
		name:    "a link to a host file",
		host:    []node{file("secret.txt", "s")},
		upper:   []node{link("evil", "/etc/passwd"), link("secret.txt", "/etc/shadow")},
		paths:   []string{"."},
		refused: []refusal{{"evil", "special: a symlink"}, {"secret.txt", "special: a symlink"}},
	}, {
		name:    "a FIFO",
		upper:   []node{fifo("p")},
		paths:   []string{"p"},
		refused: []refusal{{"p", "special: a fifo"}},
	}, {
		name:    "a name with a newline",
		upper:   []node{file("a\nb", "x"), file("ok", "ok")},
		paths:   []string{"."},
		refused: []refusal{{`"a\nb"`, "bad name"}},
	}, {
		name:    "a name with a newline, asked by its listed name",
		upper:   []node{file("a\nb", "x")},
		paths:   []string{`"a\nb"`},
		refused: []refusal{{`"a\nb"`, "bad name"}},
	}, {
		name:    "paths outside the project",
		upper:   []node{file("ok", "ok")},
		paths:   []string{"..", "../x", "/etc/passwd", "ok/../..", ""},
		refused: []refusal{{"..", "bad name"}, {"../x", "bad name"}, {"/etc/passwd", "bad name"}, {"ok/../..", "bad name"}, {"", "bad name"}},
	}, {
		name:    "through a host symlink",
		host:    []node{link("lnk", "/tmp")},
		upper:   []node{file("lnk/x", "x")},
		paths:   []string{"lnk/x"},
		refused: []refusal{{"lnk/x", "through a host symlink: lnk"}},
	}, {
		name:    "no change",
		host:    []node{file("a", "a")},
		upper:   []node{file("a", "a"), file("b", "b")},
		paths:   []string{"a", "nothing/here"},
		refused: []refusal{{"a", "no change"}, {"nothing/here", "no change"}},
	}, {
		name:    "core.hooksPath naming the project",
		host:    []node{file(".git/config", "[core]\n\thooksPath = .\n")},
		upper:   []node{exe("pre-commit", "x")},
		paths:   []string{"."},
		refused: []refusal{{"pre-commit", "protected: ."}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up, project := setup(t, tt.host, tt.upper)
			assertRefused(t, up, project, tt.paths, tt.refused)
		})
	}
}

// assertRefused applies paths and checks the refusals, and that neither
// the project nor the upper layer changed at all.
func assertRefused(t *testing.T, up, project string, paths []string, want []refusal) {
	t.Helper()
	hostBefore, upperBefore := treeHash(t, project), treeHash(t, up)
	for _, dry := range []bool{true, false} {
		res, err := Apply(up, project, paths, dry)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Changes) != 0 {
			t.Errorf("dry run %v: applied %q", dry, briefs(res.Changes))
		}
		var got []string
		for _, r := range res.Refused {
			got = append(got, r.Path+": "+r.Reason)
		}
		ok := len(got) == len(want)
		for i := 0; ok && i < len(want); i++ {
			ok = strings.HasPrefix(got[i], want[i].path+": "+want[i].reason)
		}
		if !ok {
			t.Errorf("dry run %v: refused %q, want %q", dry, got, want)
		}
	}
	if treeHash(t, project) != hostBefore {
		t.Error("a refused apply changed the project")
	}
	if treeHash(t, up) != upperBefore {
		t.Error("a refused apply changed the upper layer")
	}
}

func TestApplyDevice(t *testing.T) {
	up, project := setup(t, nil, []node{file("ok", "ok")})
	if err := unix.Mknod(filepath.Join(up, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Skipf("no device node made (only root makes one): %v", err)
	}
	assertRefused(t, up, project, []string{"."}, []refusal{{"null", "special: a device"}})
}

func TestApplyConflict(t *testing.T) {
	up, project := setup(t, []node{file("a.txt", "host\n"), file("b.txt", "b\n")}, []node{file("a.txt", "view\n"), whiteout("b.txt")})
	tick()
	for _, p := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(project, p), []byte("edited on the host\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	assertRefused(t, up, project, []string{"."}, []refusal{
		{"a.txt", "conflict"}, {"b.txt", "conflict"},
	})
}

func TestApplySwapped(t *testing.T) {
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("host secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	swap := func(up string) {
		p := filepath.Join(up, "a.txt")
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		during bool
		reason string
	}{
		{"between Compute and Apply", false, "special: a symlink"},
		{"while Apply stages it", true, "changed in the view during the apply"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up, project := setup(t, []node{file("a.txt", "one\n")}, []node{file("a.txt", "two\n"), file("b.txt", "b")})
			d, err := Compute(up, project, Options{})
			if err != nil || len(d.Changes) != 2 {
				t.Fatalf("compute: %v, %v", d, err)
			}
			hostBefore := treeHash(t, project)
			if tt.during {
				testHookStage = func() { swap(up) }
				t.Cleanup(func() { testHookStage = nil })
			} else {
				swap(up)
			}
			res, err := Apply(up, project, []string{"."}, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Changes) != 0 || len(res.Refused) != 1 || res.Refused[0].Path != "a.txt" || !strings.HasPrefix(res.Refused[0].Reason, tt.reason) {
				t.Errorf("applied %q, refused %+v", briefs(res.Changes), res.Refused)
			}
			if got, _ := os.ReadFile(target); string(got) != "host secret\n" {
				t.Errorf("the link's target holds %q", got)
			}
			if treeHash(t, project) != hostBefore {
				t.Error("the project changed")
			}
		})
	}
}

func TestTooDeep(t *testing.T) {
	up, project := setup(t, nil, nil)
	p := up
	for range maxDepth + 2 {
		p = filepath.Join(p, "d")
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Compute(up, project, Options{}); err == nil || !strings.Contains(err.Error(), "directories deep") {
		t.Errorf("Compute of a chain of %d directories: %v", maxDepth+2, err)
	}
	if _, err := Apply(up, project, []string{"."}, false); err == nil {
		t.Error("Apply of a chain too deep went ahead")
	}
}

// TestSwappingLayer has a command swap a file of the layer, as fast as it
// can, between itself, a link to a host file and a directory holding
// such a link, while Compute and Apply run: neither may read the host
// file through the layer nor write through the link.
func TestSwappingLayer(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("HOST SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	up, project := setup(t, []node{file("a.txt", "host\n")}, []node{file("a.txt", "view\n")})
	a := filepath.Join(up, "a.txt")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tmp := filepath.Join(up, ".tmp")
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			os.RemoveAll(tmp)
			switch i % 3 {
			case 0:
				os.WriteFile(tmp, []byte("view\n"), 0o644)
			case 1:
				os.Symlink(secret, tmp)
			case 2:
				os.Mkdir(tmp, 0o755)
				os.Symlink(secret, filepath.Join(tmp, "x"))
			}
			os.RemoveAll(a)
			os.Rename(tmp, a)
		}
	}()
	deadline := time.Now().Add(2 * time.Second)
	for n := 0; time.Now().Before(deadline); n++ {
		d, err := Compute(up, project, Options{Patch: true, All: true})
		if err == nil && strings.Contains(string(d.Patch), "SECRET") {
			t.Fatalf("Compute read the host file through the layer:\n%s", d.Patch)
		}
		if _, err := Apply(up, project, []string{"."}, n%2 == 0); err != nil {
			t.Logf("apply: %v", err)
		}
		if got, _ := os.ReadFile(filepath.Join(project, "a.txt")); strings.Contains(string(got), "SECRET") {
			t.Fatalf("Apply copied the host file: %q", got)
		}
	}
	close(stop)
	<-done
	if got, _ := os.ReadFile(secret); string(got) != "HOST SECRET\n" {
		t.Errorf("the host file holds %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(project, "a.txt")); err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
		t.Errorf("the project's a.txt is a %v", fi.Mode())
	}
}
