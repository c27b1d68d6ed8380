package cli

import "golang.org/x/sys/unix"

// TCSETS applies termios at once (TCSANOW); see terminalState.restore.
const (
	getTermios = unix.TCGETS
	setTermios = unix.TCSETS
)

func exclusive(fd int) (bool, error) {
	v, err := unix.IoctlGetUint32(fd, unix.TIOCGEXCL)
	return v != 0, err
}

func restoreExclusive(fd int, was bool) error {
	if now, err := exclusive(fd); err == nil && now == was {
		return nil
	}
	if was {
		return unix.IoctlSetInt(fd, unix.TIOCEXCL, 0)
	}
	return unix.IoctlSetInt(fd, unix.TIOCNXCL, 0)
}

// startOutput undoes tcflow(TCOOFF) only, which ^Q cannot: output the user
// stopped with ^S stays stopped.
func startOutput(fd int) error { return unix.IoctlSetInt(fd, unix.TCXONC, unix.TCOON) }

func foregroundGroup(fd int) (int, error) {
	v, err := unix.IoctlGetUint32(fd, unix.TIOCGPGRP)
	return int(int32(v)), err
}
