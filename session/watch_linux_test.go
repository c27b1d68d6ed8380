package session

import (
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-mcp/jail-mcp/jail"
)

// TestWatchdogCountsWhatNoResidentSetShows: where no cgroup counts a
// call (a normal user's server), the watchdog holds it to --max-procs
// and --max-memory with its threads (each takes a pid) and the memfds its
// processes hold open, whose pages written with write(2) are in no
// resident set: under each backend's session agents, and under bwrap
// without them (as on a kernel without Landlock ABI 6), where the server
// counts bwrap's descendants itself. Where cgroups hold the call (root
// here) the kernel stops it, and the result names the same bound.
func TestWatchdogCountsWhatNoResidentSetShows(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed: apt-get install python3")
	}
	tests := []struct {
		name, script string
		limit        Bound
	}{
		{"threads", `import threading, time
stop = threading.Event()
for _ in range(200):
    try:
        threading.Thread(target=stop.wait, daemon=True).start()
    except RuntimeError:
        break
time.sleep(30)`, BoundProcs},
		{"memfds", `import os, time
fds = [os.memfd_create("fill") for _ in range(40)]
for fd in fds:
    for _ in range(6):
        os.write(fd, b"m" * (1 << 20))
time.sleep(30)`, BoundMemory},
	}
	modes := []struct {
		name, backend string
		opts          jail.Options
	}{
		{"bwrap", "bwrap", jail.Options{}},
		{"landlock", "landlock", jail.Options{}},
		{"bwrap-without-agents", "bwrap", jail.Options{LandlockABI: func() (int, error) { return 0, unix.ENOSYS }}},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			b, err := jail.Open(t.Context(), mode.backend, mode.opts)
			if err != nil {
				t.Fatal(err)
			}
			m, _ := newManagerOn(t, mode.backend, func(c *Config) {
				c.Backend, c.MaxProcs, c.MaxMemory = b, 50, 64<<20
			}, nil)
			s := openSession(t, m, "bounds")
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					res, err := s.Exec(t.Context(), Request{Argv: []string{py, "-c", tt.script}, Timeout: 20 * time.Second})
					if err != nil {
						t.Fatal(err)
					}
					if res.Limit != tt.limit || res.End != OverBound {
						t.Errorf("limit %q, end %v, want %q: %+v %q", res.Limit, res.End, tt.limit, res, res.Stderr.Text)
					}
				})
			}
		})
	}
}
