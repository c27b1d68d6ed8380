//go:build linux || darwin

package layer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// Every look at the layer goes from a directory's descriptor to one name
// in it (openat, fstatat, readlinkat, unlinkat with O_NOFOLLOW or
// AT_SYMLINK_NOFOLLOW), never by a path: a name from getdents holds no
// slash, so there is no link to follow and no ".." to climb, whatever a
// command swaps in between two calls. The host's project is read the same
// way, so that a link there is seen as a link too.

// errNotRegular is an entry that is no longer the regular file it was
// when looked at: the command swapped it.
var errNotRegular = errors.New("not a regular file")

// maxDepth bounds a walk's directories, each holding a descriptor for the
// layer and one for the host: no real project is this deep (a path of
// 4096 bytes names at most 2048 levels), a command's chain of directories
// could be.
const maxDepth = 1024

// openDir opens the directory name of the directory dirfd, never
// following a link.
func openDir(dirfd int, name string) (*os.File, int, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, -1, err
	}
	return os.NewFile(uintptr(fd), name), fd, nil
}

// openUpper opens the upper directory. Its last two components
// (.overlay/upper) lie in the session's jail, where a command may have
// planted a link to a host directory that the server would then read and
// drop files from: neither is followed. The directories above are the
// server's.
func openUpper(upper string) (*os.File, int, error) {
	upper = filepath.Clean(upper)
	parent := filepath.Dir(upper)
	top, topFd, err := openDir(unix.AT_FDCWD, filepath.Dir(parent))
	if err != nil {
		return nil, -1, err
	}
	defer top.Close()
	mid, midFd, err := openDir(topFd, filepath.Base(parent))
	if err != nil {
		return nil, -1, err
	}
	defer mid.Close()
	return openDir(midFd, filepath.Base(upper))
}

// openPath opens the directory rel (clean, not ".") below the directory
// rootFd, one component at a time.
func openPath(rootFd int, rel string) (*os.File, int, error) {
	var dir *os.File
	fd := rootFd
	for _, c := range splitPath(rel) {
		next, nextFd, err := openDir(fd, c)
		if dir != nil {
			dir.Close()
		}
		if err != nil {
			return nil, -1, err
		}
		dir, fd = next, nextFd
	}
	return dir, fd, nil
}

// lstat is fstatat without following a link; ok is false when there is no
// such entry.
func lstat(dirfd int, name string) (st unix.Stat_t, ok bool, err error) {
	err = unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return st, false, nil
	}
	return st, err == nil, err
}

// names lists a directory's entries, sorted.
func names(dir *os.File) ([]string, error) {
	ns, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(ns)
	return ns, nil
}

// openFile opens the regular file name of the directory dirfd for
// reading, as want (an fstatat of it) saw it. It is opened non-blocking
// (a FIFO swapped in does not hang the open, a device opens no terminal)
// and checked again once open: the same inode, still a regular file.
func openFile(dirfd int, name string, want *unix.Stat_t) (*os.File, error) {
	if uint32(want.Mode)&unix.S_IFMT != unix.S_IFREG {
		return nil, errNotRegular
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, errNotRegular
		}
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG || st.Ino != want.Ino || st.Dev != want.Dev {
		unix.Close(fd)
		return nil, errNotRegular
	}
	return os.NewFile(uintptr(fd), name), nil
}

// readLink reads the target of the link name of the directory dirfd.
func readLink(dirfd int, name string) (string, error) {
	for n := 256; ; n *= 2 {
		buf := make([]byte, n)
		m, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if m < n {
			return string(buf[:m]), nil
		}
		if n >= 1<<16 {
			return "", fmt.Errorf("reading the link %s: target too long", shown(name))
		}
	}
}

// isOpaque reports whether the upper directory fd hides the host's
// directory below it: user.overlay.opaque is "y" (the userxattr form).
// "x" only says that the directory may hold whiteouts of the xattr kind,
// which overlayfs honours in lower layers alone.
func isOpaque(fd int) bool {
	var buf [2]byte
	n, err := unix.Fgetxattr(fd, "user.overlay.opaque", buf[:])
	return err == nil && n == 1 && buf[0] == 'y'
}

// kind names an entry's type as Change lists it.
func kind(st *unix.Stat_t) string {
	switch uint32(st.Mode) & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	default:
		return "device"
	}
}

// isWhiteout reports whether an upper entry is a whiteout: a character
// device 0/0, what overlayfs leaves where the view deleted a host entry.
func isWhiteout(st *unix.Stat_t) bool {
	return uint32(st.Mode)&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0
}

func isDir(st *unix.Stat_t) bool { return uint32(st.Mode)&unix.S_IFMT == unix.S_IFDIR }
func isReg(st *unix.Stat_t) bool { return uint32(st.Mode)&unix.S_IFMT == unix.S_IFREG }

// perm is what Apply gives a file of its mode: the permission bits, never
// setuid, setgid or sticky.
func perm(st *unix.Stat_t) uint32 { return uint32(st.Mode) & 0o777 }

// sameFile reports whether two open regular files of n bytes hold the
// same bytes; a file that does not hold n is not the same.
func sameFile(a, b io.Reader, n int64, bufA, bufB []byte) (bool, error) {
	for n > 0 {
		m := int64(len(bufA))
		if n < m {
			m = n
		}
		if _, err := io.ReadFull(a, bufA[:m]); err != nil {
			return false, ignoreShort(err)
		}
		if _, err := io.ReadFull(b, bufB[:m]); err != nil {
			return false, ignoreShort(err)
		}
		if string(bufA[:m]) != string(bufB[:m]) {
			return false, nil
		}
		n -= m
	}
	return true, nil
}

// ignoreShort drops the error of a file shorter than its stat said: it
// was written to since, and so differs.
func ignoreShort(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil
	}
	return err
}
