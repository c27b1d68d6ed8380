package session

import (
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// procAttr puts the command in a process group of its own, killed as one,
// and kills it if the server dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func killProcessGroup(pgid int) { syscall.Kill(-pgid, syscall.SIGKILL) }

// signalName is the conventional name of sig, SIGKILL say.
func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return fmt.Sprintf("SIG%d", int(sig))
}

// closeInheritedFDs marks every descriptor above 2 close-on-exec. Go opens
// its own files that way, but descriptors the server inherited from whoever
// started it are not, and would otherwise reach every jailed command.
func closeInheritedFDs() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Kernels before 5.11: walk the descriptors one by one.
	fds, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("mark inherited descriptors close-on-exec: %w", err)
	}
	for _, e := range fds {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}

// openPath opens name inside root as an O_PATH descriptor without
// following a final symlink, for a backend to bind by descriptor.
func openPath(root *os.Root, name string) (*os.File, error) {
	return root.OpenFile(name, unix.O_PATH|unix.O_NOFOLLOW, 0)
}

// openHostPath opens a host path outside any jail as an O_PATH descriptor.
func openHostPath(name string) (*os.File, error) {
	return os.OpenFile(name, unix.O_PATH, 0)
}

// fileSizeSignal is SIGXFSZ, sent to a process that writes past the
// per-file bound.
const fileSizeSignal = int(unix.SIGXFSZ)
