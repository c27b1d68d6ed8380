package session

import "golang.org/x/sys/unix"

// closeRangeCloexec marks every descriptor above 2 close-on-exec in one
// call (Linux 5.11 and later).
func closeRangeCloexec() error {
	return unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
}

// fileSizeSignal is SIGXFSZ, sent to a process that writes past the
// per-file bound.
const fileSizeSignal = int(unix.SIGXFSZ)
