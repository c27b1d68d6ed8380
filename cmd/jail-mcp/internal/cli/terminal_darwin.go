package cli

import "golang.org/x/sys/unix"

// TIOCSETA applies termios at once (TCSANOW); see terminalState.restore.
const (
	getTermios = unix.TIOCGETA
	setTermios = unix.TIOCSETA
)

// exclusive cannot be read on macOS (no TIOCGEXCL). It is taken to be off,
// as it is on every terminal a shell reads commands from: nothing could
// open /dev/tty there otherwise.
func exclusive(fd int) (bool, error) { return false, nil }

func restoreExclusive(fd int, was bool) error {
	return unix.IoctlSetInt(fd, unix.TIOCNXCL, 0)
}

func startOutput(fd int) error { return unix.IoctlSetInt(fd, unix.TIOCSTART, 0) }

// foregroundGroup reads a pid_t into an int: macOS runs little-endian only.
func foregroundGroup(fd int) (int, error) { return unix.IoctlGetInt(fd, unix.TIOCGPGRP) }
