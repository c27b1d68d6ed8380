package session

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/limits"
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
		limit        limits.Bound
	}{
		{"threads", `import threading, time
stop = threading.Event()
for _ in range(200):
    try:
        threading.Thread(target=stop.wait, daemon=True).start()
    except RuntimeError:
        break
time.sleep(30)`, limits.BoundProcs},
		{"memfds", `import os, time
fds = [os.memfd_create("fill") for _ in range(40)]
for fd in fds:
    for _ in range(6):
        os.write(fd, b"m" * (1 << 20))
time.sleep(30)`, limits.BoundMemory},
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

// TestKernelBoundsPerCall: with cgroups, each call of a session agent
// runs in cgroups of its own nested in the agent's, so the kernel holds
// it to its bounds and the result names the bound it hit, even when the
// kernel stopped it long before the watchdog's next look: a fork bomb
// that reaches --max-procs in a few milliseconds, and a child killed by
// the OOM killer while the command itself exits with a status of its
// own. A calm call of the same session running meanwhile is not blamed,
// and the agent, whose own threads and memory the calls cannot take, goes
// on serving without a restart.
func TestKernelBoundsPerCall(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		m, _ := newManagerOn(t, backend, func(c *Config) { c.MaxProcs, c.MaxMemory = 20, 64<<20 }, nil)
		if m.pool == nil {
			t.Skip("the server cannot make cgroups here (not root, or no cgroup v1 pids and memory): the watchdog alone bounds calls, tested by TestProcessBound")
		}
		s := openSession(t, m, "kernel-bounds")
		marker := "31.2718"
		calm := make(chan *Result, 1)
		go func() {
			res, err := s.Exec(t.Context(), Request{Command: `touch "$HOME/calm-started"; while [ ! -e "$HOME/bombs-done" ]; do sleep 0.02; done; echo calm`, Timeout: time.Minute})
			if err != nil {
				t.Error(err)
			}
			calm <- res
		}()
		for {
			if _, err := os.Stat(filepath.Join(s.Path, "calm-started")); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}

		bomb, err := s.Exec(t.Context(), Request{Command: "for i in $(seq 1 300); do sleep " + marker + " & done; wait"})
		if err != nil {
			t.Fatal(err)
		}
		// Limit "procs" is the kernel's word (read from the call's
		// cgroup's events). The shell's "Cannot fork" line is not looked
		// for: under a load that forks and writes, the kill at the bound
		// often lands before the shell wrote it.
		if bomb.Limit != limits.BoundProcs || bomb.AgentRestarted != "" || bomb.AgentLost != "" {
			t.Errorf("fork bomb: limit %q, want procs from the kernel's refused fork, on the same agent: %+v", bomb.Limit, bomb)
		}
		oom, err := s.Exec(t.Context(), Request{Command: `sh -c 'x=$(head -c 200000000 /dev/zero | tr "\0" a)'; echo "child ended: $?"; exit 3`})
		if err != nil {
			t.Fatal(err)
		}
		if oom.Limit != limits.BoundMemory || oom.AgentRestarted != "" || oom.AgentLost != "" {
			t.Errorf("a child OOM-killed: limit %q, want memory: %+v", oom.Limit, oom)
		}
		if err := os.WriteFile(filepath.Join(s.Path, "bombs-done"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if res := <-calm; res == nil || res.Limit != "" || res.ExitCode != 0 || strings.TrimSpace(res.Stdout.Text) != "calm" {
			t.Errorf("the calm call of the same session: %+v", res)
		}
		// An agent keeps its ended calls' cgroups for the next ones: the
		// calls after the bomb and the OOM kill run in theirs too, and
		// are judged by what they hit themselves.
		calls := 3 * jail.AgentSpares
		for i := range calls {
			next, err := s.Exec(t.Context(), Request{Command: "echo next"})
			if err != nil || next.ExitCode != 0 || next.AgentRestarted != "" || next.Limit != "" {
				t.Errorf("call %d after them: %v %+v", i, err, next)
			}
		}
		made := 0
		pids, _ := m.pool.Dirs()
		dirs, _ := filepath.Glob(filepath.Join(pids, "*", "calls", "k*"))
		for _, d := range dirs {
			if n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "k")); err == nil {
				made = max(made, n)
			}
		}
		if made == 0 || made >= calls {
			t.Errorf("%d calls' cgroups made for %d calls and more: want them kept and used again (%v)", made, calls+3, dirs)
		}
		if left := survivors(t, marker); len(left) > 0 {
			t.Errorf("left running: %v", left)
		}
	})
}
