//go:build linux

package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestJailLockDoesNotHang: a process that holds a jail's lock (a command of
// another session can open a jail for reading and lock it) makes opening
// that session fail after lockWait with a clear reason, never hang; once
// it lets go, the session opens.
func TestJailLockDoesNotHang(t *testing.T) {
	defer func(d time.Duration) { lockWait = d }(lockWait)
	lockWait = 300 * time.Millisecond
	m, _ := newManagerOn(t, "bwrap", nil, nil)
	jail := filepath.Join(m.Config().Root, "locked")
	if err := os.Mkdir(jail, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(jail)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = m.Open("locked")
	if err == nil || !strings.Contains(err.Error(), "holds the jail's lock") || time.Since(start) > 5*time.Second {
		t.Fatalf("open under another's lock: %v after %v", err, time.Since(start))
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	openSession(t, m, "locked")
}
