package jail

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestViewGuard: a call's guard names an inode its read view granted by a
// rule of its own once the host moved it into a denied path (a file onto
// a denied name, a directory into a denied directory), and nothing for a
// move elsewhere, a new file, or a denied path's own change.
func TestViewGuard(t *testing.T) {
	home, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{".ssh", "stagedir", "keep"} {
		if err := os.Mkdir(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"stage.txt", "other.txt", ".ssh/known_hosts"} {
		if err := os.WriteFile(filepath.Join(home, f), []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	v := readView{hidden: []string{filepath.Join(home, ".pgpass"), filepath.Join(home, ".ssh")}, shown: []string{home}}
	fd, _, held, err := viewRuleset(v, nil)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	g := held.guard()
	held.release() // the guard holds its own
	if g == nil {
		t.Fatal("no guard for a view that grants the home's entries")
	}
	defer g.end()
	mv := func(from, to string) {
		t.Helper()
		if err := os.Rename(filepath.Join(home, from), filepath.Join(home, to)); err != nil {
			t.Fatal(err)
		}
	}
	if why := g.check(false); why != "" {
		t.Fatalf("nothing moved, the guard says %q", why)
	}
	mv("other.txt", "keep/other.txt")
	os.WriteFile(filepath.Join(home, "new.txt"), nil, 0o600)
	os.WriteFile(filepath.Join(home, ".ssh/id_ed25519"), []byte("k\n"), 0o600)
	if why := g.check(false); why != "" {
		t.Fatalf("a move to a shown place, a new file and a denied path's own change: the guard says %q", why)
	}
	mv("stage.txt", ".pgpass")
	if why := g.check(false); !strings.Contains(why, filepath.Join(home, ".pgpass")) || !strings.Contains(why, "stage.txt") {
		t.Errorf("a granted file moved onto a denied name: the guard says %q", why)
	}
	mv(".pgpass", "stage.txt")
	if why := g.check(false); why != "" {
		t.Fatalf("moved back: the guard says %q", why)
	}
	mv("stagedir", ".ssh/stagedir")
	if why := g.check(false); !strings.Contains(why, filepath.Join(home, ".ssh/stagedir")) {
		t.Errorf("a granted directory moved into a denied one: the guard says %q", why)
	}
	// A move the stamps do not show (made between a grant's open and its
	// directory's stamp, or within a coarse clock's tick): the full look
	// finds it.
	mv(".ssh/stagedir", "stagedir")
	g.check(false)
	mv("stage.txt", ".pgpass")
	for i := range g.dirs {
		g.dirs[i], _ = stampOf(g.dirs[i].path)
	}
	if why := g.check(false); why != "" {
		t.Fatalf("stamps as they are now: the guard's look at them says %q", why)
	}
	if why := g.check(true); !strings.Contains(why, filepath.Join(home, ".pgpass")) {
		t.Errorf("a move no stamp shows: the full look says %q", why)
	}
}
