//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/session"
	"github.com/jail-mcp/jail-mcp/session/jailfs"
	"github.com/jail-mcp/jail-mcp/tools"
)

// cliRun is what a run of the binary gave.
type cliRun struct {
	code           int
	stdout, stderr string
}

// jailMCP runs the binary under test (this test binary, as the server)
// in project with args.
func jailMCP(t *testing.T, project string, args ...string) cliRun {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir, cmd.Env = project, testkit.ServerEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("jail-mcp %v: %v", args, err)
	}
	return cliRun{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// endServer ends ts's server (its stdin closed) and waits until its
// process is gone, and with it its hold of the session's jail.
func endServer(t *testing.T, ts *testkit.Server) {
	t.Helper()
	pid := ts.Cmd.Process.Pid
	ts.End("EOF")
	if !testkit.WaitFor(60*time.Second, func() bool { return !testkit.Alive(pid) }) {
		t.Fatalf("the server (pid %d) did not end once its stdin closed", pid)
	}
}

// reviewProject is a project where session "work" (its server ended)
// added new.txt, changed a.txt and b.txt, wrote a git hook (protected),
// and where the host then changed b.txt (a conflict).
func reviewProject(t *testing.T) string {
	t.Helper()
	project := testkit.NewProject(t)
	writeFiles(t, project, map[string]string{"a.txt": "a\n", "b.txt": "b\n", ".git/hooks/README": "hooks\n"})
	ts := startDefaultView(t, project, "--session", "work")
	cmd := "echo new > new.txt && echo A >> a.txt && echo B >> b.txt && printf '#!/bin/sh\\n' > .git/hooks/pre-commit"
	if res, raw := ts.Exec(map[string]any{"command": cmd}); res.ExitCode != 0 {
		t.Fatalf("changes: %s", testkit.ResultText(raw))
	}
	endServer(t, ts)
	writeFiles(t, project, map[string]string{"b.tmp": "host\n"})
	if err := os.Rename(filepath.Join(project, "b.tmp"), filepath.Join(project, "b.txt")); err != nil {
		t.Fatal(err)
	}
	return project
}

// TestReviewCommandLine: a person reviews and applies a session's
// changes from the command line, with the refusals and results of the
// tools: without --session the sessions with changes are listed and none
// is chosen; a protected path and a conflict are refused, nothing
// written; applied paths reach the project and leave the layer; a
// discarded path takes the host's; exit 0 done or nothing to do, 1
// refused, 2 bad use.
func TestReviewCommandLine(t *testing.T) {
	project := reviewProject(t)
	run := func(want int, args ...string) cliRun {
		t.Helper()
		r := jailMCP(t, project, args...)
		if r.code != want {
			t.Fatalf("jail-mcp %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
		}
		return r
	}
	if r := run(0, "diff"); !strings.Contains(r.stdout, "work") || !strings.Contains(r.stdout, "3 paths, 1 ignored file") {
		t.Errorf("diff without a session lists: %s", r.stdout)
	}
	var listed []session.Unapplied
	if err := json.Unmarshal([]byte(run(0, "diff", "--json").stdout), &listed); err != nil || len(listed) != 1 || listed[0].Session != "work" {
		t.Errorf("diff --json without a session: %+v %v", listed, err)
	}
	if r := run(2, "apply"); !strings.Contains(r.stdout, "work") || !strings.Contains(r.stderr, "--session") {
		t.Errorf("apply without a session: %+v", r)
	}
	r := run(0, "diff", "--session", "work", "--patch")
	for _, want := range []string{"A new.txt", "M a.txt", "M b.txt", "CONFLICT", "conflict: the host may have changed b.txt", "+A", "A .git/: 1 file"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("diff --patch lacks %q:\n%s", want, r.stdout)
		}
	}
	var d tools.DiffResult
	if err := json.Unmarshal([]byte(run(0, "diff", "--session", "work", "--json").stdout), &d); err != nil || len(d.Changes) != 3 || len(d.Ignored) != 1 || len(d.Conflicts) != 1 || d.Conflicts[0].Path != "b.txt" {
		t.Fatalf("diff --json: %+v %v", d, err)
	}
	before := projectTree(t, project)
	if r := run(1, "apply", "--session", "work", "--dry-run"); !strings.Contains(r.stdout, "refused b.txt: conflict") {
		t.Errorf("apply --dry-run: %s", r.stdout)
	}
	if r := run(1, "apply", "--session", "work", ".git/hooks/pre-commit"); !strings.Contains(r.stdout, "refused .git/hooks/pre-commit: protected") {
		t.Errorf("apply of a hook: %s", r.stdout)
	}
	run(1, "apply", "--session", "work")
	sameTree(t, project, before)
	r = run(0, "apply", "--session", "work", "a.txt", "new.txt")
	if !strings.Contains(r.stdout, "applied 2 changes") {
		t.Errorf("apply: %s", r.stdout)
	}
	if got := testkit.MustRead(t, filepath.Join(project, "a.txt")) + testkit.MustRead(t, filepath.Join(project, "new.txt")); got != "a\nA\nnew\n" {
		t.Errorf("the project after apply: %q", got)
	}
	if r := run(1, "discard", "--session", "work", "b.txt", ".git/hooks/pre-commit"); !strings.Contains(r.stderr, "protected") {
		t.Errorf("discard of a hook: %+v", r)
	}
	run(0, "discard", "--session", "work", "b.txt")
	if got := testkit.MustRead(t, filepath.Join(project, "b.txt")); got != "host\n" {
		t.Errorf("the host's b.txt: %q", got)
	}
	// The hook's copy stays (jail_reset drops it): ignored, never applied.
	if r := run(0, "diff", "--session", "work"); !strings.Contains(r.stdout, "changes 0 paths") || !strings.Contains(r.stdout, "A .git/: 1 file") {
		t.Errorf("diff after: %s", r.stdout)
	}
	if r := run(0, "apply", "--session", "work"); !strings.Contains(r.stdout, "nothing to apply") {
		t.Errorf("apply with nothing: %s", r.stdout)
	}
	run(1, "apply", "--session", "nope")
	run(1, "discard", "--session", "work", "not-there.txt")
	run(2, "diff", "--session", "work", "extra")
	run(2, "diff", "--session", "../work")
	if r := run(0, "diff"); !strings.Contains(r.stdout, "work") || !strings.Contains(r.stdout, "0 paths, 1 ignored file") {
		t.Errorf("diff without a session at the end: %s", r.stdout)
	}
}

// TestReviewHeldByServer: while a server holds the session, jail-mcp
// diff reads its layer beside it, and apply and discard are refused,
// naming the server's process; once it ended, apply goes through.
func TestReviewHeldByServer(t *testing.T) {
	project := testkit.NewProject(t)
	ts := startDefaultView(t, project, "--session", "held")
	if res, raw := ts.Exec(map[string]any{"command": "echo x > x.txt"}); res.ExitCode != 0 {
		t.Fatalf("exec: %s", testkit.ResultText(raw))
	}
	if r := jailMCP(t, project, "diff", "--session", "held"); r.code != 0 || !strings.Contains(r.stdout, "A x.txt") {
		t.Errorf("diff beside the server: %+v", r)
	}
	pid := "pid " + strconv.Itoa(ts.Cmd.Process.Pid)
	for _, args := range [][]string{{"apply", "--session", "held"}, {"discard", "--session", "held", "x.txt"}} {
		r := jailMCP(t, project, args...)
		if r.code != 1 || !strings.Contains(r.stderr, "held by "+pid) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v beside the server: exit %d, stderr %q, want one line naming %s", args, r.code, r.stderr, pid)
		}
	}
	if testkit.FileExists(filepath.Join(project, "x.txt")) {
		t.Fatal("applied beside the server")
	}
	if res, _ := ts.Exec(map[string]any{"command": "cat x.txt"}); res.Stdout != "x\n" {
		t.Errorf("the session after the refusals: %+v", res)
	}
	endServer(t, ts)
	if r := jailMCP(t, project, "apply", "--session", "held"); r.code != 0 || testkit.MustRead(t, filepath.Join(project, "x.txt")) != "x\n" {
		t.Errorf("apply once the server ended: %+v", r)
	}
}

