//go:build linux || darwin

package layer

import (
	"bufio"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

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

// readTracked reads the index of the repository git uses in project
// (discover: a .git directory or file above it, a linked worktree's
// gitdir, GIT_DIR), with go-git's decoder, never by running git (whose
// configuration names programs): the paths it tracks below the project,
// relative to it. Nil when there is none or it cannot be read.
func readTracked(project string) tracked {
	repos, err := discover(project)
	if err != nil || len(repos) == 0 || repos[0].top == "" {
		return nil
	}
	r := repos[0] // GIT_DIR's when set, as git takes it
	prefix, err := filepath.Rel(r.top, project)
	if err != nil || prefix == ".." || strings.HasPrefix(prefix, "../") {
		return nil
	}
	prefix = strings.TrimPrefix(prefix+"/", "./")
	f, err := os.OpenFile(filepath.Join(r.gitdir, "index"), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxIndex {
		return nil
	}
	idx := &index.Index{}
	if err := index.NewDecoder(bufio.NewReader(io.LimitReader(f, maxIndex))).Decode(idx); err != nil {
		return nil
	}
	t := tracked{}
	for _, e := range idx.Entries {
		name, ok := strings.CutPrefix(e.Name, prefix)
		if !ok {
			continue
		}
		for p := name; p != "." && p != "/" && p != "" && !t[p]; p = path.Dir(p) {
			t[p] = true
		}
	}
	return t
}

// readIgnore reads the ignore file at path (its components) below the
// directory l, the host's or the view's (a directory new in it); nothing
// when l is none, or the file is missing, not regular, or too large.
func readIgnore(l dirRef, path ...string) []byte {
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
