package testkit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Node is what the suite compares of one host path.
// Node is what a host snapshot records of one path: all that a write,
// a change of metadata or a replacement changes.
type Node struct {
	Mode                fs.FileMode
	UID, GID            uint32
	Size                int64
	Ino, Nlink          uint64
	Atime, Mtime, Ctime int64
	Target              string // of a symlink
	Sum                 string // of a regular file's content
	Xattrs              string
}

// StateOf is the Node of path (not followed); the zero Node when it is gone.
func StateOf(path string) Node {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return Node{}
	}
	n := Node{
		Mode: fs.FileMode(st.Mode), UID: st.Uid, GID: st.Gid, Size: st.Size, Ino: st.Ino, Nlink: st.Nlink,
		Atime: st.Atim.Nano(), Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(),
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		n.Target, _ = os.Readlink(path)
	case unix.S_IFREG:
		if b, err := os.ReadFile(path); err == nil {
			sum := sha256.Sum256(b)
			n.Sum = hex.EncodeToString(sum[:8])
		}
	}
	buf := make([]byte, 4096)
	if sz, err := unix.Llistxattr(path, buf); err == nil && sz > 0 {
		for _, name := range strings.Split(strings.TrimRight(string(buf[:sz]), "\x00"), "\x00") {
			val := make([]byte, 256)
			vn, _ := unix.Lgetxattr(path, name, val)
			n.Xattrs += fmt.Sprintf("%s=%x;", name, val[:max(vn, 0)])
		}
	}
	return n
}

// Snapshot records every path under each of roots, by its absolute path
// (those in opaque as their type only, not entered), and every match of
// globs.
func Snapshot(roots []string, opaque map[string]bool, globs ...string) map[string]Node {
	snap := map[string]Node{}
	for _, root := range roots {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if opaque[p] {
				snap[p] = Node{Mode: d.Type()}
				return fs.SkipDir
			}
			snap[p] = StateOf(p)
			return nil
		})
	}
	for _, g := range globs {
		matches, _ := filepath.Glob(g)
		for _, m := range matches {
			snap[m] = StateOf(m)
		}
	}
	return snap
}

// DiffSnapshots lists, sorted, every path removed, changed or added
// between two snapshots.
func DiffSnapshots(before, after map[string]Node) []string {
	var out []string
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			out = append(out, "removed "+p)
		case a != b:
			out = append(out, fmt.Sprintf("changed %s:\n  before %+v\n  after  %+v", p, b, a))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			out = append(out, "added "+p)
		}
	}
	slices.Sort(out)
	return out
}
