package layer

import (
	"time"

	"golang.org/x/sys/unix"
)

// fsNow is the time a file system stamps on a change made now: the
// kernel's coarse clock (a tick behind the precise one at most), which a
// change made later never stamps earlier (a fine-grained stamp is no
// earlier than it either).
func fsNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts); err != nil {
		return time.Now().UnixNano() - viewSlack
	}
	return ts.Nano()
}
