//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// TestOverlayTwoAgents: two session agents of one session at once (the
// default policy's and a call's with network off), each with the view,
// in sandboxes of their own where each may have the same pid: their
// views' work directories in the session's layer are named by an id of
// the agent's own, never its pid, and each agent's calls see what its
// earlier calls wrote.
func TestOverlayTwoAgents(t *testing.T) {
	project := testkit.NewProject(t)
	ts := startDefaultView(t, project)
	for i, args := range []map[string]any{
		{"command": "echo a > a.txt && cat a.txt"},
		{"command": "echo b > b.txt && cat b.txt", "network": false},
		{"command": "echo c > c.txt && cat a.txt c.txt"},
		{"command": "echo d > d.txt && cat b.txt d.txt", "network": false},
	} {
		res, raw := ts.Exec(args)
		if res.ExitCode != 0 {
			t.Fatalf("call %d: %+v %s", i, res, testkit.ResultText(raw))
		}
	}
	st := ts.Status()
	// Each agent's work directories carry an id of its own, not its pid.
	ids := map[string]bool{}
	ents, _ := os.ReadDir(filepath.Join(st.Jail, ".overlay", "work"))
	for _, e := range ents {
		id, _, _ := strings.Cut(e.Name(), "-")
		if len(id) != 16 {
			t.Errorf("work directory %s: want <16 hex digits>-<n>", e.Name())
		}
		ids[id] = true
	}
	if len(ids) < 2 {
		t.Errorf("work directories %v: want an id per agent", ents)
	}
	if len(st.Agents) < 2 {
		t.Fatalf("%d agents, want one per policy: %+v", len(st.Agents), st.Agents)
	}
}
