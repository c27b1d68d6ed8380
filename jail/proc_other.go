//go:build !linux && !darwin

package jail

import (
	"errors"
	"syscall"
)

// No backend confines here; the unconfined fallback puts commands in no
// group of their own.
func groupAttr() *syscall.SysProcAttr { return nil }

func killGroup(pid int) {}

func signalGroup(pid int, sig syscall.Signal) error { return errors.ErrUnsupported }

// readProc: there is no /proc here.
func readProc(path string, buf []byte) (int, error) { return 0, errors.ErrUnsupported }
