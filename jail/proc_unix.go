//go:build linux || darwin

package jail

import "syscall"

// killGroup kills the process group of pid.
func killGroup(pid int) { syscall.Kill(-pid, syscall.SIGKILL) }

// signalGroup sends sig to the process group led by pid.
func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }
