//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// TestOverlayAgentsSeeEachOther: the session's agents (the default
// policy's and one with network off) each mount views over the one layer
// of the session. A view made before another agent's call copied a file
// up would still show the host's file, and a write there fails (the
// kernel finds the copy in its way) or, worse, copies up over it. A call
// that changed the layer readies new views in the other agents: each
// agent's calls see what the other's wrote, reads and writes.
func TestOverlayAgentsSeeEachOther(t *testing.T) {
	t.Run("nested", func(t *testing.T) { agentsSeeEachOther(t, testkit.ServerEnv()) })
	t.Run("bubblewrap", func(t *testing.T) {
		bw := os.Getenv("JAIL_MCP_TEST_BWRAP")
		if bw == "" {
			t.Skip("JAIL_MCP_TEST_BWRAP unset: no bubblewrap 0.9 or later to mount the view itself")
		}
		agentsSeeEachOther(t, testkit.ServerEnv("PATH="+filepath.Dir(bw)+":"+os.Getenv("PATH")))
	})
}

// agentsSeeEachOther is TestOverlayAgentsSeeEachOther with a server
// started in env.
func agentsSeeEachOther(t *testing.T, env []string) {
	project := testkit.NewProject(t)
	writeFiles(t, project, map[string]string{"p.txt": "base\n", "gone.txt": "gone\n"})
	ts := testkit.StartServer(t, project, env)
	if st := ts.Status(); !st.Overlay {
		t.Fatalf("the view is off: %s", st.OverlayReason)
	}
	steps := []struct {
		args map[string]any
		want string
	}{
		// Both agents look at the files first: their views know them
		// as the host's.
		{map[string]any{"command": "cat p.txt gone.txt"}, "base\ngone\n"},
		{map[string]any{"command": "cat p.txt gone.txt", "network": false}, "base\ngone\n"},
		{map[string]any{"command": "echo B >> p.txt && rm gone.txt && cat p.txt", "network": false}, "base\nB\n"},
		{map[string]any{"command": "cat p.txt; test -e gone.txt && echo still there; echo A >> p.txt && cat p.txt"}, "base\nB\nbase\nB\nA\n"},
		{map[string]any{"command": "cat p.txt", "network": false}, "base\nB\nA\n"},
	}
	for i, st := range steps {
		res, raw := ts.Exec(st.args)
		if res.ExitCode != 0 || res.Stdout != st.want {
			t.Fatalf("call %d (%v): exit %d, stdout %q, want %q; %s", i, st.args["command"], res.ExitCode, res.Stdout, st.want, testkit.ResultText(raw))
		}
	}
	if got, _ := os.ReadFile(filepath.Join(project, "p.txt")); string(got) != "base\n" {
		t.Errorf("the host's p.txt: %q", got)
	}
}

// TestOverlayJobKeepsView: while a job runs in the project view, a change
// of the host's project readies no second view beside it (two mounts
// over one layer, each blind to what the other's commands write there):
// the calls meanwhile run in the job's view, and each says so
// (view_behind, and a line in its text); once the job ended, the next
// call sees the host's change and is not behind.
func TestOverlayJobKeepsView(t *testing.T) {
	project := testkit.NewProject(t)
	writeFiles(t, project, map[string]string{"f.txt": "old\n"})
	ts := startDefaultView(t, project)
	if res, _ := ts.Exec(map[string]any{"command": "cat f.txt"}); res.Stdout != "old\n" || res.ViewBehind != "" {
		t.Fatalf("first call: %+v", res)
	}
	// The job waits for a call's go.txt, then answers with seen.txt: each
	// sees what the other wrote in the layer, or the call waits until its
	// timeout.
	job := ts.StartJob(map[string]any{"command": "echo started; until [ -e go.txt ]; do sleep 0.05; done; echo seen > seen.txt; while :; do sleep 1; done"})
	if out, _ := ts.ReadUntil(job, "started", 60*time.Second); !strings.Contains(out, "started") {
		t.Fatalf("the job did not start: %q", out)
	}
	// The host replaces f.txt (a new inode, as an editor's save does).
	writeFiles(t, project, map[string]string{"f.tmp": "new\n"})
	if err := os.Rename(filepath.Join(project, "f.tmp"), filepath.Join(project, "f.txt")); err != nil {
		t.Fatal(err)
	}
	// The server's watch sees the change in its own time: the first
	// call after it is behind, and says when its view was made.
	var behind string
	if !testkit.WaitFor(60*time.Second, func() bool {
		res, raw := ts.Exec(map[string]any{"command": "echo call >> calls.txt"})
		if res.ExitCode != 0 {
			t.Fatalf("a call beside the job: %+v %s", res, testkit.ResultText(raw))
		}
		if res.ViewBehind == "" {
			return false
		}
		if _, err := time.Parse(time.RFC3339, res.ViewBehind); err != nil {
			t.Fatalf("view_behind %q: %v", res.ViewBehind, err)
		}
		if txt := testkit.ResultText(raw); !strings.Contains(txt, "view: this call saw the project as the host had it at "+res.ViewBehind) {
			t.Fatalf("the text does not say the call was behind: %s", txt)
		}
		behind = res.ViewBehind
		return true
	}) {
		t.Fatal("no call beside the job said it ran in the job's older view")
	}
	// Calls that overlap the job see its writes, and it theirs.
	res, raw := ts.Exec(map[string]any{"command": "touch go.txt; until [ -e seen.txt ]; do sleep 0.05; done; cat seen.txt"})
	if res.Stdout != "seen\n" || res.ViewBehind != behind {
		t.Fatalf("a call beside the job: %+v %s", res, testkit.ResultText(raw))
	}
	ts.Job(map[string]any{"job_id": job, "signal": "KILL"})
	if !testkit.WaitFor(60*time.Second, func() bool { out, _ := ts.Job(map[string]any{"job_id": job}); return !out.Running }) {
		t.Fatal("the job did not end")
	}
	res, raw = ts.Exec(map[string]any{"command": "cat f.txt; test -s seen.txt && wc -l < calls.txt"})
	lines := strings.Split(res.Stdout, "\n")
	if res.ExitCode != 0 || res.ViewBehind != "" || lines[0] != "new" {
		t.Fatalf("the call after the job: %+v %s", res, testkit.ResultText(raw))
	}
	if got, _ := os.ReadFile(filepath.Join(project, "f.txt")); string(got) != "new\n" {
		t.Errorf("the host's f.txt: %q", got)
	}
	if _, err := os.Stat(filepath.Join(project, "seen.txt")); err == nil {
		t.Error("the job's writes reached the host")
	}
}
