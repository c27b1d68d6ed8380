package jail

import (
	"encoding/json"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// initGrace is how long the sandbox's init may take to empty its pid
// namespace after the command exited before it is killed.
const initGrace = 5 * time.Second

// watchInit reads bwrap's --info-fd report, holds a pidfd on the
// sandbox's init while the command runs, and returns a function that
// waits for that init to be gone (killing it after initGrace). When the
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
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		deadline := time.Now().Add(initGrace)
		for {
			n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
			if n > 0 || (err != nil && err != unix.EINTR) {
				return
			}
			if err == nil && time.Now().After(deadline) {
				unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
				unix.Poll(fds, 1000)
				return
			}
		}
	}
}
