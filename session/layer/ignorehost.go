//go:build linux || darwin

package layer

import (
	"bufio"
	"io"
	"os"
	"path"

	"github.com/go-git/go-git/v5/plumbing/format/index"
	"golang.org/x/sys/unix"
)

// Which changes are summarised as ignored is decided by the host's
// project: its .gitignore files and .git/info/exclude, never the view's,
// which a command writes (a "*" added to a .gitignore in the view would
// hide every change from the review), but in a directory new in the view,
// whose own .gitignore can hide only what is new in it; and never for a
// path the
// host's git index tracks (git lists a tracked file's change whatever
// ignores it). A .gitignore the view changes is listed itself, wherever
// git would look at it: applied, it changes the host's rules.

// maxIndex is the largest git index read (a project of a million files
// has one of about 100 MiB); past it the index is not read, and what it
// tracks is summarised where ignored, as before the index was read.
const maxIndex = 256 << 20

// tracked is what the host's git index tracks: each path, and every
// directory above one.
type tracked map[string]bool

// readTracked reads the host's .git/index below the project's directory
// lfd with go-git's decoder, never by running git (whose configuration
// names programs). Nil when there is none or it cannot be read.
func readTracked(lfd int) tracked {
	g, gfd, err := openDir(lfd, ".git")
	if err != nil {
		return nil
	}
	defer g.Close()
	var st unix.Stat_t
	st, ok, err := lstat(gfd, "index")
	if err != nil || !ok || st.Size > maxIndex {
		return nil
	}
	f, err := openFile(gfd, "index", &st)
	if err != nil {
		return nil
	}
	defer f.Close()
	idx := &index.Index{}
	if err := index.NewDecoder(bufio.NewReader(io.LimitReader(f, maxIndex))).Decode(idx); err != nil {
		return nil
	}
	t := tracked{}
	for _, e := range idx.Entries {
		for p := e.Name; p != "." && p != "/" && p != "" && !t[p]; p = path.Dir(p) {
			t[p] = true
		}
	}
	return t
}

// viewIgnore reads the ignore file name of the view's directory u, a
// directory the host does not have; nothing when it is missing, not
// regular, or too large.
func viewIgnore(u dirRef, name string) []byte {
	if !u.ok() {
		return nil
	}
	st, ok, err := lstat(u.fd, name)
	if err != nil || !ok {
		return nil
	}
	return readSmall(u.fd, name, &st)
}

// hostIgnore reads the ignore file at path (its components) below the
// host's directory l, as the host has it; nothing when l is not a host
// directory, or the file is missing, not regular, or too large.
func hostIgnore(l dirRef, path ...string) []byte {
	if !l.ok() {
		return nil
	}
	fd := l.fd
	for _, c := range path[:len(path)-1] {
		var d *os.File
		var err error
		if d, fd, err = openDir(fd, c); err != nil {
			return nil
		}
		defer d.Close()
	}
	name := path[len(path)-1]
	st, ok, err := lstat(fd, name)
	if err != nil || !ok {
		return nil
	}
	return readSmall(fd, name, &st)
}
