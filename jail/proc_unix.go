//go:build linux || darwin

package jail

import "syscall"

// killGroup kills the process group of pid.
func killGroup(pid int) { syscall.Kill(-pid, syscall.SIGKILL) }
