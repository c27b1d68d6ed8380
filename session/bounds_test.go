package session

import (
	"testing"
)

// TestProcessBound: where the server can create cgroups (root here, and
// in CI) the kernel refuses the fork past --max-procs; elsewhere the
// watchdog kills the command (counting bwrap's descendants, or under
// landlock the backend's count of the call's processes; with session
// agents, the agent's count). Either way the
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
		// With cgroups every call has its own (a session agent's call,
		// nested in the agent's): the kernel refuses the fork, which
		// Limit "procs" already says (from the cgroup's events). The
		// shell's own "Cannot fork" line is not looked for: the call is
		// killed at the bound, often before the shell wrote it.
		if left := survivors(t, marker); len(left) > 0 {
			t.Errorf("left running: %v", left)
		}
		t.Logf("cgroups in use: %t", m.pool != nil)
	})
}
