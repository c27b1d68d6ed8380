package view

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestViewWatch: the project's number changes with every change of its
// directories' entries, at once for the next call (a change not read
// yet), not with a write into a file in place nor a change in a skipped
// directory; agents are told after viewQuiet; past its bound the watch is
// blind (0), and sees all again once back within it.
func TestViewWatch(t *testing.T) {
	project := t.TempDir()
	for _, d := range []string{"a/b", ".agent-home/s", "node_modules"} {
		os.MkdirAll(filepath.Join(project, d), 0o755)
	}
	os.WriteFile(filepath.Join(project, "a/f"), []byte("0"), 0o644)
	var told atomic.Uint64
	w := newWatch(project, []string{filepath.Join(project, ".agent-home"), filepath.Join(project, "node_modules")}, 100, func(g uint64) { told.Store(g) }, nil)
	defer w.close()
	g := w.current()
	if g == 0 {
		t.Fatal("a watch of a small project is blind")
	}
	same := func(what string) {
		t.Helper()
		if n := w.current(); n != g {
			t.Fatalf("%s changed the number %d -> %d", what, g, n)
		}
	}
	changed := func(what string) {
		t.Helper()
		n := w.current()
		if n <= g {
			t.Fatalf("%s left the number at %d", what, n)
		}
		g = n
	}
	os.WriteFile(filepath.Join(project, "a/f"), []byte("1"), 0o644)
	same("a write in place")
	os.WriteFile(filepath.Join(project, ".agent-home/s/x"), nil, 0o644)
	os.WriteFile(filepath.Join(project, "node_modules/x"), nil, 0o644)
	same("a change in a skipped directory")
	for _, change := range []struct {
		what string
		do   func() error
	}{
		{"a file made deep down", func() error { return os.WriteFile(filepath.Join(project, "a/b/new"), nil, 0o644) }},
		{"a file renamed over another", func() error {
			os.WriteFile(filepath.Join(project, "a/.swp"), []byte("2"), 0o644)
			return os.Rename(filepath.Join(project, "a/.swp"), filepath.Join(project, "a/f"))
		}},
		{"a directory made", func() error { return os.Mkdir(filepath.Join(project, "a/c"), 0o755) }},
		{"a file made in it", func() error { return os.WriteFile(filepath.Join(project, "a/c/x"), nil, 0o644) }},
		{"a file removed", func() error { return os.Remove(filepath.Join(project, "a/b/new")) }},
		{"a mode changed", func() error { return os.Chmod(filepath.Join(project, "a/f"), 0o600) }},
	} {
		if err := change.do(); err != nil {
			t.Fatal(err)
		}
		changed(change.what)
	}
	deadline := time.Now().Add(10 * time.Second)
	for told.Load() < g-1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if told.Load() == 0 {
		t.Fatal("no agent told of the changes")
	}
	// Past the bound: blind.
	for i := range 120 {
		os.MkdirAll(filepath.Join(project, "many", string(rune('a'+i%26)), string(rune('a'+i/26))), 0o755)
	}
	for time.Now().Before(deadline) && w.current() != 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if w.current() != 0 {
		t.Fatal("a watch past its bound is not blind")
	}
	// Back within it: it sees all again, with a new number.
	if err := os.RemoveAll(filepath.Join(project, "many")); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && w.current() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if n := w.current(); n <= g {
		t.Fatalf("the watch back within its bound numbers %d, want more than %d", n, g)
	}
	if why, _ := w.state(); why != "" {
		t.Fatalf("the watch back within its bound is blind: %s", why)
	}
	// A directory removed is no blindness (the kernel drops its watch).
	g = w.current()
	if err := os.RemoveAll(filepath.Join(project, "a/c")); err != nil {
		t.Fatal(err)
	}
	changed("a directory removed")
	os.WriteFile(filepath.Join(project, "a/y"), nil, 0o644) // an event after the removal's
	changed("a file made after")
	if why, _ := w.state(); why != "" {
		t.Fatalf("a directory removed made the watch blind: %s", why)
	}
}
