package session

import (
	"os"
	"testing"
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
