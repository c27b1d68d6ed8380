package layer

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-mcp/jail-mcp/session/jailfs/jailfstest"
)

// node is an entry of a fabricated tree: a host project or an upper
// layer as overlayfs leaves it.
type node struct {
	path string
	kind byte // 'f' file, 'd' directory, 'o' opaque directory, 'w' whiteout, 'l' link, 'p' FIFO
	data string
	mode os.FileMode
}

func file(p, data string) node { return node{p, 'f', data, 0o644} }
func exe(p, data string) node  { return node{p, 'f', data, 0o755} }
func dir(p string) node        { return node{p, 'd', "", 0o755} }
func opaque(p string) node     { return node{p, 'o', "", 0o755} }
func whiteout(p string) node   { return node{p, 'w', "", 0} }
func link(p, to string) node   { return node{p, 'l', to, 0} }
func fifo(p string) node       { return node{p, 'p', "", 0o644} }

// build makes the nodes under root, with the directories above each.
// Directories get their modes last, so that a read-only one is filled
// first by a user who is not root.
func build(t testing.TB, root string, nodes ...node) {
	t.Helper()
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	var dirs []node
	defer func() {
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Chmod(filepath.Join(root, dirs[i].path), dirs[i].mode); err != nil {
				t.Fatal(err)
			}
		}
	}()
	for _, n := range nodes {
		p := filepath.Join(root, n.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch n.kind {
		case 'f':
			if err = os.WriteFile(p, []byte(n.data), n.mode); err == nil {
				err = os.Chmod(p, n.mode)
			}
		case 'd', 'o':
			err = os.MkdirAll(p, 0o755)
			dirs = append(dirs, n)
			if err == nil && n.kind == 'o' {
				err = unix.Setxattr(p, "user.overlay.opaque", []byte("y"), 0)
			}
		case 'w':
			err = unix.Mknod(p, unix.S_IFCHR, 0)
		case 'l':
			err = os.Symlink(n.data, p)
		case 'p':
			err = unix.Mkfifo(p, uint32(n.mode))
		}
		if err != nil {
			t.Fatalf("making %q: %v", n.path, err)
		}
	}
}

// setup makes a host project and then an upper layer of the same
// session, at the path the server keeps it (<jail>/.overlay/upper).
func setup(t testing.TB, host, upper []node) (string, string) {
	t.Helper()
	tmp := t.TempDir()
	project := filepath.Join(tmp, "project")
	up := filepath.Join(tmp, "jail", ".overlay", "upper")
	build(t, project, host...)
	build(t, up, upper...)
	return up, project
}

// treeHash sums every entry under root (path, type, permission bits,
// bytes or link target), following no link.
func treeHash(t testing.TB, root string) string {
	t.Helper()
	entries := jailfstest.Tree(t, root, func(p string, fi fs.FileInfo) (string, error) {
		var body []byte
		var err error
		switch {
		case fi.Mode().IsRegular():
			body, err = os.ReadFile(p)
		case fi.Mode()&fs.ModeSymlink != 0:
			var target string
			target, err = os.Readlink(p)
			body = []byte(target)
		}
		return fmt.Sprintf("%v\n%s", fi.Mode(), body), err
	})
	h := sha256.New()
	for _, rel := range slices.Sorted(maps.Keys(entries)) {
		fmt.Fprintf(h, "%q %s\n", rel, entries[rel])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// brief is a change as the tests write it.
func brief(c Change) string {
	s := c.Change + " " + c.Type + " " + c.Path
	if c.HostType != "" && c.HostType != c.Type {
		s += " host=" + c.HostType
	}
	if c.Mode != "" {
		s += " mode=" + c.Mode
	}
	if c.Special {
		s += " special"
	}
	if c.Target != "" {
		s += " -> " + c.Target
	}
	return s
}

func briefs(cs []Change) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, brief(c))
	}
	return out
}

// overlayWorks reports whether this kernel mounts overlayfs with
// userxattr in an unprivileged user namespace.
var overlayWorks = sync.OnceValue(func() error {
	if _, err := exec.LookPath("unshare"); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "layer-overlay-probe")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, d := range []string{"l", "u", "w", "m"} {
		os.Mkdir(filepath.Join(tmp, d), 0o755)
	}
	_, err = mountAndRun(filepath.Join(tmp, "l"), filepath.Join(tmp, "u"), filepath.Join(tmp, "w"), filepath.Join(tmp, "m"), "true")
	return err
})

// inView runs a shell script in the view: the project mounted with
// overlayfs over itself, as --overlay does, with the upper layer up.
func inView(t testing.TB, project, up, script string) {
	t.Helper()
	if err := overlayWorks(); err != nil {
		t.Skipf("no overlayfs in an unprivileged user namespace (unshare -Urm): %v", err)
	}
	work := filepath.Join(filepath.Dir(up), "work")
	for _, d := range []string{up, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The kernel leaves work/work with mode 0: t.TempDir could not
	// empty it as a user who is not root.
	t.Cleanup(func() { makeWritable(work) })
	if out, err := mountAndRun(project, up, work, project, script); err != nil {
		t.Fatalf("running %q in the view: %v\n%s", script, err, out)
	}
}

func mountAndRun(lower, upper, work, mnt, script string) ([]byte, error) {
	opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work + ",userxattr"
	cmd := exec.Command("unshare", "-Urm", "sh", "-euc",
		`mount -t overlay overlay -o "$1" "$2" && cd "$2" && eval "$3"`, "sh", opts, mnt, script)
	return cmd.CombinedOutput()
}

// viewHash is treeHash of the view.
func viewHash(t testing.TB, project, up string) string {
	t.Helper()
	// The tree is hashed inside the mount namespace: print the listing
	// with sha256sum of every file, links and modes included.
	script := `find . -path ./.git -prune -o -printf '%P %y %m %l\n' | LC_ALL=C sort; find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum`
	if err := overlayWorks(); err != nil {
		t.Skipf("no overlayfs in an unprivileged user namespace (unshare -Urm): %v", err)
	}
	work := filepath.Join(filepath.Dir(up), "work")
	out, err := mountAndRun(project, up, work, project, script)
	if err != nil {
		t.Fatalf("listing the view: %v\n%s", err, out)
	}
	return string(out)
}

// hostListing is viewHash's listing of the host project itself.
func hostListing(t testing.TB, project string) string {
	t.Helper()
	cmd := exec.Command("sh", "-euc", `cd "$1" && find . -path ./.git -prune -o -printf '%P %y %m %l\n' | LC_ALL=C sort; find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum`, "sh", project)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("listing the project: %v\n%s", err, out)
	}
	return string(out)
}

// upperNames lists the upper layer's paths, sorted.
func upperNames(t testing.TB, up string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(up, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != up {
			rel, _ := filepath.Rel(up, p)
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// tick waits out the file system's clock granularity, so that what is
// written next has a later change time than what was written before.
func tick() { time.Sleep(20 * time.Millisecond) }

// makeWritable gives the owner write access to every directory under
// root, so that t.TempDir's removal works for a user who is not root.
func makeWritable(root string) {
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			if fi, err := d.Info(); err == nil {
				os.Chmod(p, fi.Mode().Perm()|0o700)
			}
		}
		return nil
	})
}
