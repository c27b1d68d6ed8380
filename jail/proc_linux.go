package jail

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// groupAttr puts a command in a process group of its own, killed as one,
// and kills it if the server dies.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// openDir opens dir to give it by a descriptor, without following a link.
func openDir(dir string) (*os.File, error) {
	return os.OpenFile(dir, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY, 0)
}
