package jailfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// openBelow opens the directory name of the directory parentFd for
// reading, never following a symlink. A directory the server may not read
// or search is given the owner's rights (fchmodat without following a
// symlink: macOS has no O_PATH), and mode is what it had, to give back
// through the returned descriptor once done; it is noRestore otherwise.
func openBelow(parentFd int, name string) (f *os.File, mode uint32, err error) {
	f, locked, err := openDir(parentFd, name)
	if !locked {
		return f, noRestore, err
	}
	var st unix.Stat_t
	if serr := unix.Fstatat(parentFd, name, &st, unix.AT_SYMLINK_NOFOLLOW); serr != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, noRestore, err
	}
	mode = uint32(st.Mode) & 0o7777
	if err := unix.Fchmodat(parentFd, name, mode|0o700, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, noRestore, err
	}
	fd, err := unix.Openat(parentFd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Fchmodat(parentFd, name, mode, unix.AT_SYMLINK_NOFOLLOW)
		return nil, noRestore, err
	}
	return os.NewFile(uintptr(fd), name), mode, nil
}
