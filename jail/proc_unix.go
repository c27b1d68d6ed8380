//go:build linux || darwin

package jail

import "syscall"

// killGroup kills the process group of pid.
func killGroup(pid int) { syscall.Kill(-pid, syscall.SIGKILL) }

// signalGroup sends sig to the process group led by pid.
func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }

// readProc reads a small file of /proc into buf with one read: what
// /proc makes with one record (a process's stat) comes whole.
func readProc(path string, buf []byte) (int, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	n, err := syscall.Read(fd, buf)
	syscall.Close(fd)
	if err != nil {
		return 0, err
	}
	return n, nil
}
