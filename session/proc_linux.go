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

// oPath opens a descriptor that only names a file, for a backend to bind.
const oPath = unix.O_PATH

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
