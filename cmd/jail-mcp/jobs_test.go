//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// TestJobDevServer: a loopback web server started as a job answers a later
// call, and killing the job leaves nothing of it.
func TestJobDevServer(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		// The site's directory names the job's process among all others.
		site := fmt.Sprintf("site-%d-%s", os.Getpid(), filepath.Base(filepath.Dir(project)))
		os.Mkdir(filepath.Join(project, site), 0o755)
		os.WriteFile(filepath.Join(project, site, "index.html"), []byte("hello from the job\n"), 0o644)
		ts := b.Start(t, project, testkit.ServerEnv())
		// Port 0: the kernel picks one free (a fixed one may be taken by
		// another program, or an outgoing connection, on a busy
		// machine); the server says which.
		id := ts.StartJob(map[string]any{"command": "exec python3 -u -m http.server 0 --bind 127.0.0.1 --directory " + site})
		got, out := ts.ReadUntil(id, "/) ...", 20*time.Second)
		var port int
		if i := strings.Index(got, " port "); i < 0 {
			t.Fatalf("the server did not start: %q %+v", got, out)
		} else if _, err := fmt.Sscanf(got[i:], " port %d", &port); err != nil || port == 0 {
			t.Fatalf("the server's port in %q: %v", got, err)
		}
		call, res := ts.Exec(map[string]any{"command": fmt.Sprintf("python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:%d/index.html\").read().decode())'", port)})
		if res.IsError || !strings.Contains(call.Stdout, "hello from the job") {
			t.Fatalf("a later call did not reach the job: %+v %s", call, testkit.ResultText(res))
		}
		marker := "--directory " + site
		if len(testkit.ProcessesWith(marker)) == 0 {
			t.Fatalf("no process of the job found by %q", marker)
		}
		end, res := ts.Job(map[string]any{"job_id": id, "signal": "KILL"})
		if res.IsError || end.Running || end.Killed == "" {
			t.Fatalf("KILL: %+v %s", end, testkit.ResultText(res))
		}
		if !testkit.WaitFor(5*time.Second, func() bool { return len(testkit.ProcessesWith(marker)) == 0 }) {
			t.Errorf("left running after KILL: %v", testkit.ProcessesWith(marker))
		}
		st := ts.Status()
		if len(st.Jobs) != 1 || st.Jobs[0].ID != id || st.Jobs[0].Running {
			t.Errorf("jail_status jobs: %+v", st.Jobs)
		}
	})
}

// TestJobReadInPieces: a job's output read back while it runs comes whole,
// nothing lost or repeated, and its last read says how it ended.
func TestJobReadInPieces(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		ts := b.Start(t, testkit.NewProject(t), testkit.ServerEnv())
		// The start's own result holds what the job printed before it
		// came back (a fast start, or a slow server, sees some).
		start, res := ts.Exec(map[string]any{"command": "for i in $(seq 1 80); do echo line-$i; echo err-$i >&2; sleep 0.03; done; exit 7", "background": true})
		if res.IsError || start.JobID == "" {
			t.Fatalf("background: %+v %s", start, testkit.ResultText(res))
		}
		id := start.JobID
		var stdout, stderr strings.Builder
		stdout.WriteString(start.Stdout)
		stderr.WriteString(start.Stderr)
		reads := 0
		for {
			out, res := ts.Job(map[string]any{"job_id": id, "wait_ms": 500})
			if res.IsError {
				t.Fatalf("jail_job: %s", testkit.ResultText(res))
			}
			reads++
			stdout.WriteString(out.Stdout)
			stderr.WriteString(out.Stderr)
			if !out.Running {
				if out.ExitCode != 7 {
					t.Errorf("exit %d, want 7: %+v", out.ExitCode, out)
				}
				break
			}
		}
		var want, wantErr strings.Builder
		for i := 1; i <= 80; i++ {
			fmt.Fprintf(&want, "line-%d\n", i)
			fmt.Fprintf(&wantErr, "err-%d\n", i)
		}
		if stdout.String() != want.String() || stderr.String() != wantErr.String() {
			t.Errorf("read back in %d pieces:\nstdout %q\nstderr %q", reads, stdout.String(), stderr.String())
		}
		if reads < 3 {
			t.Errorf("read in %d pieces only: the test did not read while it ran", reads)
		}
		// Read once more: nothing new.
		out, _ := ts.Job(map[string]any{"job_id": id})
		if out.Stdout != "" || out.Running || out.StdoutBytes != int64(want.Len()) {
			t.Errorf("read after the end: %+v", out)
		}
	})
}

