package jail

import (
	"encoding/json"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// initGrace bounds the wait for the sandbox's init, killed once bwrap
// has exited, to be gone.
const initGrace = 5 * time.Second

// watchInit reads bwrap's --info-fd report, holds a pidfd on the
// sandbox's init while the command runs, and returns a function that
// kills that init and waits (up to initGrace) for it to be gone. When the
// init exits, the kernel has killed and reaped every process of its pid
// namespace.
func watchInit(info *os.File) func() {
	if info == nil {
		return func() {}
	}
	defer info.Close()
	b, _ := io.ReadAll(io.LimitReader(info, 64<<10))
	var report struct {
		ChildPID int `json:"child-pid"`
	}
	if json.Unmarshal(b, &report) != nil || report.ChildPID <= 0 {
		return func() {}
	}
	pidfd, err := unix.PidfdOpen(report.ChildPID, 0)
	if err != nil {
		return func() {} // already gone
	}
	return func() {
		defer unix.Close(pidfd)
		// bwrap has exited: whatever its init still holds is left over.
		// Killing the init kills every process of its pid namespace at
		// once, also when bwrap was killed before it could hand the init
		// its parent-death signal.
		unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		deadline := time.Now().Add(initGrace)
		for time.Now().Before(deadline) {
			n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds())+1)
			if n > 0 || (err != nil && err != unix.EINTR) {
				return
			}
		}
	}
}
