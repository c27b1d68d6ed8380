//go:build unix

package session

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// dial is a new connection to the proxy, for a session agent that
// forwards to it from a sandbox of its own network (bwrap): one end of a
// socket pair, the proxy serving the other.
func (e *agentEgress) dial() (*os.File, error) {
	select {
	case e.live <- struct{}{}:
	default:
		return nil, fmt.Errorf("%d connections to the proxy at once", cap(e.live))
	}
	release := sync.OnceFunc(func() { <-e.live })
	f, err := e.socketPair(release)
	if err != nil {
		release()
	}
	return f, err
}

// socketPair makes the pair: the proxy serves one end until it closes it
// (release then), the other is returned.
func (e *agentEgress) socketPair(release func()) (*os.File, error) {
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
	go e.proxy.ServeConn(&releasingConn{Conn: c, release: release})
	return os.NewFile(uintptr(fds[1]), "egress"), nil
}

// releasingConn calls release once it is closed.
type releasingConn struct {
	net.Conn
	release func()
}

func (c *releasingConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// NetConn is the socket itself, for a relay that copies between sockets.
func (c *releasingConn) NetConn() net.Conn { return c.Conn }

// ReadFrom copies in large pieces what the kernel cannot move itself (a
// plain GET's body, from the HTTP transport): fewer, larger writes to the
// socket pair.
func (c *releasingConn) ReadFrom(r io.Reader) (int64, error) {
	return io.CopyBuffer(c.Conn, r, make([]byte, 256<<10))
}
