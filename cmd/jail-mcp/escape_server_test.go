//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/tools"
)

// serverOutOfReach attacks the server and the session agent from a
// command (and, under landlock, the session's guard): every thread of the
// server and of the agent that runs the command is signalled (SIGSTOP,
// SIGKILL), traced, and its /proc read and written (stdout, environ, fd,
// mem). The server never shares a command's
// sandbox or Landlock domain and is not dumpable; the agent is outside
// the command's nested domain (Landlock scopes signals and ptrace to it)
// and not dumpable either.
func (fx *escapeFixture) serverOutOfReach(t *testing.T) {
	fx.vector(t, "server-threads", func(t *testing.T) {
		ts := fx.a
		server := ts.cmd.Process.Pid
		tids := threadsOf(t, server)
		if len(tids) < 2 {
			t.Fatalf("the server has %d threads: the attack proves less than it should", len(tids))
		}
		env := map[string]any{"SERVERPID": strconv.Itoa(server)}
		if fx.landlock() {
			// The guard of the session's domain, the server's child: it is
			// in the session's outer domain, out of a command's reach.
			ts.exec(map[string]any{"command": "true"})
			guards := guardsOf(server)
			if len(guards) == 0 {
				t.Fatal("no guard of the server's agents found: the attack proves less than it should")
			}
			env["GUARDPID"] = strconv.Itoa(guards[0])
			defer func() {
				for _, g := range guards {
					if st := procStatFile(t, filepath.Join("/proc", strconv.Itoa(g), "stat")); len(st) < 3 || st[2] == "T" || st[2] == "t" || st[2] == "Z" {
						fx.escape(t, "the guard %d was stopped or ended from the jail: %v", g, st)
					}
				}
			}()
		}
		res := fx.attack(t, ts, `
# The agent runs this shell: its parent.
export AGENTPID=$PPID
`+py(serverAttack), map[string]any{"env": env, "timeout_ms": 60000})
		if fx.landlock() {
			// Landlock: no pid namespace, the server's threads are seen (the
			// attack must reach them to prove anything).
			if n := strings.Count(res.Stdout, "server-thread "); n < len(tids) {
				t.Errorf("saw %d of the server's %d threads: the attack proves less than it should\n%s", n, len(tids), tail(res.Stdout))
			}
		} else if strings.Contains(res.Stdout, "server-thread ") {
			fx.escape(t, "the server's threads are visible in the jail:\n%s", tail(res.Stdout))
		}
		if fx.landlock() && !strings.Contains(res.Stdout, "guard-thread ") {
			t.Errorf("the guard was not seen: the attack proves less than it should\n%s", tail(res.Stdout))
		}
		if !strings.Contains(res.Stdout, "agent-thread ") {
			t.Errorf("the agent's threads were not seen: the attack proves less than it should\n%s", tail(res.Stdout))
		}
		for _, tid := range threadsOf(t, server) {
			st := procStatFile(t, filepath.Join("/proc", strconv.Itoa(server), "task", strconv.Itoa(tid), "stat"))
			if len(st) > 2 && (st[2] == "T" || st[2] == "t") {
				fx.escape(t, "server thread %d is stopped (state %s)", tid, st[2])
			}
			if tracer := statusFile(t, filepath.Join("/proc", strconv.Itoa(server), "task", strconv.Itoa(tid), "status"), "TracerPid"); tracer != "0" && tracer != "" {
				fx.escape(t, "server thread %d traced by %s", tid, tracer)
			}
		}
		// The server still keeps time: a call with a 1 s timeout ends
		// about then, and the session's agent still runs calls.
		start := time.Now()
		r, _ := ts.exec(map[string]any{"command": "sleep 30", "timeout_ms": 1000})
		if !r.TimedOut || time.Since(start) > 15*time.Second {
			fx.escape(t, "the server no longer keeps its timeouts: %+v after %v", r, time.Since(start))
		}
		if r, _ := ts.exec(map[string]any{"command": "echo alive"}); r.Stdout != "alive\n" || r.Agent != "" {
			fx.escape(t, "the session's agent did not survive: %+v", r)
		}
	})
}

