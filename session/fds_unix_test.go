//go:build linux || darwin

package session

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestMarkListed: a descriptor inherited without close-on-exec, the kind
// an MCP client can leave open, is marked by the listing of /dev/fd, the
// way macOS and Linux before 5.11 mark them.
func TestMarkListed(t *testing.T) {
	fd, err := unix.Open("/dev/null", unix.O_WRONLY, 0) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if flags, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); flags&unix.FD_CLOEXEC != 0 {
		t.Fatal("the descriptor is close-on-exec already: the test proves nothing")
	}
	if err := markListed("/dev/fd"); err != nil {
		t.Fatal(err)
	}
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("descriptor %d: flags %#x (%v), want close-on-exec", fd, flags, err)
	}
	for i := 0; i <= 2; i++ {
		if flags, err := unix.FcntlInt(uintptr(i), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC != 0 {
			t.Errorf("standard descriptor %d marked close-on-exec", i)
		}
	}
}
