package jailfs

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// openBelow opens the directory name of the directory parentFd for
// reading, never following a symlink. A directory the server may not read
// or search (a command's chmod 000 in its own jail) is given the owner's
// rights, and mode is what it had, to give back through the returned
// descriptor (restoreMode) once done; it is noRestore otherwise. The mode
// is changed through an O_PATH descriptor's magic link, so never on what a
// command swapped in since.
func openBelow(parentFd int, name string) (f *os.File, mode uint32, err error) {
	f, locked, err := openDir(parentFd, name)
	if !locked {
		return f, noRestore, err
	}
	pfd, perr := unix.Openat(parentFd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if perr != nil {
		return nil, noRestore, err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, noRestore, err
	}
	link := "/proc/self/fd/" + strconv.Itoa(pfd)
	mode = st.Mode & 0o7777
	if err := unix.Chmod(link, mode|0o700); err != nil {
		return nil, noRestore, err
	}
	fd, err := unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Chmod(link, mode)
		return nil, noRestore, err
	}
	return os.NewFile(uintptr(fd), name), mode, nil
}