// agentKilledFromInside: the agent's thread that runs a call shares the
// call's Landlock domain (it must, to count and kill every process of the
// call wherever it went), so a command can stop or kill its own agent.
// The agent is untrusted by design: that costs the command's own session
// its running calls, nothing more. The server says so in the results,
// kills what was left, and starts a new agent on the next call; other
// sessions never notice.
func (fx *escapeFixture) agentKilledFromInside(t *testing.T) {
	fx.vector(t, "agent-killed-from-inside", func(t *testing.T) {
		m := fmt.Sprintf("1237.%d", os.Getpid())
		defer killMarked(m)
		ts := fx.start(t, newProject(t), fx.env(), "--session", "ak")
		other := make(chan tools.ExecResult, 1)
		go func() {
			r, _, _ := callExec(context.WithoutCancel(t.Context()), ts, map[string]any{"command": "sleep " + m, "timeout_ms": 60000})
			other <- r
		}()
		if !waitFor(10*time.Second, func() bool { return sleepers(m) == 1 }) {
			t.Fatal("the other call did not start")
		}
		start := time.Now()
		r, raw := ts.exec(map[string]any{"command": `export AGENTPID=$PPID
"$PY" - <<'EOF'
import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
SYS_tgkill = 234 if os.uname().machine == "x86_64" else 131
pid = int(os.environ["AGENTPID"])
for tid in os.listdir("/proc/%d/task" % pid):
    if libc.syscall(SYS_tgkill, pid, int(tid), 0) == 0:
        print("killing the agent's thread", tid, flush=True)
        libc.syscall(SYS_tgkill, pid, int(tid), signal.SIGKILL)
time.sleep(30)
EOF`, "env": map[string]any{"PY": fx.py}, "timeout_ms": 60000})
		if !strings.Contains(r.Stdout, "killing the agent's thread") {
			t.Errorf("no thread of the agent shares the call's domain: the vector proves nothing (%+v %q)", r, text(raw))
		}
		if !raw.IsError || !strings.Contains(r.Agent, "ended during this call") || time.Since(start) > 20*time.Second {
			t.Errorf("the call that killed its agent: %+v after %v", r, time.Since(start))
		}
		select {
		case o := <-other:
			if !strings.Contains(o.Agent, "ended during this call") {
				t.Errorf("the other call of the session: %+v", o)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("the other call of the session did not end with its agent")
		}
		if !waitFor(5*time.Second, func() bool { return sleepers(m) == 0 }) {
			fx.escape(t, "a call of the killed agent left processes: %v", processesWith(m))
		}
		r, _ = ts.exec(map[string]any{"command": "echo again"})
		if r.Stdout != "again\n" || !strings.Contains(r.Agent, "started a new session agent") {
			t.Errorf("the next call: %+v", r)
		}
		if st := ts.status(); len(st.Agents) != 1 || st.Agents[0].Restarts != 1 || st.Agents[0].Ended == "" {
			t.Errorf("jail_status agents: %+v", st.Agents)
		}
		if r, _ := fx.a.exec(map[string]any{"command": "echo other"}); r.Stdout != "other\n" || r.Agent != "" {
			fx.escape(t, "another session noticed: %+v", r)
		}
	})
}

// serverAttack is the Python half of server-threads: SERVERPID is the
// server (not even visible under bwrap), AGENTPID the agent that runs the
// command.
const serverAttack = `
import errno, signal
PTRACE_SEIZE = 0x4206
SYS_tgkill = 234 if os.uname().machine == "x86_64" else 131
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
libc.process_vm_readv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]

def tids(pid):
    try:
        return [int(t) for t in os.listdir("/proc/%d/task" % pid)]
    except OSError:
        return []

def read_some(path):
    with open(path, "rb") as f:
        if not f.read(64):
            raise OSError("empty")

def fd_targets(path):
    # As root the names of a non-dumpable process's descriptors can be
    # listed; what they are (readlink) and opening them must fail.
    for n in os.listdir(path):
        try:
            os.readlink(path + "/" + n)
        except OSError:
            try:
                os.close(os.open(path + "/" + n, os.O_RDONLY | os.O_NONBLOCK))
            except OSError:
                continue
        return
    raise OSError("none")

def forge(path):
    # The server's stdout is the JSON-RPC stream to the client: opening
    # it for writing is the escape (nothing is written).
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    os.close(fd)

def vm_read(pid):
    buf = ctypes.create_string_buffer(8)
    # from address 4096, never mapped: EFAULT means access was granted
    local, remote = iovec(ctypes.cast(buf, ctypes.c_void_p), 8), iovec(4096, 8)
    if libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) >= 0 or ctypes.get_errno() == errno.EFAULT:
        raise ValueError("read")
    raise OSError("denied")

def attack(kind, pid):
    for tid in tids(pid):
        print(kind + "-thread", tid, flush=True)
        base = "/proc/%d/task/%d" % (pid, tid)
        for fd in (0, 1, 2):
            attempt("open %s/fd/%d of %s for writing" % (base, fd, kind), forge, "%s/fd/%d" % (base, fd))
        attempt("read %s/environ of %s" % (base, kind), read_some, base + "/environ")
        attempt("descriptors in %s/fd of %s" % (base, kind), fd_targets, base + "/fd")
        attempt("open %s/mem of %s" % (base, kind), os.open, base + "/mem", os.O_RDONLY)
        if libc.ptrace(PTRACE_SEIZE, tid, None, None) == 0:
            escaped("PTRACE_SEIZE of %s thread %d" % (kind, tid))
        if kind == "agent":
            # The agent's thread that runs this call shares its domain, by
            # design (agent-killed-from-inside): the other threads are
            # tried there.
            continue
        for sig in (0, signal.SIGSTOP, signal.SIGKILL):
            if libc.syscall(SYS_tgkill, pid, tid, sig) == 0:
                escaped("tgkill(%d, %d, %d) of %s" % (pid, tid, sig, kind))
    for what in ("environ", "fd/1"):
        attempt("open /proc/%d/%s of %s" % (pid, what, kind), forge if what == "fd/1" else read_some, "/proc/%d/%s" % (pid, what))
    attempt("descriptors in /proc/%d/fd of %s" % (pid, kind), fd_targets, "/proc/%d/fd" % pid)
    attempt("process_vm_readv of %s" % kind, vm_read, pid)
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        attempt("pidfd_send_signal(%s, %d)" % (kind, sig), signal.pidfd_send_signal, fd, sig)
    SYS_pidfd_getfd = 438
    if libc.syscall(SYS_pidfd_getfd, fd, 1, 0) >= 0:
        escaped("pidfd_getfd of %s's stdout" % kind)
    os.close(fd)
    # A signal to the process goes to its first thread, which never
    # entered a call's domain.
    for sig in (0, signal.SIGSTOP, signal.SIGKILL):
        attempt("kill(%s, %d)" % (kind, sig), os.kill, pid, sig)

attack("server", int(E["SERVERPID"]))
attack("agent", int(E["AGENTPID"]))
if "GUARDPID" in E:
    attack("guard", int(E["GUARDPID"]))
`

// guardsOf lists the landlock guards a server started: its children run
// as "jail-mcp-guard".
func guardsOf(server int) []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmdline, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !strings.HasPrefix(string(cmdline), "jail-mcp-guard\x00") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		st := string(b)
		if f := strings.Fields(st[strings.LastIndexByte(st, ')')+1:]); len(f) > 1 && f[1] == strconv.Itoa(server) {
			pid, _ := strconv.Atoi(filepath.Base(d))
			out = append(out, pid)
		}
	}
	return out
}

// threadsOf lists the threads of a host process.
func threadsOf(t *testing.T, pid int) []int {
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

// procStatFile splits a /proc stat file after the command name: [pid,
// comm, state, ...].
func procStatFile(t *testing.T, path string) []string {
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

// statusFile reads one field of a /proc status file, "" when gone.
func statusFile(t *testing.T, path, name string) string {
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