// TestJobWaitReturnsOnOutput: a wait returns as soon as output comes, not
// at wait_ms; and on the end.
func TestJobWaitReturnsOnOutput(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		ts := b.Start(t, testkit.NewProject(t), testkit.ServerEnv())
		id := ts.StartJob(map[string]any{"command": "sleep 1; echo ready; sleep 1; exit 3"})
		start := time.Now()
		out, _ := ts.Job(map[string]any{"job_id": id, "wait_ms": 30000})
		if d := time.Since(start); d > 10*time.Second || !strings.Contains(out.Stdout, "ready") {
			t.Fatalf("wait returned after %v with %+v", d, out)
		}
		start = time.Now()
		out, _ = ts.Job(map[string]any{"job_id": id, "wait_ms": 30000})
		if d := time.Since(start); d > 10*time.Second || out.Running || out.ExitCode != 3 {
			t.Fatalf("wait for the end returned after %v with %+v", d, out)
		}
	})
}

// TestJobTTY: a REPL on a terminal answers input sent through jail_job; a
// call on a terminal sees one on its streams.
func TestJobTTY(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		ts := b.Start(t, testkit.NewProject(t), testkit.ServerEnv())
		out, res := ts.Exec(map[string]any{"command": "test -t 0 && test -t 1 && test -t 2 && echo on-a-tty; echo to-stderr >&2", "tty": true})
		if res.IsError || !strings.Contains(out.Stdout, "on-a-tty") || !strings.Contains(out.Stdout, "to-stderr") {
			t.Fatalf("tty call: %+v %s", out, testkit.ResultText(res))
		}
		id := ts.StartJob(map[string]any{"argv": []string{"python3", "-i", "-q"}, "tty": true})
		if got, _ := ts.ReadUntil(id, ">>> ", 20*time.Second); !strings.Contains(got, ">>> ") {
			t.Fatalf("no prompt: %q", got)
		}
		if got := ts.Feed(id, "print(6*7, 'answered')\n", "42 answered"); !strings.Contains(got, "42 answered") {
			t.Fatalf("the REPL did not answer: %q", got)
		}
		// Its controlling terminal is the job's: it is in the terminal's
		// foreground process group.
		if got := ts.Feed(id, "import os; print('pgrp', os.getpgrp() == os.tcgetpgrp(0))\n", "pgrp "); !strings.Contains(got, "pgrp True") {
			t.Errorf("not the terminal's foreground process group: %q", got)
		}
		out2, res := ts.Job(map[string]any{"job_id": id, "close_stdin": true, "wait_ms": 10000})
		if res.IsError {
			t.Fatalf("close_stdin: %s", testkit.ResultText(res))
		}
		if out2.Running {
			out2, _ = ts.Job(map[string]any{"job_id": id, "wait_ms": 10000})
		}
		if out2.Running || out2.ExitCode != 0 {
			t.Errorf("end of input on the terminal did not end the REPL: %+v", out2)
		}
	})
}

// TestJobSignal: TERM reaches every process of the job, which can handle it.
func TestJobSignal(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		ts := b.Start(t, testkit.NewProject(t), testkit.ServerEnv())
		marker := fmt.Sprintf("7331.%d%s", os.Getpid(), e2eMarkerDigits(b))
		id := ts.StartJob(map[string]any{"command": fmt.Sprintf(
			"(trap 'echo child-got-term; exit 0' TERM; touch \"$HOME/child-trap\"; while :; do sleep 0.1; done) & child=$!; trap 'wait $child; echo got-term; exit 3' TERM; "+
				// Started once both traps are there: the child's, and then its own.
				"while [ ! -e \"$HOME/child-trap\" ]; do sleep 0.01; done; echo started; while :; do sleep %s; done", marker)})
		ts.ReadUntil(id, "started", 20*time.Second)
		// Every jail_job call reads: what came with the signal's counts.
		sent, res := ts.Job(map[string]any{"job_id": id, "signal": "TERM"})
		if res.IsError {
			t.Fatalf("TERM: %s", testkit.ResultText(res))
		}
		got, out := ts.ReadUntil(id, "no such output", 20*time.Second)
		got = sent.Stdout + got
		if out.Running || out.ExitCode != 3 || !strings.Contains(got, "got-term") || !strings.Contains(got, "child-got-term") {
			t.Errorf("after TERM: %q %+v", got, out)
		}
		if !testkit.WaitFor(5*time.Second, func() bool { return len(testkit.ProcessesWith(marker)) == 0 }) {
			t.Errorf("left running: %v", testkit.ProcessesWith(marker))
		}
		if _, res := ts.Job(map[string]any{"job_id": id, "signal": "TERM"}); !res.IsError || !strings.Contains(testkit.ResultText(res), "already ended") {
			t.Errorf("signal to an ended job: %s", testkit.ResultText(res))
		}
	})
}

