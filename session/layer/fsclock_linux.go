package layer

import (
	"time"

	"golang.org/x/sys/unix"
)

// fsNow is the time a file system stamps on a change made now: the
// kernel's coarse clock, which a change made later never stamps earlier.
// It is what a Views without a file clock (StampIn) uses; a change made
// just before may be stamped later than it (a multigrain file system's
// stamps run ahead of the coarse clock by up to a tick), which makes a
// conflict of a host change the call never saw.
func fsNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts); err != nil {
		return time.Now().UnixNano() - ViewSlack
	}
	return ts.Nano()
}

// fileClock is an unnamed file (O_TMPFILE) that no one else can reach,
// whose change time, changed now, orders a call's start among the change
// times of every file: no change made before is stamped later (the
// kernel's coarse clock may be: a multigrain file system, Linux 6.13 and
// later, stamps a change finely when its time was looked at, and every
// later coarse stamp no earlier than that), and no change made after is
// stamped earlier; one in the same tick may be stamped the same.
type fileClock int

// openFileClock opens a file clock in dir; -1 when it cannot.
func openFileClock(dir string) fileClock {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return -1
	}
	return fileClock(fd)
}

// now changes the file and returns its change time, ok false when it
// cannot.
func (c fileClock) now() (int64, bool) {
	if c < 0 {
		return 0, false
	}
	var st unix.Stat_t
	// Looked at first: the change that follows is stamped finely.
	if unix.Fstat(int(c), &st) != nil {
		return 0, false
	}
	if _, err := unix.Pwrite(int(c), []byte{'t'}, 0); err != nil {
		return 0, false
	}
	if unix.Fstat(int(c), &st) != nil {
		return 0, false
	}
	return st.Ctim.Nano(), true
}

func (c fileClock) close() {
	if c >= 0 {
		unix.Close(int(c))
	}
}
