//go:build linux || darwin

package jailfs

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// lockWait bounds how long opening a session waits for its jail's lock:
// a prune holds it for as long as it takes to empty the jail, and a
// process that holds it longer (a command of another session can open
// the jail for reading, and lock it) must not hang the server.
var lockWait = 10 * time.Second

// LockShared holds a shared lock on a jail's directory for as long as a
// server has its session open; prune takes it exclusively, so it never
// removes a jail a running server holds.
func LockShared(dir *os.File) error {
	deadline := time.Now().Add(lockWait)
	for {
		err := unix.Flock(int(dir.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case err != unix.EWOULDBLOCK && err != unix.EINTR:
			return err
		case time.Now().After(deadline):
			return errors.New("another process holds the jail's lock (jail-mcp prune removing it, or a process locking it); try again once it let go")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TryLockExclusive takes a jail's lock for prune, or for a change of its
// layer from the command line (jail-mcp apply, discard), or reports it
// held: by a running server (Holders says which), or by another of those.
func TryLockExclusive(dir *os.File) (bool, error) {
	return tryLockExclusive(dir)
}

// tryLockExclusive takes a jail's lock, or reports it held.
func tryLockExclusive(dir *os.File) (bool, error) {
	err := unix.Flock(int(dir.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == unix.EWOULDBLOCK {
		return false, nil
	}
	return err == nil, err
}

// ownedByMe reports whether fi is of a file this process's user owns.
func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}