// TestJobsDieWithTheirSession: jail_reset, the end of the session and the
// server's SIGKILL each leave no process of any job.
func TestJobsDieWithTheirSession(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		for _, how := range []string{"reset", "EOF", "SIGTERM", "SIGKILL"} {
			t.Run(how, func(t *testing.T) {
				ts := b.Start(t, testkit.NewProject(t), testkit.ServerEnv())
				marker := fmt.Sprintf("8642.%d%d%s", os.Getpid(), len(how), e2eMarkerDigits(b))
				for range 2 {
					ts.StartJob(map[string]any{"command": fmt.Sprintf("setsid sleep %s & (sleep %s &); sleep %s", marker, marker, marker)})
				}
				if !testkit.WaitFor(10*time.Second, func() bool { return len(testkit.ProcessesWith("sleep "+marker)) >= 6 }) {
					t.Fatalf("jobs did not start: %v", testkit.ProcessesWith(marker))
				}
				ts.End(how)
				if how == "reset" {
					if st := ts.Status(); len(st.Jobs) != 0 {
						t.Errorf("jobs after reset: %+v", st.Jobs)
					}
				}
				if !testkit.WaitFor(5*time.Second, func() bool { return len(testkit.ProcessesWith(marker)) == 0 }) {
					t.Errorf("left running after %s: %v", how, testkit.ProcessesWith(marker))
				}
			})
		}
	})
}

// TestJobLimits: --max-jobs, --max-job-time, and bad requests, each a
// clear refusal that changes nothing.
func TestJobLimits(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		ts := b.Start(t, testkit.NewProject(t), testkit.ServerEnv(), "--max-jobs", "2", "--max-job-time", "2s")
		a := ts.StartJob(map[string]any{"command": "sleep 30"})
		b2 := ts.StartJob(map[string]any{"command": "sleep 30"})
		out, res := ts.Exec(map[string]any{"command": "sleep 30", "background": true})
		if !res.IsError || !strings.Contains(testkit.ResultText(res), "--max-jobs") || out.JobID != "" {
			t.Errorf("a third job: %+v %s", out, testkit.ResultText(res))
		}
		// The job time bounds them: both end, timed out.
		for _, id := range []string{a, b2} {
			if _, end := ts.ReadUntil(id, "never printed", 20*time.Second); end.Running || !end.TimedOut {
				t.Errorf("past --max-job-time: %+v", end)
			}
		}
		// A slot is free again (the job may have ended by the time its call
		// returns: it is a job all the same).
		if out, res := ts.Exec(map[string]any{"command": "true", "background": true}); res.IsError || out.JobID == "" {
			t.Errorf("a job once the others ended: %+v %s", out, testkit.ResultText(res))
		}

		for _, c := range []struct {
			args map[string]any
			want string
		}{
			{map[string]any{"job_id": "job-nope"}, "no such job"},
			{map[string]any{}, "job_id is required"},
			{map[string]any{"job_id": a, "signal": "STOP"}, "signal"},
			{map[string]any{"job_id": a, "wait_ms": -1}, "wait_ms"},
			{map[string]any{"job_id": a, "input": "x"}, "input"},
			{map[string]any{"job_id": a, "bogus": 1}, "unknown argument"},
		} {
			_, res := ts.Job(c.args)
			if !res.IsError || !strings.Contains(testkit.ResultText(res), c.want) || strings.Contains(strings.TrimSpace(testkit.ResultText(res)), "\n") {
				t.Errorf("jail_job %v: %s (want one line with %q)", c.args, testkit.ResultText(res), c.want)
			}
		}
		for _, c := range []struct {
			args map[string]any
			want string
		}{
			{map[string]any{"command": "true", "background": true, "yield_ms": 10}, "one of background and yield_ms"},
			{map[string]any{"command": "true", "yield_ms": 0}, "yield_ms"},
		} {
			_, res := ts.Exec(c.args)
			if !res.IsError || !strings.Contains(testkit.ResultText(res), c.want) {
				t.Errorf("jailed_exec %v: %s", c.args, testkit.ResultText(res))
			}
		}
		// A yield call's input ends with its stdin, as a call's does.
		out, res = ts.Exec(map[string]any{"command": "cat; echo cat-done; sleep 30", "stdin": "fed\n", "yield_ms": 500})
		if res.IsError || !out.Running || !strings.Contains(out.Stdout, "fed\ncat-done") {
			t.Errorf("yield with stdin: %+v %s", out, testkit.ResultText(res))
		}
		if _, res := ts.Job(map[string]any{"job_id": out.JobID, "input": "more"}); !res.IsError || !strings.Contains(testkit.ResultText(res), "input") {
			t.Errorf("input to a closed stdin: %s", testkit.ResultText(res))
		}
	})
}

