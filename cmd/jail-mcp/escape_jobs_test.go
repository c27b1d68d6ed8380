//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// Jobs and terminals (jailed_exec background, yield_ms, tty; jail_job),
// attacked from inside: what a job may outlive, whom its signals reach,
// where its output goes, and what its terminal reaches.
func (fx *escapeFixture) jobs(t *testing.T) {
	// Promise 3: a job outlives its call because it was asked to, never
	// its session. Daemons of every form started by a job, then the
	// session ends each way it can.
	daemons := func(m string) string { return startDaemons(m) + "echo started; exec sleep " + m }
	for i, end := range []string{"reset", "eof", "sigterm", "sigkill"} {
		fx.vector(t, "job-outlives-"+end, func(t *testing.T) {
			m := fmt.Sprintf("4321.%d%02d", os.Getpid(), 20+i)
			defer testkit.KillMarked(m)
			ts := fx.start(t, testkit.NewProject(t), fx.env(), "--session", "jobs")
			id := ts.StartJob(map[string]any{"command": daemons(m), "env": fx.vars(ts)})
			ts.StartJob(map[string]any{"command": daemons(m), "env": fx.vars(ts), "tty": true})
			ts.ReadUntil(id, "started", 20*time.Second)
			if !testkit.WaitFor(10*time.Second, func() bool { return testkit.Sleepers(m) >= 10 }) {
				t.Fatalf("the daemons did not start: %d", testkit.Sleepers(m))
			}
			ts.End(end)
			if !testkit.WaitFor(5*time.Second, func() bool { return len(testkit.ProcessesWith(m)) == 0 }) {
				fx.escape(t, "job processes left after the session's %s: %v", end, testkit.ProcessesWith(m))
			}
		})
	}

	// Promise 7: a job is bounded like a call: processes, memory, and its
	// time (--max-job-time), each ending it whole.
	fx.vector(t, "job-bounds", func(t *testing.T) {
		m := fmt.Sprintf("31.%d98", os.Getpid())
		defer testkit.KillMarked(m)
		// One bound a server: a fork bomb's processes also add up to
		// more memory than a small bound, which the watchdog counts too;
		// and under load the loop forks slowly, so a short job time on
		// its server once ended it before its 100th process (the clock,
		// not the bound): the time bound has a server of its own.
		project := testkit.NewProject(t)
		pts := fx.start(t, project, fx.env(), "--session", "procs", "--max-procs", "100", "--max-job-time", "10m", "--auth", "none")
		tts := fx.start(t, project, fx.env(), "--session", "time", "--max-job-time", "3s", "--auth", "none")
		mts := fx.start(t, project, fx.env(), "--session", "memory", "--max-memory", "64MiB", "--auth", "none")
		procs := pts.StartJob(map[string]any{"command": fmt.Sprintf(`i=0; while [ $i -lt 2000 ]; do sleep %s & i=$((i+1)); done; wait`, m)})
		long := tts.StartJob(map[string]any{"command": "sleep 30"})
		memory := mts.StartJob(map[string]any{"command": `"$PY" -c 'import time
chunks = [b"m" * (1 << 20) for _ in range(512)]
time.sleep(30)'`, "env": map[string]any{"PY": fx.py}})
		// A job of the same session that stays within its bounds: not
		// killed for another's.
		calm := mts.StartJob(map[string]any{"command": "sleep 2; echo calm"})
		for _, c := range []struct {
			ts       *testkit.Server
			id, want string
		}{{pts, procs, "procs"}, {tts, long, "timeout"}, {mts, memory, "memory"}, {mts, calm, ""}} {
			// Each job ends by its bound; the wait only catches a hang.
			_, end := c.ts.ReadUntil(c.id, "never printed", 5*time.Minute)
			if end.Running || end.Limit != c.want {
				fx.escape(t, "a job past its %q bound: %+v", c.want, end)
			}
		}
		if pids := testkit.ProcessesWith(m); len(pids) > 0 {
			fx.escape(t, "left running: %d processes", len(pids))
		}
	})

	// A command can open another session's jail for reading and lock it:
	// the server that opens that session then fails, saying why, and never
	// hangs on the lock.
	fx.vector(t, "jail-lock", func(t *testing.T) {
		project := testkit.NewProject(t)
		first := fx.start(t, project, fx.env(), "--session", "lockme")
		first.Client.Close()
		first.Cmd.Wait()
		attacker := fx.start(t, project, fx.env(), "--session", "attacker")
		id := attacker.StartJob(map[string]any{"env": fx.vars(attacker), "command": `"$PY" -c '
import fcntl, os, sys, time
try:
    fd = os.open(sys.argv[1], os.O_RDONLY)
except OSError:
    print("hidden", flush=True)
    sys.exit(0)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(60)' "` + filepath.Join(project, ".agent-home", "lockme") + `"`})
		got, _ := attacker.ReadUntil(id, "locked", 20*time.Second)
		if strings.Contains(got, "hidden") && !fx.landlock() {
			// bubblewrap shows no other session's jail: nothing to lock.
			return
		}
		if !strings.Contains(got, "locked") {
			t.Fatalf("the attacker did not lock: %q", got)
		}
		start := time.Now()
		cmd := exec.Command(os.Args[0], append([]string{"serve", "--project", project, "--session", "lockme"}, fx.backend.Args...)...)
		cmd.Env = append(fx.env(), fx.backend.Env...)
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		if time.Since(start) > 30*time.Second {
			fx.escape(t, "a locked jail held its server for %v", time.Since(start))
		}
		if err == nil || !strings.Contains(string(out), "lock") {
			t.Errorf("server of a locked jail: %v\n%s", err, out)
		}
		attacker.Job(map[string]any{"job_id": id, "signal": "KILL"})
	})

	// A job's signals reach its own processes only: not another job of
	// the session, not its agent, not the server.
	fx.vector(t, "job-signal-scope", func(t *testing.T) {
		ts := fx.start(t, testkit.NewProject(t), fx.env(), "--session", "signals")
		victim := ts.StartJob(map[string]any{"command": "trap 'echo victim-signalled' TERM INT HUP QUIT; echo ready; while :; do sleep 0.1; done"})
		ts.ReadUntil(victim, "ready", 20*time.Second)
		attacker := ts.StartJob(map[string]any{"command": "trap '' TERM INT HUP QUIT; echo ready; while :; do sleep 0.1; done"})
		ts.ReadUntil(attacker, "ready", 20*time.Second)
		for _, sig := range []string{"TERM", "INT", "HUP", "QUIT"} {
			if _, res := ts.Job(map[string]any{"job_id": attacker, "signal": sig}); res.IsError {
				t.Fatalf("%s: %s", sig, testkit.ResultText(res))
			}
		}
		time.Sleep(500 * time.Millisecond)
		got, res := ts.Job(map[string]any{"job_id": victim})
		if !got.Running || strings.Contains(got.Stdout, "victim-signalled") {
			fx.escape(t, "a signal for one job reached another: %+v %s", got, testkit.ResultText(res))
		}
		if ts.Cmd.ProcessState != nil || ts.Status().Agents[0].Restarts != 0 {
			fx.escape(t, "a job's signal reached the server or its agent")
		}
		if out, res := ts.Exec(map[string]any{"command": "echo alive"}); out.Stdout != "alive\n" {
			fx.escape(t, "the session does not run calls after a job's signals: %s", testkit.ResultText(res))
		}
	})

	// A job's whole output is kept in the jail, through the descriptor
	// the server opened: a job that swaps its output file for a link to a
	// host file, or plants links where outputs go, writes nothing there.
	fx.vector(t, "job-output", func(t *testing.T) {
		jail := fx.jails["d"]
		id := fx.d.StartJob(map[string]any{"command": `echo first; sleep 0.5
for f in "$HOME"/.jail-mcp/output/*/stdout; do rm -f "$f"; ln -s "$VFILE" "$f"; done
for f in "$HOME"/.jail-mcp/output/*/stderr; do rm -f "$f"; ln -s "$VFILE" "$f"; done
head -c 200000 /dev/zero | tr '\0' o; echo; echo err >&2; echo done`, "env": fx.vars(fx.d)})
		got, end := fx.d.ReadUntil(id, "never printed", 30*time.Second)
		if end.Running || !strings.Contains(got, "done") {
			t.Fatalf("the job did not end: %+v", end)
		}
		real, err := filepath.EvalSymlinks(end.OutputPath)
		if !testkit.Within(end.OutputPath, jail) || err == nil && !testkit.Within(real, jail) {
			fx.escape(t, "job output kept outside the jail: %s (%s)", end.OutputPath, real)
		}
		// Where outputs go planted as a link to the victim: the next job's
		// output stays in the jail, or the job is refused.
		fx.attack(t, fx.d, `mv -T "$HOME/.jail-mcp" "$HOME/.old-jobs-$$" 2>/dev/null || rm -rf "$HOME/.jail-mcp"
mkdir -p "$HOME/.jail-mcp"; ln -sfn "$VICTIM" "$HOME/.jail-mcp/output"`, nil)
		out, res := fx.d.Exec(map[string]any{"command": "echo planted", "background": true})
		if out.OutputPath != "" {
			real, err := filepath.EvalSymlinks(out.OutputPath)
			if !testkit.Within(out.OutputPath, jail) || err == nil && !testkit.Within(real, jail) {
				fx.escape(t, "job output kept outside the jail: %s (%s)", out.OutputPath, real)
			}
		} else if !res.IsError {
			t.Errorf("background job without output_path: %+v", out)
		}
		fx.attack(t, fx.d, `rm -f "$HOME/.jail-mcp/output"`, nil)
	})

	// A command on a terminal the server holds: its controlling terminal
	// is that one, and nothing reaches the server's own (a's, which has
	// one) or another terminal of the host.
	fx.vector(t, "tty-terminal", func(t *testing.T) {
		id := fx.a.StartJob(map[string]any{"tty": true, "env": fx.vars(fx.a), "command": `"$PY" - <<'EOF'
import fcntl, glob, os, termios
fds = [0, 1, 2]
for p in ["/dev/tty", "/dev/console", "/dev/tty0"] + glob.glob("/dev/pts/[0-9]*") + glob.glob("/dev/tty[0-9]*"):
    try:
        fds.append(os.open(p, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK))
    except OSError:
        pass
for fd in fds:
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b"x")
    except OSError:
        pass
    try:
        os.write(fd, b"")
    except OSError:
        pass
for fd in fds[3:]:
    try:
        fcntl.ioctl(fd, termios.TIOCSCTTY, 1)
        print("STOLE", os.ttyname(fd))
    except OSError:
        pass
print("tty-attack-finished")
EOF`})
		got, end := fx.a.ReadUntil(id, "tty-attack-finished", 30*time.Second)
		if !strings.Contains(got, "tty-attack-finished") {
			t.Fatalf("the attack did not run: %q %+v", got, end)
		}
		if strings.Contains(got, "STOLE") {
			fx.escape(t, "a terminal of the host became the job's: %q", got)
		}
		if n, err := unix.IoctlGetInt(int(fx.tty.Fd()), unix.TIOCINQ); err != nil || n != 0 {
			fx.escape(t, "the server's terminal has %d bytes of pending input (%v)", n, err)
		}
		fx.a.Job(map[string]any{"job_id": id, "signal": "KILL"})
	})
}
