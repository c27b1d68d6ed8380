//go:build !linux && !darwin

package jail

import "syscall"

// No backend confines here; the unconfined fallback puts commands in no
// group of their own.
func groupAttr() *syscall.SysProcAttr { return nil }

func killGroup(pid int) {}
