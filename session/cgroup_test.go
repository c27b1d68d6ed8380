package session

import (
	"os"
	"strings"
	"testing"
)

// TestProcessBound: where the server can create cgroups (root here, and
// in CI) the kernel refuses the fork past --max-procs; elsewhere the
// watchdog kills the command (counting bwrap's descendants, or under
// landlock the backend's count of the call's processes). Either way the
// result names the bound and nothing is left running.
func TestProcessBound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		m, _ := newManagerOn(t, backend, func(c *Config) { c.MaxProcs = 20 }, nil)
		s := openSession(t, m, "procs")
		marker := "31.4159" // an argument of every sleep the command starts
		res, err := s.Exec(t.Context(), Request{Command: "for i in $(seq 1 300); do sleep " + marker + " & done; wait"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Limit != "procs" {
			t.Fatalf("limit %q, want procs; %+v %q", res.Limit, res, res.Stderr.Text)
		}
		if m.cg != nil && !strings.Contains(res.Stderr.Text, "fork") {
			t.Errorf("with cgroups the kernel should have refused a fork: %q", res.Stderr.Text)
		}
		if left := survivors(t, marker); len(left) > 0 {
			t.Errorf("left running: %v", left)
		}
		t.Logf("cgroups in use: %t", m.cg != nil)
	})
}

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
