package main

import "golang.org/x/sys/unix"

// TCSETS applies termios at once (TCSANOW); see terminalState.restore.
const (
	getTermios = unix.TCGETS
	setTermios = unix.TCSETS
)
