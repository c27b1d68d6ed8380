//go:build linux || darwin

package jailfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// errNotRealDir is a component of a writable path that is a symlink, or
// not a directory.
var errNotRealDir = errors.New("a symlink or not a directory")

// OpenWritable opens dir, a writable directory of project
// (session.ResolveWritable), walking down from project one component at a time
// without ever following a link: a component that is one, or is not a
// directory, is refused, whatever was placed there since the server
// started (a command of another session that writes the directory above
// it). With create, what is missing is made on the way. On Linux the
// descriptor is O_PATH, for a backend to bind or grant rights to.
func OpenWritable(project, dir string, create bool) (*os.File, error) {
	rel, err := filepath.Rel(project, dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("%s is not inside the project %s", dir, project)
	}
	fd, err := unix.Open(project, unix.O_DIRECTORY|unix.O_CLOEXEC|oPath, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: project, Err: err}
	}
	p := project
	for _, part := range strings.Split(filepath.ToSlash(rel), "/") {
		p = filepath.Join(p, part)
		next, err := openRealDir(fd, part)
		if errors.Is(err, unix.ENOENT) && create {
			if err = unix.Mkdirat(fd, part, 0o777); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = openRealDir(fd, part)
			}
		}
		unix.Close(fd)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: p, Err: err}
		}
		fd = next
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// openRealDir opens name in the directory dirfd, a directory and not a
// symlink.
func openRealDir(dirfd int, name string) (int, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|oPath, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return -1, errNotRealDir
	}
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(fd)
		return -1, errNotRealDir
	}
	return fd, nil
}