// TestPruneKeepsUnapplied: prune says which old jails hold changes never
// applied, and keeps them unless --force; an old jail with nothing of
// the kind goes with --remove; a project with no jails has none to list.
func TestPruneKeepsUnapplied(t *testing.T) {
	project := testkit.NewProject(t)
	if r := jailMCP(t, project, "prune"); r.code != 0 || !strings.Contains(r.stdout, "no jails") || testkit.FileExists(filepath.Join(project, ".agent-home")) {
		t.Errorf("prune of a project with no jails: %+v", r)
	}
	for _, name := range []string{"changed", "clean"} {
		ts := startDefaultView(t, project, "--session", name)
		cmd := "true"
		if name == "changed" {
			cmd = "echo x > x.txt"
		}
		if res, raw := ts.Exec(map[string]any{"command": cmd}); res.ExitCode != 0 {
			t.Fatalf("exec: %s", testkit.ResultText(raw))
		}
		endServer(t, ts)
		old := time.Now().Add(-40 * 24 * time.Hour)
		os.Chtimes(filepath.Join(project, ".agent-home", name), old, old)
	}
	prune := func(args ...string) map[string]jailfs.PruneEntry {
		t.Helper()
		r := jailMCP(t, project, append([]string{"prune", "--json"}, args...)...)
		var entries []jailfs.PruneEntry
		if err := json.Unmarshal([]byte(r.stdout), &entries); r.code != 0 || err != nil {
			t.Fatalf("prune %v: exit %d %v\n%s%s", args, r.code, err, r.stdout, r.stderr)
		}
		m := map[string]jailfs.PruneEntry{}
		for _, e := range entries {
			m[e.Name] = e
		}
		return m
	}
	got := prune("--remove")
	if e := got["changed"]; e.Unapplied != 1 || e.Removed {
		t.Errorf("changed: %+v, want kept with 1 unapplied change", e)
	}
	if e := got["clean"]; e.Unapplied != 0 || !e.Removed {
		t.Errorf("clean: %+v, want removed", e)
	}
	if r := jailMCP(t, project, "prune"); !strings.Contains(r.stdout, "never applied") {
		t.Errorf("prune's listing: %s", r.stdout)
	}
	if r := jailMCP(t, project, "prune", "--force"); r.code != 2 {
		t.Errorf("--force without --remove: %+v", r)
	}
	if e := prune("--remove", "--force")["changed"]; !e.Removed {
		t.Errorf("--force: %+v", e)
	}
}
