package jailfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/session/jailfs/jailfstest"
)

// TestWalkComb: a walk deeper than its window of descriptors, with a
// directory and a file at every level and directories a command locked
// (chmod 000) on the way, counts what the host's own walk counts, gives
// every locked directory its mode back, and empties it all.
func TestWalkComb(t *testing.T) {
	_, top, root := jailOf(t, "comb")
	p := top
	var locked []string
	for i := range 3 * walkWindow {
		if err := os.WriteFile(filepath.Join(p, "f"), []byte(strings.Repeat("x", i)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(p, "side", "leaf"), 0o700); err != nil {
			t.Fatal(err)
		}
		if i%40 == 7 {
			locked = append(locked, p)
		}
		p = filepath.Join(p, "d")
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	want := hostUsage(t, top)
	for i := len(locked) - 1; i >= 0; i-- { // from the bottom: each needs the way down
		if err := os.Chmod(locked[i], 0o000); err != nil {
			t.Fatal(err)
		}
	}
	for i := len(locked) - 1; i >= 0; i-- {
		defer os.Chmod(locked[i], 0o700)
	}
	got, err := CountRoot(root)
	if err != nil || got != want {
		t.Errorf("CountRoot = %+v, %v; the host counts %+v", got, err, want)
	}
	// Each locked directory has its mode back; opened by the test (from
	// the top down) to look at the next one, then locked again.
	for _, d := range locked {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0 {
			t.Errorf("%s after the walk: %v %v", d, fi.Mode(), err)
		}
		os.Chmod(d, 0o700)
	}
	for i := len(locked) - 1; i >= 0; i-- {
		os.Chmod(locked[i], 0o000)
	}
	removed, err := EmptyRoot(root)
	if err != nil || removed != want {
		t.Errorf("EmptyRoot = %+v, %v; want %+v", removed, err, want)
	}
	if left, err := CountRoot(root); err != nil || left != (Usage{}) {
		t.Errorf("left after emptying: %+v, %v", left, err)
	}
}

// hostUsage is what the file system spends below dir, by the host's own
// walk (jailfstest.HostUsage).
func hostUsage(t testing.TB, dir string) Usage {
	t.Helper()
	files, bytes := jailfstest.HostUsage(t, dir)
	return Usage{Files: files, Bytes: bytes}
}
