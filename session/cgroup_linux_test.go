package session

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/jail"
)

// TestLaunchersCleanUp: a manager leaves no cgroup behind when it closes,
// whether it served one call (jail-mcp run: one launcher prepared at
// start, none spare after it) or many calls with spares ready, and even
// when it closes while a launcher is still being prepared. Without cgroups
// (an unprivileged server) there is nothing to leave, and the calls run.
func TestLaunchersCleanUp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		oneCall bool
		calls   int
	}{
		{"one call", true, 1},
		{"many calls", false, 5},
		{"closed at once", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := buildManager(t, "bwrap", func(c *Config) { c.OneCall, c.MaxProcs, c.MaxMemory = tc.oneCall, 100, 1<<30 }, nil)
			var dirs []string
			if m.cg != nil {
				dirs = []string{m.cg.pids, m.cg.memory}
			}
			s := openSession(t, m, "launchers")
			for range tc.calls {
				res, err := s.Exec(t.Context(), Request{Argv: []string{"/bin/true"}})
				if err != nil || res.ExitCode != 0 {
					t.Fatalf("exec: %v %+v", err, res)
				}
			}
			m.Close()
			for _, d := range dirs {
				if d == "" {
					continue
				}
				if _, err := os.Stat(d); err == nil {
					entries, _ := os.ReadDir(d)
					t.Errorf("cgroup %s left behind, holding %d entries", d, len(entries))
				}
			}
			t.Logf("cgroups in use: %t", len(dirs) > 0)
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
		if m.cg == nil {
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
		if bomb.Limit != BoundProcs || bomb.AgentRestarted != "" || bomb.AgentLost != "" {
			t.Errorf("fork bomb: limit %q, want procs from the kernel's refused fork, on the same agent: %+v", bomb.Limit, bomb)
		}
		oom, err := s.Exec(t.Context(), Request{Command: `sh -c 'x=$(head -c 200000000 /dev/zero | tr "\0" a)'; echo "child ended: $?"; exit 3`})
		if err != nil {
			t.Fatal(err)
		}
		if oom.Limit != BoundMemory || oom.AgentRestarted != "" || oom.AgentLost != "" {
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
		dirs, _ := filepath.Glob(filepath.Join(m.cg.pids, "*", "calls", "k*"))
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
