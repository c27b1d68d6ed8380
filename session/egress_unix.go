//go:build unix

package session

import (
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// dial is a new connection to the proxy, for a session agent that
// forwards to it from a sandbox of its own network (bwrap): one end of a
// socket pair, the proxy serving the other.
func (e *agentEgress) dial() (*os.File, error) {
	// (Close-on-exec before any fork can see them: macOS has no
	// SOCK_CLOEXEC.)
	syscall.ForkLock.RLock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fds[0])
		unix.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, err
	}
	ours := os.NewFile(uintptr(fds[0]), "egress")
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, err
	}
	go e.proxy.ServeConn(c)
	return os.NewFile(uintptr(fds[1]), "egress"), nil
}
