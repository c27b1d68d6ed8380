package session

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// procAttr puts the command in a process group of its own, killed as one.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func killProcessGroup(pgid int) { syscall.Kill(-pgid, syscall.SIGKILL) }

// signalName is the conventional name of sig, SIGKILL say.
func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return fmt.Sprintf("SIG%d", int(sig))
}

// closeRangeCloexec does not exist here: the descriptors are listed.
func closeRangeCloexec() error { return errors.ErrUnsupported }

// openPath and openHostPath return no descriptor: no backend of this OS
// binds paths, so the session copies credentials instead.
func openPath(root *os.Root, name string) (*os.File, error) { return nil, nil }

func openHostPath(name string) (*os.File, error) { return nil, nil }

const fileSizeSignal = int(syscall.SIGXFSZ)
