package session

import (
	"os"

	"golang.org/x/sys/unix"
)

// closeRangeCloexec marks every descriptor above 2 close-on-exec in one
// call (Linux 5.11 and later).
func closeRangeCloexec() error {
	return unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
}

// openHostPath opens a host path outside any jail as an O_PATH descriptor.
func openHostPath(name string) (*os.File, error) {
	return os.OpenFile(name, unix.O_PATH, 0)
}

// fileSizeSignal is SIGXFSZ, sent to a process that writes past the
// per-file bound.
const fileSizeSignal = int(unix.SIGXFSZ)
