//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// TestOverlayNativeAgents: with bubblewrap 0.9 or later (the one
// JAIL_MCP_TEST_BWRAP names), bubblewrap mounts the view and a view lasts
// as long as its agent's sandbox (one work directory of the layer each):
// a change of the host's project readies a new agent once the session is
// idle. While a job runs, no second agent (a second mount over the
// session's layer) starts beside the job's: the calls meanwhile run in
// the job's and say so (view_behind); once it ended, the next call sees
// the change in a new agent, and the job's work directory is gone.
func TestOverlayNativeAgents(t *testing.T) {
	bw := os.Getenv("JAIL_MCP_TEST_BWRAP")
	if bw == "" {
		t.Skip("JAIL_MCP_TEST_BWRAP unset: no bubblewrap 0.9 or later to mount the view itself")
	}
	project := testkit.NewProject(t)
	writeFiles(t, project, map[string]string{"a.txt": "a\n"})
	env := testkit.ServerEnv("PATH=" + filepath.Dir(bw) + ":" + os.Getenv("PATH"))
	ts := testkit.Backends()[0].Start(t, project, env, "--overlay", "on")
	views := func() []string {
		m, _ := filepath.Glob(filepath.Join(project, ".agent-home/*/.overlay/work/b*"))
		return m
	}
	if res, _ := ts.Exec(map[string]any{"command": `grep -c " / $(pwd) [^ ]* .*- overlay " /proc/self/mountinfo; cat a.txt`}); res.Stdout != "1\na\n" {
		t.Fatalf("the view is not bubblewrap's overlay: %q %q", res.Stdout, res.Stderr)
	}
	first := views()
	if len(first) != 1 {
		t.Fatalf("views of one agent: %q", first)
	}
	job := ts.StartJob(map[string]any{"command": "while :; do sleep 0.1; done"})
	writeFiles(t, project, map[string]string{"new.txt": "new\n"})
	// Once the server's watch saw the change, calls are behind.
	if !testkit.WaitFor(60*time.Second, func() bool {
		res, _ := ts.Exec(map[string]any{"command": "true"})
		return res.ViewBehind != ""
	}) {
		t.Fatal("no call beside the job said it ran in the job's older view")
	}
	if v := views(); len(v) != 1 || v[0] != first[0] {
		t.Fatalf("an agent beside the job's: %q (first %q)", v, first)
	}
	ts.Job(map[string]any{"job_id": job, "signal": "KILL"})
	if !testkit.WaitFor(60*time.Second, func() bool { out, _ := ts.Job(map[string]any{"job_id": job}); return !out.Running }) {
		t.Fatal("the job did not end")
	}
	if res, _ := ts.Exec(map[string]any{"command": "cat new.txt"}); res.Stdout != "new\n" || res.ViewBehind != "" {
		t.Fatalf("the call after the job: %+v", res)
	}
	if !testkit.WaitFor(30*time.Second, func() bool { v := views(); return len(v) == 1 && v[0] != first[0] }) {
		t.Fatalf("the job's agent outlived the job: %q (first %q)", views(), first)
	}
}

// TestOverlayNativeAgentsPaced: a host that renames files in the project
// without a pause (a build, an editor's saves) has an idle session ready
// at most one new agent a second (freshenEvery), not one per change, and
// the next call still sees the host's last state.
func TestOverlayNativeAgentsPaced(t *testing.T) {
	bw := os.Getenv("JAIL_MCP_TEST_BWRAP")
	if bw == "" {
		t.Skip("JAIL_MCP_TEST_BWRAP unset: no bubblewrap 0.9 or later to mount the view itself")
	}
	project := testkit.NewProject(t)
	env := testkit.ServerEnv("PATH=" + filepath.Dir(bw) + ":" + os.Getenv("PATH"))
	ts := testkit.Backends()[0].Start(t, project, env, "--overlay", "on", "--log-level", "debug")
	ts.Exec(map[string]any{"command": "true"})
	const started = "session agent started"
	before := strings.Count(ts.Stderr.String(), started)
	t0 := time.Now()
	const renames = 30
	for i := range renames {
		writeFiles(t, project, map[string]string{"churn.tmp": fmt.Sprintln(i)})
		if err := os.Rename(filepath.Join(project, "churn.tmp"), filepath.Join(project, fmt.Sprintf("churn%d.txt", i%3))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// One agent a second at most while the renames went on, and one more
	// for the last of them.
	most := int(time.Since(t0)/time.Second) + 2
	if res, _ := ts.Exec(map[string]any{"command": fmt.Sprintf("cat churn%d.txt", (renames-1)%3)}); res.Stdout != fmt.Sprintln(renames-1) {
		t.Fatalf("the call after the renames: %q %q", res.Stdout, res.Stderr)
	}
	if n := strings.Count(ts.Stderr.String(), started) - before; n > most {
		t.Errorf("%d agents started for %d renames in %s, more than %d", n, renames, time.Since(t0).Round(time.Millisecond), most)
	}
}
