package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAgentLost: a session agent killed or stopped from the host costs
// only the calls it was running. The server ends it whole (a stopped one
// after the bounded wait for a call to start), says so in the result, and
// the next call starts a new agent and says why.
func TestAgentLost(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b testBackend) {
		for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGSTOP} {
			t.Run(sig.String(), func(t *testing.T) {
				t.Parallel()
				ts := b.start(t, newProject(t), serverEnv(), "--session", "lost")
				if r, _ := ts.exec(map[string]any{"command": "true"}); r.ExitCode != 0 {
					t.Fatalf("first call: %+v", r)
				}
				agents := agentsOf(ts.cmd.Process.Pid)
				if len(agents) != 1 {
					t.Fatalf("agents of the server: %v", agents)
				}
				syscall.Kill(agents[0], sig)
				start := time.Now()
				r, raw := ts.exec(map[string]any{"command": "echo after"})
				if sig == syscall.SIGSTOP {
					// The call waits for the stopped agent to start it, a
					// bounded time, then the agent is killed whole.
					t.Logf("call on a stopped agent: %q", text(raw))
					if !raw.IsError || !strings.Contains(text(raw), "agent") || time.Since(start) > 20*time.Second {
						t.Errorf("call on a stopped agent: %+v %q after %v", r, text(raw), time.Since(start))
					}
					if !waitFor(5*time.Second, func() bool { return !processAlive(agents[0]) }) {
						t.Errorf("the stopped agent %d was not killed", agents[0])
					}
					r, _ = ts.exec(map[string]any{"command": "echo after"})
				}
				if r.Stdout != "after\n" || !strings.Contains(r.Agent, "started a new session agent") {
					t.Errorf("the call after: %+v", r)
				}
				st := ts.status()
				if len(st.Agents) != 1 || st.Agents[0].Restarts != 1 || st.Agents[0].Ended == "" {
					t.Errorf("jail_status agents: %+v", st.Agents)
				}
				if r, _ := ts.exec(map[string]any{"command": "echo again"}); r.Stdout != "again\n" || r.Agent != "" {
					t.Errorf("the call after that: %+v", r)
				}
				if sig != syscall.SIGKILL {
					return
				}
				// A call made as its agent dies, before the server saw it go,
				// runs on a new agent: the old one never started it.
				for i := range 5 {
					agents := agentsOf(ts.cmd.Process.Pid)
					if len(agents) != 1 {
						t.Fatalf("agents of the server: %v", agents)
					}
					syscall.Kill(agents[0], sig)
					r, raw := ts.exec(map[string]any{"command": "cat", "stdin": "racing\n"})
					if r.Stdout != "racing\n" || !strings.Contains(r.Agent, "started a new session agent") {
						t.Errorf("call %d right after its agent was killed: %+v %q", i, r, text(raw))
					}
				}
			})
		}
	})
}

// agentsOf lists the session agents a server started: the processes named
// jail-mcp-agent that descend from it.
func agentsOf(server int) []int {
	parent := map[int]int{}
	var agents []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		b, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		parent[pid], _ = strconv.Atoi(f[1])
		if comm, _ := os.ReadFile(filepath.Join(d, "comm")); strings.TrimSpace(string(comm)) == "jail-mcp-agent" {
			agents = append(agents, pid)
		}
	}
	var out []int
	for _, a := range agents {
		for p := parent[a]; p > 1; p = parent[p] {
			if p == server {
				out = append(out, a)
				break
			}
		}
	}
	return out
}

// processAlive: pid exists and is not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}
