//go:build linux || darwin

package session

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// signalName is the conventional name of sig, SIGKILL say.
func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return fmt.Sprintf("SIG%d", int(sig))
}