// TestJobYield: a call that ends within yield_ms is a plain call; one that
// does not is a job, read on with jail_job.
func TestJobYield(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		ts := b.Start(t, testkit.NewProject(t), testkit.ServerEnv())
		out, res := ts.Exec(map[string]any{"command": "echo quick; exit 4", "yield_ms": 10000})
		if !res.IsError || out.Running || out.JobID != "" || out.ExitCode != 4 || out.Stdout != "quick\n" {
			t.Errorf("quick yield: %+v", out)
		}
		out, res = ts.Exec(map[string]any{"command": "echo first; sleep 1; echo second", "yield_ms": 300})
		if res.IsError || !out.Running || out.JobID == "" || out.Stdout != "first\n" {
			t.Fatalf("slow yield: %+v %s", out, testkit.ResultText(res))
		}
		got, end := ts.ReadUntil(out.JobID, "no such output", 20*time.Second)
		if got != "second\n" || end.Running || end.ExitCode != 0 {
			t.Errorf("read on: %q %+v", got, end)
		}
	})
}

// TestJobsBelongToTheirHTTPSession: over HTTP, a job_id of another MCP
// session is refused.
func TestJobsBelongToTheirHTTPSession(t *testing.T) {
	hs := testkit.StartHTTP(t, testkit.NewProject(t), testkit.ServerEnv())
	a := hs.Connect(t, mcp.LATEST_PROTOCOL_VERSION)
	b := hs.Connect(t, mcp.LATEST_PROTOCOL_VERSION)
	out, res := a.Exec(map[string]any{"command": "echo mine; sleep 30", "background": true})
	if res.IsError || out.JobID == "" {
		t.Fatalf("background over HTTP: %+v %s", out, testkit.ResultText(res))
	}
	res, err := b.Call(t.Context(), "jail_job", map[string]any{"job_id": out.JobID})
	if err != nil || !res.IsError || !strings.Contains(testkit.ResultText(res), "no such job in this session") {
		t.Errorf("another session's job: %v %s", err, testkit.ResultText(res))
	}
	res, err = a.Call(t.Context(), "jail_job", map[string]any{"job_id": out.JobID, "signal": "KILL"})
	if err != nil || res.IsError {
		t.Errorf("its own session's job: %v %s", err, testkit.ResultText(res))
	}
}

// TestJobProgress: a call waiting for its command with yield_ms sends
// progress notifications as a plain call does, none after its result.
func TestJobProgress(t *testing.T) {
	ts := testkit.StartServer(t, testkit.NewProject(t), testkit.ServerEnv(), "--session", "job-progress")
	call := func(tool, token string, args map[string]any) time.Time {
		req := mcp.CallToolRequest{}
		req.Params.Name = tool
		req.Params.Arguments = args
		req.Params.Meta = &mcp.Meta{ProgressToken: token}
		res, err := ts.Client.CallTool(t.Context(), req)
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", tool, err, res)
		}
		return time.Now()
	}
	check := func(token string, returned time.Time) {
		t.Helper()
		time.Sleep(1500 * time.Millisecond)
		n := 0
		for _, note := range ts.Notifications() {
			f := note.N.Params.AdditionalFields
			if note.N.Method != "notifications/progress" || f["progressToken"] != token {
				continue
			}
			n++
			if msg, _ := f["message"].(string); !strings.HasPrefix(msg, "line-") {
				t.Errorf("%s: message %q", token, msg)
			}
			if note.At.After(returned) {
				t.Errorf("%s: a notification after the result", token)
			}
		}
		if n < 1 || n > 3 {
			t.Errorf("%s: %d progress notifications for a 2.5 s wait, want 1 to 3", token, n)
		}
	}
	loop := "for i in 1 2 3 4 5 6 7 8 9 10; do echo line-$i; sleep 0.5; done"
	returned := call("jailed_exec", "yield", map[string]any{"command": loop, "yield_ms": 2600})
	check("yield", returned)
}
