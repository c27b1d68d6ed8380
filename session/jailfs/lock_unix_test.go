//go:build linux

package jailfs

import (
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestJailLockDoesNotHang: a process that holds a jail's lock (a command of
// another session can open a jail for reading and lock it) makes taking
// the jail's shared lock fail after lockWait with a clear reason, never
// hang; once it lets go, the lock is taken, and prune finds it held.
func TestJailLockDoesNotHang(t *testing.T) {
	defer func(d time.Duration) { lockWait = d }(lockWait)
	lockWait = 300 * time.Millisecond
	_, path, _ := jailOf(t, "locked")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	dir, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	start := time.Now()
	err = LockShared(dir)
	if err == nil || !strings.Contains(err.Error(), "holds the jail's lock") || time.Since(start) > 5*time.Second {
		t.Fatalf("lock under another's lock: %v after %v", err, time.Since(start))
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	if err := LockShared(dir); err != nil {
		t.Fatalf("lock once it let go: %v", err)
	}
	if locked, err := tryLockExclusive(f); locked || err != nil {
		t.Errorf("prune's lock of a jail held shared: %t, %v", locked, err)
	}
}
