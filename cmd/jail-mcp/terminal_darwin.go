package main

import "golang.org/x/sys/unix"

// TIOCSETA applies termios at once (TCSANOW); see terminalState.restore.
const (
	getTermios = unix.TIOCGETA
	setTermios = unix.TIOCSETA
)
