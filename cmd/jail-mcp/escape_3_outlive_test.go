//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// daemonForms are the ways a command leaves a sleep of its marker (%[1]s)
// running past itself, each one line of shell.
var daemonForms = []struct{ name, start string }{
	{"nohup", `nohup sleep %[1]s >/dev/null 2>&1 &`},
	{"double-fork", `(sleep %[1]s &) &`},
	{"setsid", `setsid sleep %[1]s >/dev/null 2>&1 </dev/null &`},
	{"daemon", `"$PY" -c 'import os, sys
if os.fork(): sys.exit(0)
os.setsid()
if os.fork(): os._exit(0)
fd = os.open("/dev/null", os.O_RDWR)
for i in (0, 1, 2): os.dup2(fd, i)
os.execvp("sleep", ["sleep", sys.argv[1]])' %[1]s`},
	// Ways out of the agent's subtree, where a call's processes are
	// looked for: a subreaper of the command's own (its orphans go to it,
	// and on to the agent when it exits), and a clone with CLONE_PARENT
	// (a sibling of its caller, never higher).
	{"subreaper", `"$PY" -c 'import ctypes, os, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
if os.fork() == 0:
    if os.fork() == 0: os.execvp("sleep", ["sleep", sys.argv[1]])
    os._exit(0)
os._exit(0)' %[1]s >/dev/null 2>&1 </dev/null &`},
	{"clone-parent", `"$PY" -c 'import ctypes, os, sys
if ctypes.CDLL(None).syscall(56, 0x8000 | 17, 0, 0, 0, 0) == 0: os.execvp("sleep", ["sleep", sys.argv[1]])' %[1]s >/dev/null 2>&1 </dev/null &`},
}

// startDaemons is a script that leaves a daemon of every form, with
// marker m.
func startDaemons(m string) string {
	var b strings.Builder
	for _, f := range daemonForms {
		fmt.Fprintf(&b, f.start+"\n", m)
	}
	return b.String()
}

// noneLeft reports as an escape any process of marker m still running
// after what ended its call.
func (fx *escapeFixture) noneLeft(t *testing.T, m, after string) {
	t.Helper()
	if pids := testkit.ProcessesWith(m); len(pids) > 0 {
		fx.escape(t, "running after %s: %v", after, pids)
	}
}

// countAlive is a shell command that prints, inside the jail, "alive N":
// how many sleeps with marker m run.
func countAlive(m string) string {
	return fmt.Sprintf(`n=0; for c in /proc/[0-9]*/cmdline; do [ "$(tr '\0' ' ' < "$c" 2>/dev/null)" = "sleep %s " ] && n=$((n+1)); done; echo "alive $n"`, m)
}

// Promise 3: nothing outlives its call unless asked to (a job), nor its
// session.
func (fx *escapeFixture) nothingOutlives(t *testing.T) {
	forms, startAll := daemonForms, startDaemons
	marker := func(i int) string { return fmt.Sprintf("1234.%d%02d", os.Getpid(), i) }
	// alive waits, inside the jail, until the sleep a script started
	// runs (a minute at most), and says how many do.
	alive := func(m string) string {
		return fmt.Sprintf("i=0; until [ \"$(%s)\" = \"alive 1\" ] || [ $i -ge 600 ]; do sleep 0.1; i=$((i+1)); done\n%s\n", countAlive(m), countAlive(m))
	}
	for i, f := range forms {
		fx.vector(t, f.name, func(t *testing.T) {
			m := marker(i)
			defer testkit.KillMarked(m)
			res, _ := fx.a.Exec(map[string]any{"command": fmt.Sprintf(f.start, m) + "\n" + alive(m), "env": fx.vars(fx.a)})
			if !strings.Contains(res.Stdout, "alive 1\n") {
				t.Fatalf("the daemon did not start: %+v", res)
			}
			fx.noneLeft(t, m, "the call returned")
		})
	}
	fx.vector(t, "timeout", func(t *testing.T) {
		m := marker(10)
		defer testkit.KillMarked(m)
		// The script waits until every daemon runs, says so, and sleeps
		// past the timeout. On a busy machine the daemons may not all
		// start before it (the count of alive walks every process in
		// view, which under Landlock is every process of the host): the
		// call is made again with a longer one, never judged on the
		// clock. Whatever started must be gone after each timeout.
		all := fmt.Sprintf(`until [ "$(%s)" = "alive %d" ]; do sleep 0.1; done; echo "alive %d"`, strings.TrimSpace(countAlive(m)), len(forms), len(forms))
		for _, ms := range []int{5000, 20000, 60000} {
			res, _ := fx.a.Exec(map[string]any{"command": startAll(m) + all + "\nsleep 300", "timeout_ms": ms, "env": fx.vars(fx.a)})
			if !res.TimedOut || res.Limit != "timeout" {
				t.Fatalf("result: %+v", res)
			}
			fx.noneLeft(t, m, "the timeout")
			if strings.Contains(res.Stdout, fmt.Sprintf("alive %d\n", len(forms))) {
				return
			}
			t.Logf("the daemons had not all started before a timeout of %d ms: again with a longer one", ms)
		}
		t.Fatalf("the daemons never all started before the timeout")
	})
	fx.vector(t, "cancel", func(t *testing.T) {
		m := marker(11)
		defer testkit.KillMarked(m)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, _, err := callExec(ctx, fx.a, map[string]any{"command": startAll(m) + "sleep 100", "env": fx.vars(fx.a)})
			done <- err
		}()
		if !testkit.WaitFor(10*time.Second, func() bool { return testkit.Sleepers(m) >= len(forms) }) {
			cancel()
			t.Fatalf("the daemons did not start: %d", testkit.Sleepers(m))
		}
		cancel()
		<-done
		if !testkit.WaitFor(3*time.Second, func() bool { return len(testkit.ProcessesWith(m)) == 0 }) {
			fx.escape(t, "running after the cancel: %v", testkit.ProcessesWith(m))
		}
	})
	fx.vector(t, "server-sigkill", func(t *testing.T) {
		m := marker(12)
		defer testkit.KillMarked(m)
		ts := fx.start(t, testkit.NewProject(t), fx.env(), "--session", "k")
		go callExec(context.WithoutCancel(t.Context()), ts, map[string]any{"command": startAll(m) + "sleep 100", "env": fx.vars(ts)})
		if !testkit.WaitFor(10*time.Second, func() bool { return testkit.Sleepers(m) >= len(forms) }) {
			t.Fatalf("the daemons did not start: %d", testkit.Sleepers(m))
		}
		ts.Cmd.Process.Kill()
		if !testkit.WaitFor(5*time.Second, func() bool { return len(testkit.ProcessesWith(m)) == 0 }) {
			fx.escape(t, "orphans of the killed server: %v", testkit.ProcessesWith(m))
		}
	})
}
