package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// TestAgentLost: a session agent killed or stopped from the host costs
// only the calls it was running. The server ends it whole (a stopped one
// after the bounded wait for a call to start), says so in the result, and
// the next call starts a new agent and says why.
func TestAgentLost(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGSTOP} {
			t.Run(sig.String(), func(t *testing.T) {
				t.Parallel()
				ts := b.Start(t, testkit.NewProject(t), testkit.ServerEnv(), "--session", "lost")
				if r, _ := ts.Exec(map[string]any{"command": "true"}); r.ExitCode != 0 {
					t.Fatalf("first call: %+v", r)
				}
				agents := testkit.AgentsOf(ts.Cmd.Process.Pid)
				if len(agents) != 1 {
					t.Fatalf("agents of the server: %v", agents)
				}
				syscall.Kill(agents[0], sig)
				start := time.Now()
				r, raw := ts.Exec(map[string]any{"command": "echo after"})
				if sig == syscall.SIGSTOP {
					// The call waits for the stopped agent to start it, a
					// bounded time, then the agent is killed whole.
					t.Logf("call on a stopped agent: %q", testkit.ResultText(raw))
					if !raw.IsError || !strings.Contains(testkit.ResultText(raw), "agent") || time.Since(start) > 20*time.Second {
						t.Errorf("call on a stopped agent: %+v %q after %v", r, testkit.ResultText(raw), time.Since(start))
					}
					if !testkit.WaitFor(5*time.Second, func() bool { return !testkit.Alive(agents[0]) }) {
						t.Errorf("the stopped agent %d was not killed", agents[0])
					}
					r, _ = ts.Exec(map[string]any{"command": "echo after"})
				}
				if r.Stdout != "after\n" || !strings.Contains(r.Agent, "started a new session agent") {
					t.Errorf("the call after: %+v", r)
				}
				st := ts.Status()
				if len(st.Agents) != 1 || st.Agents[0].Restarts != 1 || st.Agents[0].Ended == "" {
					t.Errorf("jail_status agents: %+v", st.Agents)
				}
				if r, _ := ts.Exec(map[string]any{"command": "echo again"}); r.Stdout != "again\n" || r.Agent != "" {
					t.Errorf("the call after that: %+v", r)
				}
				if sig != syscall.SIGKILL {
					return
				}
				// A call made as its agent dies, before the server saw it go,
				// runs on a new agent: the old one never started it.
				for i := range 5 {
					agents := testkit.AgentsOf(ts.Cmd.Process.Pid)
					if len(agents) != 1 {
						t.Fatalf("agents of the server: %v", agents)
					}
					syscall.Kill(agents[0], sig)
					r, raw := ts.Exec(map[string]any{"command": "cat", "stdin": "racing\n"})
					if r.Stdout != "racing\n" || !strings.Contains(r.Agent, "started a new session agent") {
						t.Errorf("call %d right after its agent was killed: %+v %q", i, r, testkit.ResultText(raw))
					}
				}
			})
		}
	})
}
