//go:build unix

package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/jail"
)

// Proc is a process of the host as /proc shows it.
type Proc struct {
	PID  int
	Argv []string // its command line
	Comm string   // its command name
	jail.Stat
}

// Procs lists the processes of the host that match (every one with a nil
// match): the one scan of /proc the tests make.
func Procs(match func(Proc) bool) []Proc {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []Proc
	for _, d := range dirs {
		name := filepath.Base(d)
		st, ok := jail.ReadStat(name)
		if !ok {
			continue
		}
		p := Proc{Stat: st}
		p.PID, _ = strconv.Atoi(name)
		b, _ := os.ReadFile(filepath.Join(d, "cmdline"))
		if len(b) > 0 {
			p.Argv = strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		}
		comm, _ := os.ReadFile(filepath.Join(d, "comm"))
		p.Comm = strings.TrimSpace(string(comm))
		if match == nil || match(p) {
			out = append(out, p)
		}
	}
	return out
}

// pids are the pids of procs, as text.
func pids(procs []Proc) []string {
	out := make([]string, len(procs))
	for i, p := range procs {
		out[i] = strconv.Itoa(p.PID)
	}
	return out
}

// ProcessesWith lists the pids whose command line contains marker.
func ProcessesWith(marker string) []string {
	return pids(Procs(func(p Proc) bool { return strings.Contains(strings.Join(p.Argv, " "), marker) }))
}

// Running lists the pids whose command line is exactly argv.
func Running(argv ...string) []string {
	return pids(Procs(func(p Proc) bool { return slices.Equal(p.Argv, argv) }))
}

// Sleepers counts the processes that are exactly "sleep marker".
func Sleepers(marker string) int { return len(Running("sleep", marker)) }

// KillMarked kills what an attack left running, by pid, so that a failed
// vector does not leave its processes behind.
func KillMarked(marker string) {
	for _, pid := range ProcessesWith(marker) {
		if p, err := strconv.Atoi(pid); err == nil {
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

// Descendants lists the processes below root that match.
func Descendants(root int, match func(Proc) bool) []Proc {
	all := Procs(nil)
	parent := make(map[int]int, len(all))
	for _, p := range all {
		parent[p.PID] = p.PPid
	}
	var out []Proc
	for _, p := range all {
		if !match(p) {
			continue
		}
		for a := parent[p.PID]; a > 1; a = parent[a] {
			if a == root {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// AgentsOf lists the session agents a server started: the processes named
// jail-mcp-agent that descend from it.
func AgentsOf(server int) []int {
	var out []int
	for _, p := range Descendants(server, func(p Proc) bool { return p.Comm == "jail-mcp-agent" }) {
		out = append(out, p.PID)
	}
	return out
}

// GuardsOf lists the landlock guards a server started: its children run
// as "jail-mcp-guard".
func GuardsOf(server int) []int {
	var out []int
	for _, p := range Procs(func(p Proc) bool { return p.PPid == server && len(p.Argv) > 0 && p.Argv[0] == "jail-mcp-guard" }) {
		out = append(out, p.PID)
	}
	return out
}

// Zombies lists the children of parent that have exited and were never
// waited for, after giving it a moment to reap those just ended.
func Zombies(parent int) []string {
	var z []Proc
	WaitFor(2*time.Second, func() bool {
		z = Procs(func(p Proc) bool { return p.PPid == parent && p.State == 'Z' })
		return len(z) == 0
	})
	var out []string
	for _, p := range z {
		out = append(out, fmt.Sprintf("%d (%s)", p.PID, p.Comm))
	}
	return out
}

// Alive: pid exists and is not a zombie.
func Alive(pid int) bool {
	st, ok := jail.ReadStat(strconv.Itoa(pid))
	return ok && st.State != 'Z'
}

// ThreadsOf lists the threads of a host process.
func ThreadsOf(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		t.Fatalf("threads of %d: %v", pid, err)
	}
	var out []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// ProcStatFile splits a /proc stat file after the command name: [pid,
// comm, state, ...]; nil when it is gone.
func ProcStatFile(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return append([]string{"", ""}, strings.Fields(s[i+1:])...)
}

// ProcStatField is field i after the command name in /proc/pid/stat:
// 0 is the state, 4 the controlling terminal.
func ProcStatField(t *testing.T, pid, i int) string {
	t.Helper()
	f := ProcStatFile(fmt.Sprintf("/proc/%d/stat", pid))
	if len(f) < i+3 {
		t.Fatalf("/proc/%d/stat: no field %d", pid, i)
	}
	return f[i+2]
}

// StatusFile reads one field of a /proc status file, "" when gone.
func StatusFile(path, name string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// StatusField is one field of /proc/pid/status; the process must exist.
func StatusField(t testing.TB, pid int, name string) string {
	t.Helper()
	path := fmt.Sprintf("/proc/%d/status", pid)
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	return StatusFile(path, name)
}

// PeakRSS is the peak resident memory of pid, in bytes.
func PeakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	v := StatusField(t, pid, "VmHWM")
	kb, err := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
	if err != nil {
		t.Fatalf("VmHWM %q: %v", v, err)
	}
	return kb << 10
}

// markers numbers the markers of this test process.
var markers atomic.Int64

// Marker is a number unique to this test process and call, long
// enough a sleep to outlive any test, and findable in /proc.
func Marker() string {
	return fmt.Sprintf("%d.%d3", 630000+markers.Add(1), os.Getpid())
}

// TwoSleeps starts two sleeps carrying marker, one of them in a new session
// (a daemon's escape from the shell's process group).
func TwoSleeps(marker string) string {
	return fmt.Sprintf("setsid sleep %s & sleep %s", marker, marker)
}

// WaitTwoSleeps waits for both sleeps of TwoSleeps(marker) to run:
// processes that are sleep itself, not the shell or a launcher whose
// command line holds the marker too.
func WaitTwoSleeps(t *testing.T, marker string) {
	t.Helper()
	if !WaitFor(15*time.Second, func() bool { return Sleepers(marker) == 2 }) {
		t.Fatalf("command did not start: %v", ProcessesWith(marker))
	}
}

// WaitGone waits for every process carrying marker to be gone.
func WaitGone(t *testing.T, marker, after string) {
	t.Helper()
	if !WaitFor(5*time.Second, func() bool { return len(ProcessesWith(marker)) == 0 }) {
		t.Errorf("left running after %s: %v", after, ProcessesWith(marker))
	}
}
