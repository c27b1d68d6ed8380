//go:build linux || darwin

package session

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockShared holds a shared lock on a jail's directory for as long as a
// server has its session open; prune takes it exclusively, so it never
// removes a jail a running server holds. It waits while a prune holds it.
func lockShared(dir *os.File) error {
	for {
		err := unix.Flock(int(dir.Fd()), unix.LOCK_SH)
		if err != unix.EINTR {
			return err
		}
	}
}

// tryLockExclusive takes a jail's lock for prune, or reports it held.
func tryLockExclusive(dir *os.File) (bool, error) {
	err := unix.Flock(int(dir.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == unix.EWOULDBLOCK {
		return false, nil
	}
	return err == nil, err
}
