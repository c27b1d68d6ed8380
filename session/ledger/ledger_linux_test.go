package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fixture is a project and a jail's upper layer beside it, written by
// hand as overlayfs would write it.
type fixture struct {
	t              *testing.T
	project, upper string
	l              *Ledger
}

func newFixture(t *testing.T, host map[string]string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{t: t, project: filepath.Join(dir, "project"), upper: filepath.Join(dir, "jail", ".overlay", "upper")}
	for _, d := range []string{f.project, f.upper} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, data := range host {
		f.write(f.project, p, data)
	}
	f.l = New(f.upper, f.project, nil)
	if _, err := f.l.Sync(); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) write(root, p, data string) {
	f.t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) sync() Changes {
	f.t.Helper()
	c, err := f.l.Sync()
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func conflictPaths(cs []Conflict) string {
	var s []string
	for _, c := range cs {
		s = append(s, c.Path+":"+c.Host)
	}
	return strings.Join(s, ",")
}

// TestIssueScenario: a call appends to p.txt (its copy in the layer);
// the host then edits p.txt and f.txt: p.txt is a conflict, f.txt none;
// a discard of p.txt leaves the host's.
func TestIssueScenario(t *testing.T) {
	f := newFixture(t, map[string]string{"p.txt": "one\n", "f.txt": "f\n"})
	f.write(f.upper, "p.txt", "one\ncall\n")
	f.write(f.upper, "new.txt", "n\n")
	c := f.sync()
	if c.Added != 1 || c.Modified != 1 || c.Deleted != 0 || len(c.First) != 2 || c.First[0].Path != "new.txt" || c.First[1] != (Path{"p.txt", "modified"}) {
		t.Fatalf("changes = %+v", c)
	}
	if got := conflictPaths(f.l.Conflicts(0)); got != "" {
		t.Fatalf("conflicts before the host's edit = %q", got)
	}
	f.write(f.project, "p.txt", "one\nhost\n")
	f.write(f.project, "f.txt", "f2\n")
	if got := conflictPaths(f.l.Conflicts(0)); got != "p.txt:modified" {
		t.Fatalf("conflicts = %q", got)
	}
	patch := f.l.ConflictPatch("p.txt", nil)
	for _, want := range []string{"### base -> host", "+host", "### base -> session", "+call"} {
		if !strings.Contains(patch, want) {
			t.Fatalf("conflict patch lacks %q:\n%s", want, patch)
		}
	}
	if c := f.sync(); c.Total() != 0 {
		t.Fatalf("a look with nothing changed = %+v", c)
	}
	dropped, err := f.l.Discard([]string{"p.txt"}, nil)
	if err != nil || strings.Join(dropped, ",") != "p.txt" {
		t.Fatalf("discard = %v, %v", dropped, err)
	}
	if _, err := os.Lstat(filepath.Join(f.upper, "p.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the copy stayed: %v", err)
	}
	if got := conflictPaths(f.l.Conflicts(0)); got != "" {
		t.Fatalf("conflicts after the discard = %q", got)
	}
	if _, err := f.l.Discard([]string{"p.txt"}, nil); !errors.Is(err, ErrNoEntry) {
		t.Fatalf("a second discard = %v", err)
	}
	if c := f.sync(); c.Total() != 0 {
		t.Fatalf("the discard was told as a call's change: %+v", c)
	}
}

// TestDirectoryModes: a directory whose permissions a call changed is
// told as modified, by that call (the copy made by a file's copy-up below
// it, and a file added in it, are not the directory's change).
func TestDirectoryModes(t *testing.T) {
	f := newFixture(t, map[string]string{"d/f": "1\n", "e/g": "2\n"})
	chmod := func(p string, mode os.FileMode) {
		t.Helper()
		if err := os.Chmod(filepath.Join(f.upper, p), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(f.upper, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	chmod("d", 0o700) // past the umask
	f.write(f.upper, "e/g", "2\ncall\n")
	chmod("e", 0o755)
	c := f.sync()
	if c.Modified != 2 || c.Added != 0 || len(c.First) != 2 || c.First[0] != (Path{"d", "modified"}) || c.First[1] != (Path{"e/g", "modified"}) {
		t.Fatalf("a directory's chmod and a file's copy-up = %+v", c)
	}
	f.write(f.upper, "d/new", "n\n")
	if c := f.sync(); c.Added != 1 || c.Modified != 0 {
		t.Fatalf("a file added in a directory = %+v", c)
	}
	chmod("d", 0o755)
	if c := f.sync(); c.Modified != 1 || c.First[0] != (Path{"d", "modified"}) {
		t.Fatalf("a directory's mode set back = %+v", c)
	}
}

// TestNoopCopies: a copy holding the host's bytes and mode is dropped by
// Refresh, a touched host file is no conflict, a copy with a new mode or
// new bytes stays.
func TestNoopCopies(t *testing.T) {
	f := newFixture(t, map[string]string{"same.txt": "s\n", "mode.sh": "m\n", "edit.txt": "e\n", "touched.txt": "t\n"})
	f.write(f.upper, "same.txt", "s\n")
	f.write(f.upper, "mode.sh", "m\n")
	os.Chmod(filepath.Join(f.upper, "mode.sh"), 0o755)
	f.write(f.upper, "edit.txt", "e2\n")
	f.write(f.upper, "touched.txt", "t2\n")
	f.sync()
	if n := f.l.Noops(); n != 1 {
		t.Fatalf("noops = %d, want 1", n)
	}
	later := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(f.project, "touched.txt"), later, later)
	if got := conflictPaths(f.l.Conflicts(0)); got != "" {
		t.Fatalf("a touch is a conflict: %q", got)
	}
	dropped, err := f.l.Refresh()
	if err != nil || strings.Join(dropped, ",") != "same.txt" {
		t.Fatalf("refresh = %v, %v", dropped, err)
	}
	for p, want := range map[string]bool{"same.txt": false, "mode.sh": true, "edit.txt": true} {
		_, err := os.Lstat(filepath.Join(f.upper, p))
		if (err == nil) != want {
			t.Errorf("%s in the layer after refresh: %v, want %v", p, err == nil, want)
		}
	}
	if c := f.sync(); c.Total() != 0 {
		t.Fatalf("the refresh was told as a call's change: %+v", c)
	}
	// A copy written again after it was found a no-op is not dropped.
	f.write(f.upper, "same.txt", "s\n")
	f.sync()
	f.write(f.upper, "same.txt", "changed\n")
	if dropped, _ := f.l.Refresh(); len(dropped) != 0 {
		t.Fatalf("refresh dropped a copy written since: %v", dropped)
	}
}

// TestUnknownBase: a host file changed after the call that copied it
// began is a conflict from the start (which state was copied is unknown).
func TestUnknownBase(t *testing.T) {
	f := newFixture(t, map[string]string{"p.txt": "one\n"})
	f.l.floor = func(int64) int64 { return 0 }
	f.write(f.upper, "p.txt", "one\n")
	f.sync()
	if got := conflictPaths(f.l.Conflicts(0)); got != "p.txt:unknown" {
		t.Fatalf("conflicts = %q", got)
	}
	if f.l.Noops() != 0 {
		t.Fatal("a copy of an unknown base is a no-op")
	}
}

// TestHostile: names with newlines and escapes are quoted, the paths
// named stay bounded, links are never followed, FIFOs never opened, and
// an opaque directory's files are never dropped.
func TestHostile(t *testing.T) {
	f := newFixture(t, map[string]string{"d/x": "x\n", "fifo": "f\n"})
	f.write(f.upper, "a\nb", "1")
	f.write(f.upper, "\x1b[31mred", "1")
	if err := os.Symlink("/etc/passwd", filepath.Join(f.upper, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(f.upper, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		f.write(f.upper, fmt.Sprintf("many/%04d", i), "")
	}
	done := make(chan Changes)
	go func() { done <- f.sync() }()
	var c Changes
	select {
	case c = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the look hangs (a FIFO opened?)")
	}
	if c.Added != 3004 || c.Modified != 1 || len(c.First) != FirstPaths {
		t.Fatalf("changes = %d added, %d modified, first %v", c.Added, c.Modified, c.First)
	}
	for _, p := range c.First {
		if strings.ContainsAny(p.Path, "\n\x1b") {
			t.Fatalf("a name is not quoted: %q", p.Path)
		}
	}
	if c.First[0].Path != `"\x1b[31mred"` || c.First[1].Path != `"a\nb"` {
		t.Fatalf("first = %v", c.First)
	}
	// An opaque directory: its file holds the host's bytes, but the host's
	// is hidden there; it is never dropped, nor discarded on its own.
	f.write(f.upper, "d/x", "x\n")
	if err := unix.Setxattr(filepath.Join(f.upper, "d"), "user.overlay.opaque", []byte("y"), 0); err != nil {
		t.Skipf("no user xattrs here: %v", err)
	}
	f.sync()
	if dropped, _ := f.l.Refresh(); len(dropped) != 0 {
		t.Fatalf("refresh dropped %v from an opaque directory", dropped)
	}
	if _, err := f.l.Discard([]string{"d/x"}, nil); err == nil || !strings.Contains(err.Error(), "discard d instead") {
		t.Fatalf("discard in an opaque directory = %v", err)
	}
	if _, err := f.l.Discard([]string{"d", "link", "fifo"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Fatalf("the link's target went: %v", err)
	}
}
