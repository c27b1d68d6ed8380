package limits

import (
	"os"
	"os/exec"
	"testing"
)

// TestLaunchersCleanUp: a pool leaves no cgroup behind when it closes,
// whether it served one call (jail-mcp run: one launcher prepared at
// start, none spare after it) or many calls with spares ready, and even
// when it closes while a launcher is still being prepared. Without cgroups
// (an unprivileged server) there is no pool, and nothing to leave.
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
			p := NewPool(Config{MaxProcs: 100, MaxMemory: 1 << 30, OneCall: tc.oneCall})
			var dirs []string
			if p != nil {
				pids, memory := p.Dirs()
				dirs = []string{pids, memory}
			}
			for range tc.calls {
				l := p.Take()
				if l == nil {
					break // no cgroups here
				}
				ran := make(chan error, 1)
				l.Launch(func() { ran <- exec.Command("/bin/true").Run() })
				if err := <-ran; err != nil {
					t.Fatalf("a command on the launcher's thread: %v", err)
				}
				p.Remove(l.Group())
			}
			p.Close()
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
