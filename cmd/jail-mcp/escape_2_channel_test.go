//go:build linux

package main

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/tools"
)

// Promise 2: no write-equivalent channel to the host.
func (fx *escapeFixture) noChannel(t *testing.T) {
	for _, v := range []struct {
		name string
		l    *hostListener
	}{
		{"unix-socket-host", fx.hostSock},
		{"unix-socket-project", fx.projSock},
	} {
		// The fixture proved the host reaches it.
		fx.vector(t, v.name, func(t *testing.T) {
			for _, network := range []bool{true, false} {
				fx.attack(t, fx.a, unixConnect, map[string]any{"network": network, "env": map[string]any{"SOCKS": v.l.addr}})
			}
			v.l.mustBeUntouched(t, fx.escape)
		})
	}
	fx.hostChannels(t)
	fx.serverOutOfReach(t)
	fx.agentKilledFromInside(t)
	fx.unixSockets(t)
	fx.hostIPC(t)
	fx.hostProcesses(t)
	fx.hostKernel(t)
}

// unixSockets: a host daemon's socket reached late, by another name, from
// another network namespace, as a datagram, abstract, or made anew.
func (fx *escapeFixture) unixSockets(t *testing.T) {
	// The masking of listening sockets, by the paths the kernel lists when
	// the call starts, must hold for every other way a host daemon's
	// socket can be reached.
	fx.vector(t, "unix-socket-late", func(t *testing.T) {
		dir := testkit.HostDir(t)
		sock, ready := filepath.Join(dir, "late.sock"), filepath.Join(dir, "ready")
		token := "late-wait-" + fx.marker
		done := make(chan tools.ExecResult, 1)
		go func() {
			res, _, _ := callExec(t.Context(), fx.a, map[string]any{
				"command": attackPrelude + "# " + token + `
i=0; while [ ! -e "$READY" ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done
[ -e "$READY" ] || echo "NOT-READY"
` + unixConnect + "echo attack-finished\n",
				"env": merge(fx.vars(fx.a), map[string]any{"SOCKS": sock, "READY": ready}),
			})
			done <- res
		}()
		if !testkit.WaitFor(10*time.Second, func() bool { return len(testkit.ProcessesWith(token)) > 0 }) {
			t.Fatal("attack did not start")
		}
		l := listenUnix(t, "unix", sock)
		l.mustAccept(t)
		if err := os.WriteFile(ready, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		res := <-done
		fx.checkStdout(t, res, unixConnect)
		l.mustBeUntouched(t, fx.escape)
	})
	fx.vector(t, "unix-socket-hardlink", func(t *testing.T) {
		dir := testkit.HostDir(t)
		l := listenUnix(t, "unix", filepath.Join(dir, "daemon.sock"))
		alias := filepath.Join(dir, "alias.sock")
		if err := os.Link(l.addr, alias); err != nil {
			t.Fatal(err)
		}
		l.mustAccept(t)
		fx.attack(t, fx.a, unixConnect, map[string]any{"env": map[string]any{"SOCKS": l.addr + ":" + alias}})
		l.mustBeUntouched(t, fx.escape)
	})
	fx.vector(t, "unix-socket-relative", func(t *testing.T) {
		// A daemon that binds a relative name: the kernel lists it as such.
		dir := testkit.HostDir(t)
		t.Chdir(dir)
		l := listenUnix(t, "unix", "daemon.sock")
		l.mustAccept(t)
		fx.attack(t, fx.a, unixConnect, map[string]any{"env": map[string]any{"SOCKS": filepath.Join(dir, "daemon.sock")}})
		l.mustBeUntouched(t, fx.escape)
	})
	fx.vector(t, "unix-socket-other-netns", func(t *testing.T) {
		// A daemon in another network namespace (a container) listening
		// on a host path: the kernel lists it only in its own namespace.
		sock := filepath.Join(testkit.HostDir(t), "container.sock")
		l := listenInNetns(t, fx.py, sock)
		l.mustAccept(t)
		fx.attack(t, fx.a, unixConnect, map[string]any{"env": map[string]any{"SOCKS": sock}})
		l.mustBeUntouched(t, fx.escape)
	})
	fx.vector(t, "unix-socket-datagram", func(t *testing.T) {
		// A daemon's datagram socket (a syslog, a notify socket) never listens.
		dir := testkit.HostDir(t)
		l := listenUnix(t, "unixgram", filepath.Join(dir, "log.sock"))
		l.mustAccept(t)
		for _, network := range []bool{true, false} {
			fx.attack(t, fx.a, unixConnect, map[string]any{"network": network, "env": map[string]any{"SOCKS": l.addr}})
		}
		l.mustBeUntouched(t, fx.escape)
	})

	fx.vector(t, "abstract-socket", func(t *testing.T) {
		for _, network := range []bool{true, false} {
			fx.attack(t, fx.a, py(`
import socket
names = [E["ABSTRACT"]]
# every abstract socket the kernel lists in this network namespace
with open("/proc/net/unix") as f:
    for line in f.read().splitlines()[1:]:
        fields = line.split(None, 7)
        if len(fields) == 8 and fields[7].startswith("@"):
            names.append(fields[7][1:])
for n in names:
    reach_unix("\0" + n, "abstract socket @%s" % n)
`), map[string]any{"network": network, "env": map[string]any{"ABSTRACT": strings.TrimPrefix(fx.abstract.addr, "@")}})
		}
		fx.abstract.mustBeUntouched(t, fx.escape)
	})

	fx.vector(t, "unix-socket-create", func(t *testing.T) {
		// No unix socket can be made, by socket(2) for any type or through
		// io_uring's IORING_OP_SOCKET; socketpair(2) stays usable.
		res := fx.attack(t, fx.a, py(`
import ctypes, socket
for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET):
    try:
        socket.socket(socket.AF_UNIX, kind).close()
        escaped("created a unix socket of type %d" % kind)
    except PermissionError:
        pass
libc = ctypes.CDLL(None, use_errno=True)
if libc.syscall(425, 8, ctypes.create_string_buffer(120)) >= 0:
    escaped("io_uring_setup succeeded")
a, b = socket.socketpair()
a.send(b"ok")
print("socketpair", b.recv(2).decode())
`), nil)
		if !strings.Contains(res.Stdout, "socketpair ok") {
			t.Errorf("socketpair does not work in the jail: %q %q", res.Stdout, res.Stderr)
		}
	})
}

// hostIPC: the host's System V and POSIX IPC objects.
func (fx *escapeFixture) hostIPC(t *testing.T) {
	fx.vector(t, "sysv-ipc", func(t *testing.T) {
		ids := hostSysV(t)
		// Landlock: no IPC namespace, so the jail sees the host's objects
		// (reads are not a promise) and the acts below aim at them; making
		// an object is an act on the host's namespace too.
		landlock := ""
		if fx.landlock() {
			landlock = `awk -v id="$SHMID" 'NR > 1 && $2 == id { n++ } END { print "host-shm-listed", n + 0 }' /proc/sysvipc/shm
` + py(`
IPC_CREAT = 0o1000
if libc.shmget(0, 4096, IPC_CREAT | 0o600) >= 0:
    escaped("shmget made a segment in the host's namespace")
if libc.msgget(0, IPC_CREAT | 0o600) >= 0:
    escaped("msgget made a queue in the host's namespace")
if libc.semget(0, 1, IPC_CREAT | 0o600) >= 0:
    escaped("semget made a semaphore in the host's namespace")
`)
		}
		res := fx.attack(t, fx.a, landlock+`
echo "shm-lines $(wc -l < /proc/sysvipc/shm) msg-lines $(wc -l < /proc/sysvipc/msg) sem-lines $(wc -l < /proc/sysvipc/sem)"
ipcs -a 2>&1 | sed 's/^/ipcs: /'
`+py(`
IPC_RMID, IPC_NOWAIT = 0, 0o4000
libc.shmat.restype = ctypes.c_void_p
shm, msg, sem = int(E["SHMID"]), int(E["MSGID"]), int(E["SEMID"])
r = libc.shmat(shm, None, 0)
if r is not None and r != ctypes.c_void_p(-1).value:
    escaped("shmat the host's segment %d" % shm)
if libc.shmctl(shm, IPC_RMID, None) == 0:
    escaped("remove the host's segment")
buf = ctypes.create_string_buffer(b"\x01\x00\x00\x00\x00\x00\x00\x00x", 9)
if libc.msgsnd(msg, buf, 1, IPC_NOWAIT) == 0:
    escaped("msgsnd to the host's queue %d" % msg)
if libc.msgctl(msg, IPC_RMID, None) == 0:
    escaped("remove the host's queue")
class sembuf(ctypes.Structure):
    _fields_ = [("sem_num", ctypes.c_ushort), ("sem_op", ctypes.c_short), ("sem_flg", ctypes.c_short)]
if libc.semop(sem, ctypes.byref(sembuf(0, 1, IPC_NOWAIT)), 1) == 0:
    escaped("semop on the host's semaphore %d" % sem)
if libc.semctl(sem, 0, IPC_RMID) == 0:
    escaped("remove the host's semaphore")
`), map[string]any{"env": map[string]any{"SHMID": strconv.Itoa(ids.shm), "MSGID": strconv.Itoa(ids.msg), "SEMID": strconv.Itoa(ids.sem)}})
		switch {
		case fx.landlock():
			if !strings.Contains(res.Stdout, "host-shm-listed 1\n") {
				t.Errorf("the host's segment is not listed in the jail: the attack proves nothing\n%s", res.Stdout)
			}
		case !strings.Contains(res.Stdout, "shm-lines 1 msg-lines 1 sem-lines 1"):
			// bubblewrap: an IPC namespace of its own, which is empty.
			fx.escape(t, "the jail sees SysV IPC objects:\n%s", res.Stdout)
		}
		ids.check(t, fx.escape)
	})

	fx.vector(t, "posix-ipc", func(t *testing.T) {
		mq := hostMQueue(t, fx.marker+"-mq")
		// bubblewrap: a /dev/shm and an IPC namespace of the jail's own,
		// where the host's objects are not even seen.
		script := `
ls -a /dev/shm | grep -q -- "$MARKER-posix" && echo "ESCAPED: the host's /dev/shm is visible"
try cat "/dev/shm/$MARKER-posix"
`
		if fx.landlock() {
			// Landlock: the host's /dev/shm and IPC namespace, seen (reads
			// are not a promise) but not changed.
			script = `
ls -a /dev/shm | grep -q -- "$MARKER-posix" && echo "HOST-SHM-VISIBLE"
try sh -c 'echo x >> "$1"' sh "/dev/shm/$MARKER-posix"
try sh -c 'echo x > "$1"' sh "/dev/shm/$MARKER-new"
try truncate -s 0 "/dev/shm/$MARKER-posix"
try mv "/dev/shm/$MARKER-posix" "/dev/shm/$MARKER-moved"
try rm -f "/dev/shm/$MARKER-posix"
try mkdir "/dev/shm/$MARKER-dir"
`
		}
		res := fx.attack(t, fx.a, script+py(`
name = E["MARKER"]
attempt("open the host's POSIX shm", os.open, "/dev/shm/" + name + "-posix", os.O_RDWR)
rt = libc if hasattr(libc, "mq_open") else ctypes.CDLL("librt.so.1", use_errno=True)
q = ("/" + name + "-mq").encode()
if rt.mq_open(q, os.O_RDWR) >= 0:
    escaped("mq_open the host's queue")
if rt.mq_unlink(q) == 0:
    escaped("mq_unlink the host's queue")
# a queue of the same name is the jail's own: the host's stays empty
fd = rt.mq_open(q, os.O_RDWR | os.O_CREAT, 0o600, None)
print("private queue", fd >= 0 and rt.mq_send(fd, b"x", 1, 0) == 0)
# and so is a shm object of the same name (the host's, read-only, with
# Landlock: the attempt must fail, not end the attack)
try:
    fd = os.open("/dev/shm/" + name + "-posix", os.O_RDWR | os.O_CREAT, 0o600)
    os.write(fd, b"private")
    print("private shm True")
except PermissionError:
    print("private shm False")
`), nil)
		if fx.landlock() {
			// Landlock: a queue or shm object "of its own" would be the host's.
			if !strings.Contains(res.Stdout, "HOST-SHM-VISIBLE") {
				t.Errorf("the host's /dev/shm is not seen in the jail: the attack proves nothing\n%s", res.Stdout)
			}
			if strings.Contains(res.Stdout, "private queue True") {
				fx.escape(t, "made and wrote a message queue in the host's namespace")
			}
			if strings.Contains(res.Stdout, "private shm True") {
				fx.escape(t, "wrote the host's /dev/shm")
			}
		} else {
			if !strings.Contains(res.Stdout, "private queue True") {
				t.Errorf("no private message queue: the attack proves less than it should\n%s", res.Stdout)
			}
			if !strings.Contains(res.Stdout, "private shm True") {
				t.Errorf("no private /dev/shm: the attack proves less than it should\n%s", res.Stdout)
			}
		}
		mq.check(t, fx.escape)
	})
}

// hostProcesses: host processes signalled, traced, or fed input through
// their terminal.
func (fx *escapeFixture) hostProcesses(t *testing.T) {
	fx.vector(t, "signal", func(t *testing.T) {
		victim := startHostSleep(t, "1235."+strconv.Itoa(os.Getpid()))
		env := map[string]any{"HOSTPID": strconv.Itoa(victim.pid), "SERVERPID": strconv.Itoa(fx.a.Cmd.Process.Pid)}
		// bubblewrap: the host's pids do not exist in the jail's pid
		// namespace, so even a pidfd of one is an escape.
		pidfd := `    if hasattr(os, "pidfd_open"):
        attempt("pidfd_open(%d)" % pid, os.pidfd_open, pid)
`
		if fx.landlock() {
			// Landlock: no pid namespace; a pidfd only names the process,
			// sending a signal through it must fail.
			pidfd = `    try:
        fd = os.pidfd_open(pid)
        print("pidfd-opened", pid)
    except OSError:
        fd = -1
    if fd >= 0:
        for sig in (0, signal.SIGKILL):
            attempt("pidfd_send_signal(%d, %d)" % (pid, sig), signal.pidfd_send_signal, fd, sig)
        os.close(fd)
`
		}
		res := fx.attack(t, fx.a, `
for p in "$HOSTPID" "$SERVERPID"; do
	try kill -0 "$p"
	try kill -STOP "$p"
	try kill -9 "$p"
done
`+py(`
import signal
for pid in (int(E["HOSTPID"]), int(E["SERVERPID"])):
    attempt("kill(%d, 0)" % pid, os.kill, pid, 0)
    attempt("kill(%d, SIGKILL)" % pid, os.kill, pid, signal.SIGKILL)
`+pidfd+`    attempt("kill(-%d)" % pid, os.kill, -pid, signal.SIGKILL)
`), map[string]any{"env": env})
		if fx.landlock() && strings.Count(res.Stdout, "pidfd-opened") != 2 {
			t.Errorf("no pidfd of the host's processes: the attack proves less than it should\n%s", res.Stdout)
		}
		// Every process the jail can signal at once.
		fx.a.Exec(map[string]any{"command": "kill -9 -1; kill -STOP -1; sleep 0.2"})
		victim.mustLive(t, fx.escape)
		if res, _ := fx.a.Exec(map[string]any{"command": "echo alive"}); res.Stdout != "alive\n" {
			fx.escape(t, "the server did not survive: %+v", res)
		}
	})

	fx.vector(t, "ptrace", func(t *testing.T) {
		victim := startHostSleep(t, "1236."+strconv.Itoa(os.Getpid()))
		env := map[string]any{"HOSTPID": strconv.Itoa(victim.pid), "SERVERPID": strconv.Itoa(fx.a.Cmd.Process.Pid)}
		res := fx.attack(t, fx.a, `
for p in "$HOSTPID" "$SERVERPID"; do
	[ -e "/proc/$p/status" ] && grep -q "^Name:" "/proc/$p/status" 2>/dev/null && echo "VISIBLE $p $(cat /proc/$p/comm)"
	try timeout 2 strace -p "$p" -o /dev/null
	try timeout 2 gdb -batch -p "$p"
done
`+py(`
PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
for pid in (int(E["HOSTPID"]), int(E["SERVERPID"])):
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) == 0:
        escaped("PTRACE_ATTACH %d" % pid)
    if libc.ptrace(PTRACE_SEIZE, pid, None, None) == 0:
        escaped("PTRACE_SEIZE %d" % pid)
    attempt("open /proc/%d/mem" % pid, os.open, "/proc/%d/mem" % pid, os.O_RDWR)
`)+py(`
import errno
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
libc.process_vm_writev.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
buf = ctypes.create_string_buffer(8)
# to address 4096, never mapped: EFAULT means access was granted
local, remote = iovec(ctypes.cast(buf, ctypes.c_void_p), 8), iovec(4096, 8)
for pid in (int(E["HOSTPID"]), int(E["SERVERPID"])):
    if libc.process_vm_writev(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) >= 0 or ctypes.get_errno() == errno.EFAULT:
        escaped("process_vm_writev %d" % pid)
`), map[string]any{"env": env})
		switch {
		case fx.landlock():
			// Landlock: no pid namespace, the host's processes are seen
			// (reads are not a promise); the acts on them above must fail.
			if !strings.Contains(res.Stdout, "VISIBLE "+strconv.Itoa(victim.pid)+" ") {
				t.Errorf("the host process is not seen in the jail: the attack proves nothing\n%s", res.Stdout)
			}
		case strings.Contains(res.Stdout, "VISIBLE"):
			// bubblewrap: a pid namespace of its own.
			fx.escape(t, "host processes visible in the jail:\n%s", res.Stdout)
		}
		victim.mustLive(t, fx.escape)
		if tracer := testkit.StatusField(t, victim.pid, "TracerPid"); tracer != "0" {
			fx.escape(t, "host process traced by %s", tracer)
		}
	})

	// The calls that act on a process by pid and that the kernel checks by
	// uid alone (Landlock scopes signals and ptrace, not these): limits,
	// priorities, scheduling, affinity and I/O priority of the server and
	// of a host process, each set to the value it has (harmless should it
	// get through), and read.
	fx.vector(t, "host-process-limits", func(t *testing.T) {
		victim := startHostSleep(t, "1237."+strconv.Itoa(os.Getpid()))
		server := fx.a.Cmd.Process.Pid
		limits := func() string { b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", server)); return string(b) }
		before := limits()
		env := map[string]any{"HOSTPID": strconv.Itoa(victim.pid), "SERVERPID": strconv.Itoa(server), "HOSTPIDS": "0"}
		if fx.landlock() {
			env["HOSTPIDS"] = "1"
		}
		res := fx.attack(t, fx.a, py(`
import platform, resource
nr = {"x86_64": {"ioprio_set": 251, "ioprio_get": 252}, "aarch64": {"ioprio_set": 30, "ioprio_get": 31}}[platform.machine()]
IOPRIO_WHO_PROCESS, IOPRIO_WHO_USER = 1, 3
for pid in (int(E["HOSTPID"]), int(E["SERVERPID"])):
    try:
        nice = int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[16])
    except (OSError, IndexError, ValueError):
        nice = 0
    for lim in (resource.RLIMIT_NOFILE, resource.RLIMIT_CPU):
        attempt("prlimit(%d) read" % pid, resource.prlimit, pid, lim)
        try:
            cur = resource.prlimit(pid, lim)
        except OSError:
            continue
        attempt("prlimit(%d) set" % pid, resource.prlimit, pid, lim, cur)
    attempt("getpriority(%d)" % pid, os.getpriority, os.PRIO_PROCESS, pid)
    attempt("setpriority(%d)" % pid, os.setpriority, os.PRIO_PROCESS, pid, nice)
    attempt("sched_getaffinity(%d)" % pid, os.sched_getaffinity, pid)
    attempt("sched_setaffinity(%d)" % pid, os.sched_setaffinity, pid, os.sched_getaffinity(0))
    attempt("sched_getscheduler(%d)" % pid, os.sched_getscheduler, pid)
    attempt("sched_setscheduler(%d)" % pid, os.sched_setscheduler, pid, os.SCHED_OTHER, os.sched_param(0))
    attempt("sched_getparam(%d)" % pid, os.sched_getparam, pid)
    prio = libc.syscall(nr["ioprio_get"], IOPRIO_WHO_PROCESS, pid)
    if prio >= 0:
        escaped("ioprio_get(%d)" % pid)
        if libc.syscall(nr["ioprio_set"], IOPRIO_WHO_PROCESS, pid, prio) == 0:
            escaped("ioprio_set(%d)" % pid)
# All the user's processes: under bubblewrap those of its pid namespace
# only, under Landlock the host's.
if E.get("HOSTPIDS") == "1":
    attempt("getpriority(PRIO_USER)", os.getpriority, os.PRIO_USER, 0)
    if libc.syscall(nr["ioprio_get"], IOPRIO_WHO_USER, 0) >= 0:
        escaped("ioprio_get(IOPRIO_WHO_USER)")
# The caller's own: what nice, ionice, taskset and ulimit do still works.
os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0))
os.sched_setaffinity(0, os.sched_getaffinity(0))
resource.setrlimit(resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE))
if libc.syscall(nr["ioprio_get"], IOPRIO_WHO_PROCESS, 0) < 0:
    print("OWN-IOPRIO-REFUSED")
`), map[string]any{"env": env})
		if strings.Contains(res.Stdout, "OWN-IOPRIO-REFUSED") {
			t.Errorf("the command's own I/O priority is refused:\n%s", res.Stdout)
		}
		if after := limits(); after != before {
			fx.escape(t, "the server's limits changed:\n%s", after)
		}
		victim.mustLive(t, fx.escape)
		if res, _ := fx.a.Exec(map[string]any{"command": "echo alive"}); res.Stdout != "alive\n" {
			fx.escape(t, "the server did not survive: %+v", res)
		}
	})

	// The same calls aimed at the call's own session agent, an ancestor of
	// every command and outside its Landlock domain: under bubblewrap it
	// shares the command's pid namespace and uid, so only the seccomp
	// filter keeps a command from lowering its limits, priority or CPUs.
	// On every ABI the kernel runs: on x86_64 also through int 0x80 (the
	// compat ABI, with numbers of its own), where the kernel has IA-32
	// emulation.
	fx.vector(t, "agent-by-pid", func(t *testing.T) {
		res := fx.attack(t, fx.a, py(agentByPidAttack), nil)
		if !strings.Contains(res.Stdout, "AGENT ") || strings.Contains(res.Stdout, "AGENT 0\n") {
			t.Errorf("the session agent is not found from the jail: the attack proves nothing\n%s", res.Stdout)
		}
		if strings.Contains(res.Stdout, "COMPAT-ABI-ABSENT") {
			t.Log("this kernel runs no IA-32 code (int 0x80 faults): the compat ABI's part proves nothing here")
		}
		if strings.Contains(res.Stdout, "OWN-AFFINITY-REFUSED") {
			t.Errorf("the command's own affinity is refused on the compat ABI:\n%s", res.Stdout)
		}
		if res, _ := fx.a.Exec(map[string]any{"command": "echo alive"}); res.Stdout != "alive\n" {
			fx.escape(t, "the session did not survive: %+v", res)
		}
	})

	// The host's terminals, read: a reader competes with the program
	// reading that terminal and takes what the user types (a password).
	// The server runs on one; under bubblewrap /dev is the sandbox's own.
	fx.vector(t, "terminal-read", func(t *testing.T) {
		res := fx.attack(t, fx.a, py(`
import glob
for p in ["/dev/console", "/dev/tty0"] + glob.glob("/dev/pts/[0-9]*") + glob.glob("/dev/tty[0-9]*") + glob.glob("/dev/vcs*") + glob.glob("/dev/input/*"):
    if p == E["SERVERTTY"] and os.path.exists(p):
        print("SEEN")
    attempt("open %s for reading" % p, os.open, p, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
`), map[string]any{"env": map[string]any{"SERVERTTY": fx.tty.Name()}})
		if fx.landlock() && !strings.Contains(res.Stdout, "SEEN") {
			t.Errorf("the server's terminal %s is not seen in the jail: the attack proves nothing\n%s", fx.tty.Name(), res.Stdout)
		}
	})

	fx.vector(t, "tiocsti", func(t *testing.T) {
		// The server has a real controlling terminal: the one a command
		// would inject keystrokes into.
		if tty := testkit.ProcStatField(t, fx.a.Cmd.Process.Pid, 4); tty == "0" {
			t.Fatal("the server has no controlling terminal: the attack proves nothing")
		}
		res := fx.attack(t, fx.a, py(`
import fcntl, glob, termios
fds = [0, 1, 2]
for p in ["/dev/tty", "/dev/console", "/dev/tty0"] + glob.glob("/dev/pts/[0-9]*") + glob.glob("/dev/tty[0-9]*"):
    try:
        fds.append(os.open(p, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK))
        print("opened", p)
    except OSError:
        pass
for fd in fds:
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b"x")
        escaped("TIOCSTI on fd %d" % fd)
    except OSError:
        pass
`), nil)
		if strings.Contains(res.Stdout, "opened /dev/tty\n") {
			fx.escape(t, "the command has a controlling terminal")
		}
		if n, err := unix.IoctlGetInt(int(fx.tty.Fd()), unix.TIOCINQ); err != nil || n != 0 {
			fx.escape(t, "the server's terminal has %d bytes of pending input (%v)", n, err)
		}
	})
}

// hostKernel: descriptors left open, /proc and /sys, and privileges.
func (fx *escapeFixture) hostKernel(t *testing.T) {
	fx.vector(t, "fds", func(t *testing.T) {
		res, _ := fx.a.Exec(map[string]any{"argv": []string{"ls", "/proc/self/fd"}})
		// ls opens one descriptor itself, for the directory it lists.
		if got := strings.Fields(res.Stdout); !slices.Equal(got, []string{"0", "1", "2", "3"}) {
			t.Errorf("child descriptors: %v", got)
		}
		res = fx.attack(t, fx.a, `
for l in /proc/[0-9]*/fd/*; do
	t=$(readlink "$l") || continue
	echo "FD $l $t"
	if [ -d "$l" ]; then
		case "$t" in "$HOME"|"$HOME"/*) ;; *) try sh -c 'echo x > "$1/new-$MARKER"' sh "$l" ;; esac
	fi
done
`, nil)
		server := map[string]bool{}
		for _, fd := range []string{"0", "1", "2"} {
			if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", fx.a.Cmd.Process.Pid, fd)); err == nil {
				server[target] = true
			}
		}
		for _, line := range strings.Split(res.Stdout, "\n") {
			f := strings.SplitN(line, " ", 3)
			if len(f) != 3 || f[0] != "FD" {
				continue
			}
			target := f[2]
			switch {
			case server[target]:
				fx.escape(t, "the server's own stdio reached the jail: %s", line)
			case strings.HasPrefix(target, "pipe:["), strings.HasPrefix(target, "anon_inode:"),
				target == "/dev/null", testkit.Within(target, fx.jails["a"]):
			default:
				fx.escape(t, "descriptor of the host in the jail: %s", line)
			}
		}
	})

	// Address families no command needs: AF_VSOCK is in no network
	// namespace (a VM's host is reachable through it), the others are
	// kernel or host interfaces. With network on and off.
	fx.vector(t, "socket-families", func(t *testing.T) {
		for _, network := range []bool{true, false} {
			fx.attack(t, fx.a, py(`
import socket
names = {3: "AX25", 4: "IPX", 5: "APPLETALK", 9: "X25", 15: "KEY", 17: "PACKET", 21: "RDS", 24: "PPPOX",
         26: "LLC", 27: "IB", 28: "MPLS", 29: "CAN", 30: "TIPC", 31: "BLUETOOTH", 33: "RXRPC", 35: "PHONET",
         36: "IEEE802154", 37: "CAIF", 38: "ALG", 39: "NFC", 40: "VSOCK", 41: "KCM", 42: "QIPCRTR", 43: "SMC",
         44: "XDP", 45: "MCTP"}
for fam, name in names.items():
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET, socket.SOCK_RAW):
        attempt("socket(AF_%s, %d)" % (name, kind), socket.socket, fam, kind)
`), map[string]any{"network": network})
		}
	})

	// A host listener of the server's uid with SO_REUSEPORT (HAProxy,
	// Envoy, nginx's reuseport, systemd's ReusePort=; as root, every
	// listener a root process opened before it dropped its privileges):
	// with network on, a command binding the same port with it too
	// would take a share of the listener's connections.
	fx.vector(t, "reuseport-steal", func(t *testing.T) {
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			}); err != nil {
				return err
			}
			return serr
		}}
		host, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("host listener: %v", err)
		}
		defer host.Close()
		port := host.Addr().(*net.TCPAddr).Port
		fx.attack(t, fx.a, py(`
import socket
port = int(E["PORT"])
for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET, "0.0.0.0")):
    s = socket.socket(fam, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind((addr, port))
        s.listen()
        escaped("listening on %s:%d beside the host's listener" % (addr, port))
    except OSError:
        pass
    s.close()
`), map[string]any{"env": map[string]any{"PORT": strconv.Itoa(port)}})
	})

	// A read lease on a host file the user owns, taken through a
	// read-only descriptor, holds host writers off for
	// fs.lease-break-time and signals the jail at each open; directory
	// notifications watch the host.
	fx.vector(t, "leases", func(t *testing.T) {
		fx.attack(t, fx.a, py(`
import fcntl
F_SETLEASE, F_NOTIFY, DN_MODIFY, DN_MULTISHOT = 1024, 1026, 0x2, 0x80000000
for p in (E["VFILE"], E["KEEP"]):
    try:
        fd = os.open(p, os.O_RDONLY)
    except OSError:
        continue
    attempt("read lease on " + p, fcntl.fcntl, fd, F_SETLEASE, fcntl.F_RDLCK)
    os.close(fd)
for d in (E["VICTIM"], E["PROJECT"], E["HOSTHOME"]):
    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        continue
    attempt("directory notification on " + d, fcntl.fcntl, fd, F_NOTIFY, DN_MODIFY | DN_MULTISHOT)
    os.close(fd)
# a lease of the jail's own file is refused too: no tool needs one
`), nil)
	})

	fx.vector(t, "proc-sys", func(t *testing.T) {
		knobs := []string{"kernel/sysrq", "vm/swappiness", "kernel/printk_ratelimit", "fs/lease-break-time", "vm/overcommit_ratio", "kernel/core_pattern", "kernel/hostname", "kernel/domainname"}
		before := map[string]string{}
		for _, k := range knobs {
			if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
				before[k] = string(b)
			}
		}
		host, _ := os.Hostname()
		fx.attack(t, fx.a, `
for k in `+strings.Join(knobs, " ")+`; do
	f="/proc/sys/$k"; [ -e "$f" ] || continue
	# the value it has: harmless should it ever get through
	try sh -c 'v=$(cat "$1") && echo "$v" > "$1"' sh "$f"
	try sysctl -w "$(echo "$k" | tr / .)=$(cat "$f")"
done
[ -e /proc/sys/kernel/sysrq ] && try sh -c 'echo 1 > /proc/sys/kernel/sysrq'
# a new value where one is harmless: the host's must not change
try sh -c 'echo $(( $(cat "$1") + 1 )) > "$1"' sh /proc/sys/kernel/printk_ratelimit
[ -e /proc/sys/kernel/sysrq ] && try sysctl -w kernel.sysrq=1
try hostname "evil-$MARKER"
`+py(`
# Every writable kernel file outside the per-process directories (one
# without a write bit has nothing to write to); /proc/pressure is left
# out: a PSI trigger written there is a monitor owned by the file that
# wrote it, not a tunable.
for root, dirs, files in os.walk("/proc"):
    if root == "/proc":
        dirs[:] = [d for d in dirs if not d.isdigit() and d not in ("self", "thread-self", "pressure")]
    for name in files:
        p = os.path.join(root, name)
        try:
            if os.lstat(p).st_mode & 0o222 == 0:
                continue
            fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        os.close(fd)
        escaped("open for writing " + p)
`), nil)
		for k, v := range before {
			if b, _ := os.ReadFile("/proc/sys/" + k); string(b) != v {
				fx.escape(t, "host /proc/sys/%s changed: %q -> %q", k, v, b)
				os.WriteFile("/proc/sys/"+k, []byte(v), 0o644)
			}
		}
		if now, _ := os.Hostname(); now != host {
			fx.escape(t, "host name changed: %q -> %q", host, now)
		}
	})

	fx.vector(t, "privilege", func(t *testing.T) {
		res := fx.attack(t, fx.a, `
grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status
echo "ME $(id -u)"
for c in "unshare -U true" "unshare -r true" "unshare -m true" "unshare -n true" "unshare -i true" \
	"unshare -p -f true" "unshare -U -r -m true" "bwrap --ro-bind / / true" "bwrap --unshare-user --ro-bind / / true"; do
	try $c
done
try mount -t tmpfs none /mnt
try mount -t tmpfs none "$HOME/.tmp"
echo SU-BEGIN
su -c 'echo "UID $(id -u)"; grep -E "^Cap(Prm|Eff):" /proc/self/status' root </dev/null 2>/dev/null
sudo -n sh -c 'echo "UID $(id -u)"; grep -E "^Cap(Prm|Eff):" /proc/self/status' </dev/null 2>/dev/null
echo SU-END
`+py(`
for flag, name in ((0x10000000, "user"), (0x20000, "mount"), (0x40000000, "net"), (0x20000000, "pid"), (0x08000000, "ipc"), (0x04000000, "uts")):
    if libc.unshare(flag) == 0:
        escaped("unshare(CLONE_NEW%s)" % name.upper())
if os.getuid() != 0:
    attempt("setuid(0)", os.setuid, 0)
    attempt("setgid(0)", os.setgid, 0)
`), nil)
		// Landlock run by a normal user: an unprivileged process cannot
		// empty its bounding set (that takes CAP_SETPCAP), so the command
		// keeps the server's. With no_new_privs no execve raises a
		// capability from it and new user namespaces are denied (above):
		// it is inert. A root server's Landlock backend empties it, and
		// bubblewrap always does.
		inertBnd := fx.landlock() && os.Geteuid() != 0 && strings.Contains(res.Stdout, "NoNewPrivs:\t1\n")
		me := ""
		for _, line := range strings.Split(res.Stdout, "\n") {
			name, value, _ := strings.Cut(line, ":")
			value = strings.TrimSpace(value)
			switch {
			case strings.HasPrefix(line, "ME "):
				me = strings.TrimPrefix(line, "ME ")
			case name == "CapBnd" && inertBnd:
			case strings.HasPrefix(name, "Cap") && strings.Trim(value, "0") != "":
				fx.escape(t, "capabilities in the jail: %s", line)
			case strings.HasPrefix(line, "UID 0") && me != "0":
				fx.escape(t, "a setuid program made uid %s root", me)
			}
		}
		read := "CapBnd:\t0000000000000000"
		if inertBnd {
			read = "CapEff:\t0000000000000000"
		}
		if !strings.Contains(res.Stdout, read) {
			t.Errorf("no capability lines read:\n%s", res.Stdout)
		}
	})
}

// unixConnect tries every socket in $SOCKS (colon-separated), through a
// symlink and /proc/self/root too, and every listening pathname socket the
// kernel lists outside the jail, as a stream, a seqpacket and a datagram.
var unixConnect = py(`
import socket
targets = []
for i, p in enumerate(E["SOCKS"].split(":")):
    link = HOME + "/.tmp/sock-link-%d" % i
    try:
        os.unlink(link)
    except OSError:
        pass
    os.symlink(p, link)
    targets += [p, "/proc/self/root" + p, link]
with open("/proc/net/unix") as f:
    for line in f.read().splitlines()[1:]:
        fields = line.split(None, 7)
        if len(fields) == 8 and int(fields[3], 16) & 0x10000 and fields[7].startswith("/") and not fields[7].startswith(HOME + "/"):
            targets.append(fields[7])
for p in targets:
    reach_unix(p, "unix socket %s" % p)
`)

// checkStdout applies attack's verdict to a result run outside attack.
func (fx *escapeFixture) checkStdout(t *testing.T, res tools.ExecResult, script string) {
	t.Helper()
	for _, line := range strings.Split(res.Stdout, "\n") {
		switch {
		case strings.HasPrefix(line, "ESCAPED"):
			fx.escape(t, "escape: %s", line)
		case line == "NOT-READY":
			t.Errorf("the attack did not wait for the socket: %s", line)
		}
	}
	if !strings.HasSuffix(res.Stdout, "attack-finished\n") || strings.Count(res.Stdout, pyDone) != strings.Count(script, pyDone) {
		t.Errorf("attack did not run to its end: %+v", res)
	}
}

// hostChannels attacks the channels to the host that a red-team pass found
// open once (promise 2): datagrams from a socketpair socket to a host
// socket path, the server's session keyring, netlink families beyond
// routing, and host FIFOs, which a read-only view does not close.
func (fx *escapeFixture) hostChannels(t *testing.T) {
	fx.vector(t, "unix-socketpair", func(t *testing.T) {
		dir := testkit.HostDir(t)
		gram := listenUnix(t, "unixgram", filepath.Join(dir, "log.sock"))
		stream := listenUnix(t, "unix", filepath.Join(dir, "daemon.sock"))
		gram.mustAccept(t)
		stream.mustAccept(t)
		for _, network := range []bool{true, false} {
			res := fx.attack(t, fx.a, py(socketpairAttack), map[string]any{"network": network, "env": map[string]any{"SOCKS": gram.addr + ":" + stream.addr}})
			if strings.Count(res.Stdout, "stream socketpair ok") != 2 {
				t.Errorf("a stream socketpair does not work as a pipe in the jail: %q %q", res.Stdout, res.Stderr)
			}
		}
		gram.mustBeUntouched(t, fx.escape)
		stream.mustBeUntouched(t, fx.escape)
	})

	fx.vector(t, "keyring", func(t *testing.T) {
		// The server starts from a login session's keyring holding a
		// secret, as one started from a desktop or ssh session does.
		ring := newHostKeyring(t, "jail-mcp-host-key-"+fx.marker, "host-secret-"+fx.marker)
		ts := fx.start(t, testkit.NewProject(t), fx.env(), "--session", "keys")
		res := fx.attack(t, ts, py(keyringAttack), map[string]any{"env": map[string]any{
			"HOSTRING": strconv.Itoa(ring.ring), "HOSTKEY": strconv.Itoa(ring.key), "KEYDESC": ring.desc,
			"NR_KEYCTL": strconv.Itoa(unix.SYS_KEYCTL), "NR_ADD_KEY": strconv.Itoa(unix.SYS_ADD_KEY), "NR_REQUEST_KEY": strconv.Itoa(unix.SYS_REQUEST_KEY),
		}})
		// Key rings are denied in the jail, on both backends, the way
		// Docker's default profile denies them: EPERM.
		if !strings.Contains(res.Stdout, "keyctl errno 1\n") {
			t.Errorf("keyctl in the jail does not fail with EPERM: %q", res.Stdout)
		}
		ring.check(t, fx.escape)
	})

	fx.vector(t, "netlink", func(t *testing.T) {
		port := listenNetlink(t)
		before := hostAddrs(t)
		for _, network := range []bool{true, false} {
			res := fx.attack(t, fx.a, py(netlinkAttack), map[string]any{"network": network, "env": map[string]any{"NLPORT": strconv.Itoa(int(port.pid))}})
			// Routing netlink still reads the jail's interfaces (ip addr,
			// getifaddrs): with network off under bubblewrap, loopback only.
			if !strings.Contains(res.Stdout, "'lo'") {
				t.Errorf("routing netlink does not list the interfaces (network %t): %q %q", network, res.Stdout, res.Stderr)
			}
		}
		if n := port.hits.Load(); n > 0 {
			fx.escape(t, "the host's netlink socket received %d messages from the jail", n)
		}
		if after := hostAddrs(t); !slices.Equal(before, after) {
			fx.escape(t, "the host's addresses changed: %v -> %v", before, after)
		}
	})

	fx.vector(t, "inherited-fds", func(t *testing.T) {
		// An MCP client that leaves descriptors open when it starts the
		// server (not close-on-exec): a host file open for writing and a
		// host directory, at 3 and 4, and the file again at 9.
		victim := filepath.Join(fx.victim, "file")
		before := testkit.StateOf(victim)
		file, err := os.OpenFile(victim, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		dir, err := os.Open(fx.victim)
		if err != nil {
			t.Fatal(err)
		}
		defer dir.Close()
		ts := testkit.StartServerCmd(t, testkit.NewProject(t), append(fx.env(), fx.backend.Env...), func(cmd *exec.Cmd) {
			cmd.ExtraFiles = []*os.File{file, dir, nil, nil, nil, nil, file}
		}, append(slices.Clone(fx.backend.Args), "--session", "fds")...)
		fx.attack(t, ts, `
for fd in 3 4 5 6 7 8 9; do
	try sh -c "echo from-the-jail >&$fd"
done
`+py(`
for fd in range(3, 64):
    attempt("write to descriptor %d" % fd, os.write, fd, b"from-the-jail\n")
    attempt("create a file through descriptor %d" % fd, lambda: os.close(os.open("pwned-" + E["MARKER"], os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)))
    attempt("open /proc/self/fd/%d for writing" % fd, lambda: os.close(os.open("/proc/self/fd/%d" % fd, os.O_WRONLY | os.O_APPEND)))
`), nil)
		if after := testkit.StateOf(victim); after != before {
			fx.escape(t, "the host file behind an inherited descriptor changed: %+v -> %+v", before, after)
		}
	})

	// jail-mcp run gives the command the user's terminal as its standard
	// input: whatever the command does to it (raw, no echo, non-blocking,
	// exclusive, output stopped) is undone however it ends.
	fx.vector(t, "run-terminal", func(t *testing.T) { runRestoresTerminal(t, fx.backend) })

	// A FIFO opened for writing ignores a read-only mount: a host process
	// reading one receives what the jail writes. bubblewrap shadows /tmp,
	// /var/tmp and /run and has a /dev/shm of its own; FIFOs in the project
	// and under HOME stay reachable there (knownGaps) until a Landlock
	// layer inside the sandbox closes them. Landlock denies them all.
	for _, f := range fx.fifos {
		fx.vector(t, f.vector, func(t *testing.T) {
			r := f.read(t)
			// Only a FIFO in view is the host's: where bubblewrap shadows
			// it, a write there makes a file of the sandbox's own.
			res := fx.attack(t, fx.a, `
if [ -p "$FIFO" ]; then
	echo "SEEN"
	try timeout 3 sh -c 'echo from-the-jail > "$1"' sh "$FIFO"
fi
`+py(`
import stat
if stat.S_ISFIFO(os.stat(E["FIFO"]).st_mode if os.path.exists(E["FIFO"]) else 0):
    attempt("open the host's FIFO for writing", lambda: os.write(os.open(E["FIFO"], os.O_WRONLY | os.O_NONBLOCK), b"from-the-jail\n"))
`), map[string]any{"env": map[string]any{"FIFO": f.path}})
			if n := r.close(); n > 0 {
				fx.escape(t, "the host read %d bytes from its FIFO %s", n, f.path)
			}
			// Where the FIFO is in view, the attack aimed at it.
			if f.inView(fx.backend.Name) && !strings.Contains(res.Stdout, "SEEN\n") {
				t.Errorf("the FIFO %s is not seen in the jail: the attack proves nothing\n%s", f.path, res.Stdout)
			}
		})
		// The read side: a reader in the jail takes what a host writer
		// meant for its host reader. Calls read nothing of /tmp, /var/tmp,
		// /run and (landlock) /dev but what they need there; a FIFO in the
		// project or under HOME is a known gap (Landlock's read right
		// cannot tell a FIFO from a file).
		fx.vector(t, strings.Replace(f.vector, "fifo-", "fifo-read-", 1), func(t *testing.T) {
			r := f.read(t)
			defer r.close()
			fx.attack(t, fx.a, py(`
import stat
if os.path.exists(E["FIFO"]) and stat.S_ISFIFO(os.stat(E["FIFO"]).st_mode):
    attempt("open the host's FIFO for reading", os.open, E["FIFO"], os.O_RDONLY | os.O_NONBLOCK)
`), map[string]any{"env": map[string]any{"FIFO": f.path}})
		})
	}
}

// agentByPidAttack finds the session agent among the command's ancestors
// (the first run as "jail-mcp agent") and tries, by its pid, what the
// kernel checks by uid alone, setting each value to the one it has
// (harmless should it get through); on x86_64 again through int 0x80.
const agentByPidAttack = `
import platform, resource
def field(p, i):
    return int(open("/proc/%d/stat" % p).read().rsplit(")", 1)[1].split()[i])
agent, p = 0, os.getppid()
while p > 1:
    try:
        argv = open("/proc/%d/cmdline" % p, "rb").read().split(b"\0")
    except OSError:
        break
    if len(argv) > 1 and argv[1] == b"agent":
        agent = p
        break
    p = field(p, 1)
print("AGENT", agent, flush=True)
if agent:
    nice = field(agent, 16)
    for lim in (resource.RLIMIT_NOFILE, resource.RLIMIT_NPROC, resource.RLIMIT_AS):
        attempt("prlimit(agent) read", resource.prlimit, agent, lim)
        try:
            cur = resource.prlimit(agent, lim)
        except OSError:
            continue
        attempt("prlimit(agent) set", resource.prlimit, agent, lim, cur)
    attempt("getpriority(agent)", os.getpriority, os.PRIO_PROCESS, agent)
    attempt("setpriority(agent)", os.setpriority, os.PRIO_PROCESS, agent, nice)
    attempt("sched_getaffinity(agent)", os.sched_getaffinity, agent)
    attempt("sched_setaffinity(agent)", os.sched_setaffinity, agent, os.sched_getaffinity(0))
    attempt("sched_setscheduler(agent)", os.sched_setscheduler, agent, os.SCHED_OTHER, os.sched_param(0))
    ioprio_get = {"x86_64": 252, "aarch64": 31}[platform.machine()]
    if libc.syscall(ioprio_get, 1, agent) >= 0:
        escaped("ioprio_get(agent)")
if agent and platform.machine() == "x86_64":
    # push rbx; eax, ebx, ecx, edx, esi = nr, a, b, c, d; int 0x80; pop rbx; ret
    code = bytes([0x53, 0x89, 0xf8, 0x89, 0xf3, 0x49, 0x89, 0xc9, 0x89, 0xd1, 0x44, 0x89, 0xca, 0x44, 0x89, 0xc6, 0xcd, 0x80, 0x5b, 0xc3])
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    # Below 4 GiB (MAP_32BIT), as the compat ABI's pointers must be.
    page = libc.mmap(None, 4096, 7, 0x22 | 0x40, -1, 0)
    ctypes.memmove(page, code, len(code))
    int80 = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_long, ctypes.c_long, ctypes.c_long, ctypes.c_long, ctypes.c_long)(page)
    mask = page + 2048
    def compat(*a):
        # In a child: where the kernel runs no IA-32 code, int 0x80 faults.
        r, w = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(r)
            os.write(w, b"%d %d" % (int80(*(list(a) + [0] * (5 - len(a)))), os.getpid()))
            os._exit(0)
        os.close(w)
        out = os.read(r, 64).split()
        os.close(r)
        os.waitpid(child, 0)
        return [int(x) for x in out] or None
    probe = compat(20)
    if not probe:
        print("COMPAT-ABI-ABSENT", flush=True)
    elif probe[0] != probe[1]:
        print("COMPAT-ABI-DENIED", probe[0], flush=True)
    else:
        if compat(340, agent, resource.RLIMIT_NOFILE, 0, 0)[0] == 0:
            escaped("compat prlimit64(agent)")
        if compat(96, 0, agent)[0] >= 0:
            escaped("compat getpriority(agent)")
        if compat(97, 0, agent, nice)[0] == 0:
            escaped("compat setpriority(agent)")
        if compat(242, 0, 128, mask)[0] <= 0:
            print("OWN-AFFINITY-REFUSED", flush=True)
        if compat(242, agent, 128, mask)[0] > 0:
            escaped("compat sched_getaffinity(agent)")
        if compat(241, agent, 128, mask)[0] == 0:
            escaped("compat sched_setaffinity(agent)")
        if compat(290, 1, agent)[0] >= 0:
            escaped("compat ioprio_get(agent)")
`

// socketpairAttack makes unix socket pairs of every type and tries to reach
// the host sockets in $SOCKS with them.
const socketpairAttack = `
import socket
addrs = E["SOCKS"].split(":")
def reach(s, what):
    s.settimeout(2)
    for a in addrs:
        try:
            s.sendto(b"x", a)
            escaped("%s: sendto %s" % (what, a))
        except OSError:
            pass
        try:
            s.connect(a)
            escaped("%s: connect %s" % (what, a))
        except OSError:
            pass
both = socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC
for kind, name in ((socket.SOCK_DGRAM, "datagram"), (socket.SOCK_SEQPACKET, "seqpacket")):
    for flags in (0, socket.SOCK_NONBLOCK, both):
        try:
            a, b = socket.socketpair(socket.AF_UNIX, kind | flags)
        except PermissionError:
            continue
        escaped("made a unix %s socketpair (flags %#x)" % (name, flags))
        reach(a, name + " socketpair")
# A stream pair works as a pipe, and reaches nothing: connected, it can
# neither connect again nor send to an address, also once its peer is gone.
for flags in (0, both):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM | flags)
    a.setblocking(True)
    b.setblocking(True)
    a.send(b"ok")
    print("stream socketpair", b.recv(2).decode(), flush=True)
    b.close()
    reach(a, "stream socketpair")
`

// keyringAttack reads, finds, changes and extends the server's session
// keyring ($HOSTRING, holding $HOSTKEY).
const keyringAttack = `
KC, AK, RK = int(E["NR_KEYCTL"]), int(E["NR_ADD_KEY"]), int(E["NR_REQUEST_KEY"])
ring, key, desc = int(E["HOSTRING"]), int(E["HOSTKEY"]), E["KEYDESC"].encode()
L = ctypes.c_long
libc.syscall.restype = ctypes.c_long
def kc(*a):
    return libc.syscall(L(KC), *[L(x) if isinstance(x, int) else x for x in a])
r = kc(0, -3, 0)
print("keyctl errno", 0 if r >= 0 else ctypes.get_errno())
for spec in (-1, -2, -3, -4, -5):
    r = kc(0, spec, 0)
    if r == ring:
        escaped("the session keyring is the host's (%d)" % r)
    elif r > 0:
        print("keyring", spec, r)
buf = ctypes.create_string_buffer(4096)
if kc(10, -3, b"user", desc, 0) > 0:
    escaped("found the host's key by searching the session keyring")
if libc.syscall(L(RK), b"user", desc, None, L(0)) > 0:
    escaped("found the host's key by request_key")
for what, k in (("key", key), ("keyring", ring)):
    n = kc(11, k, buf, 4096)
    if n >= 0:
        escaped("read the host's %s: %r" % (what, buf.raw[:max(n, 0)][:64]))
n = libc.syscall(L(AK), b"user", b"jail-key", b"x", L(1), L(ring))
if n >= 0:
    escaped("added a key to the host's keyring")
n = libc.syscall(L(AK), b"user", b"jail-key", b"x", L(1), L(-3))
if n >= 0 and kc(0, -3, 0) == ring:
    escaped("added a key to the session keyring, the host's")
for name, args in (("clear", (7, ring)), ("unlink", (9, key, ring)), ("update", (2, key, b"pwned", 5)),
        ("setperm", (5, key, 0x3f3f3f3f)), ("timeout", (15, key, 1)), ("invalidate", (21, key)), ("revoke", (3, key))):
    if kc(*args) == 0:
        escaped("keyctl %s on the host's key" % name)
`

// netlinkAttack opens every netlink family, sends to a host process's
// port ($NLPORT), and asks routing netlink to change the network.
const netlinkAttack = `
import socket, struct
port = int(E["NLPORT"])
for proto in range(32):
    for kind in (socket.SOCK_RAW, socket.SOCK_DGRAM):
        try:
            s = socket.socket(socket.AF_NETLINK, kind, proto)
        except OSError:
            continue
        if proto != 0:
            escaped("opened netlink family %d" % proto)
        try:
            s.sendto(struct.pack("=IHHII", 20, 16, 0, 1, 0) + b"jail", (port, 0))
            escaped("netlink family %d reached the host's port %d" % (proto, port))
        except OSError:
            pass
        s.close()
ifs = socket.if_nameindex()
print("interfaces", [n for _, n in ifs], flush=True)
def rtnl(msgtype, flags, body):
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    s.settimeout(2)
    s.send(struct.pack("=IHHII", 16 + len(body), msgtype, flags | 0x1 | 0x4, 1, 0) + body)  # REQUEST | ACK
    data = s.recv(65536)
    s.close()
    if struct.unpack("=H", data[4:6])[0] == 2:  # NLMSG_ERROR: its error code
        return struct.unpack("=i", data[16:20])[0]
    return None
# by its index from routing netlink: if_nametoindex asks an inet socket,
# which Landlock's network off denies
lo = [i for i, n in ifs if n == "lo"][0]
create = 0x400 | 0x200  # CREATE | EXCL
addr = socket.inet_aton("10.254.77.1")
rta = struct.pack("=HH", 8, 2) + addr + struct.pack("=HH", 8, 1) + addr  # IFA_LOCAL, IFA_ADDRESS
if rtnl(20, create, struct.pack("=BBBBI", socket.AF_INET, 32, 0, 0, lo) + rta) == 0:  # RTM_NEWADDR
    escaped("added an address to lo")
if rtnl(16, 0, struct.pack("=BxHiII", socket.AF_UNSPEC, 0, lo, 0, 1)) == 0:  # RTM_NEWLINK: lo down
    escaped("set lo down")
rtm = struct.pack("=BBBBBBBBI", socket.AF_INET, 32, 0, 0, 254, 4, 0, 6, 0)  # main table, static, blackhole
if rtnl(24, create, rtm + struct.pack("=HH", 8, 1) + socket.inet_aton("10.254.77.2")) == 0:  # RTM_NEWROUTE
    escaped("added a route")
`

// hostKeyring is a session keyring of the test, holding one secret key.
type hostKeyring struct {
	ring, key     int
	desc, payload string
}

// newHostKeyring gives the calling test's thread a new session keyring
// holding a user key, so that the processes the test starts from now on
// inherit it, as a server started from a login session does. The thread
// stays the test's (locked) and ends with it: no other goroutine ever
// runs with this keyring.
func newHostKeyring(t *testing.T, desc, payload string) hostKeyring {
	t.Helper()
	runtime.LockOSThread() // never unlocked: the thread exits with the test
	ring, err := unix.KeyctlJoinSessionKeyring("jail-mcp-test-" + strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Fatalf("join a session keyring: %v", err)
	}
	key, err := unix.AddKey("user", desc, []byte(payload), unix.KEY_SPEC_SESSION_KEYRING)
	if err != nil {
		t.Fatalf("add a key: %v", err)
	}
	k := hostKeyring{ring: ring, key: key, desc: desc, payload: payload}
	if got := k.read(key); got != payload {
		t.Fatalf("the test cannot read its own key: %q", got)
	}
	return k
}

func (k hostKeyring) read(id int) string {
	buf := make([]byte, 4096)
	n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
	if err != nil {
		return "error: " + err.Error()
	}
	return string(buf[:min(n, len(buf))])
}

// check: the keyring holds the key and nothing else, and the key is as it
// was. It runs on the thread that joined the keyring.
func (k hostKeyring) check(t *testing.T, escape escapeFunc) {
	t.Helper()
	if got := k.read(k.key); got != k.payload {
		escape(t, "the host's key changed: %q", got)
	}
	want := binary.NativeEndian.AppendUint32(nil, uint32(k.key))
	if got := k.read(k.ring); got != string(want) {
		escape(t, "the host's keyring changed: it lists %x, want %x", got, want)
	}
	if d, err := unix.KeyctlString(unix.KEYCTL_DESCRIBE, k.key); err != nil || !strings.HasSuffix(d, ";"+k.desc) || !strings.Contains(d, ";3f010000;") {
		escape(t, "the host's key is now %q (%v)", d, err)
	}
}

// netlinkPort is a host process's NETLINK_USERSOCK socket, counting what
// reaches it.
type netlinkPort struct {
	pid  uint32
	hits atomic.Int64
}

func listenNetlink(t *testing.T) *netlinkPort {
	t.Helper()
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_USERSOCK)
	if err != nil {
		t.Fatalf("netlink socket: %v", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		t.Fatalf("bind netlink socket: %v", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	p := &netlinkPort{pid: sa.(*unix.SockaddrNetlink).Pid}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000})
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for !stop.Load() {
			if n, _, err := unix.Recvfrom(fd, buf, 0); err == nil && n > 0 {
				p.hits.Add(1)
			}
		}
	}()
	t.Cleanup(func() { stop.Store(true); <-done; unix.Close(fd) })
	// The host reaches it: the attack's failure is the jail's doing.
	c, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_USERSOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(c)
	if err := unix.Sendto(c, []byte("\x14\x00\x00\x00\x10\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00host"), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Pid: p.pid}); err != nil {
		t.Fatalf("the host cannot reach its own netlink port: %v", err)
	}
	if !testkit.WaitFor(2*time.Second, func() bool { return p.hits.Load() > 0 }) {
		t.Fatal("the host's netlink port got nothing from the host")
	}
	p.hits.Store(0)
	return p
}

// hostAddrs lists every address of every interface of the host.
func hostAddrs(t *testing.T) []string {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			out = append(out, i.Name+" "+a.String())
		}
		out = append(out, fmt.Sprintf("%s %v", i.Name, i.Flags))
	}
	slices.Sort(out)
	return out
}

// hostFIFO is a FIFO of the host the fixture made before its baseline, in
// a place where host programs keep them.
type hostFIFO struct {
	vector string // the escape vector aimed at it
	path   string
	// shadowed: bubblewrap hides it (ShadowDirs, or its own /dev/shm).
	shadowed bool
	mode     os.FileMode // 0: 0666, as a FIFO meant for other users is
}

// inView reports whether the jail of backend sees the FIFO: Landlock sees
// the whole host; bubblewrap all but what it shadows.
func (f hostFIFO) inView(backend string) bool { return backend == "landlock" || !f.shadowed }

// makeFIFOs makes the fixture's host FIFOs. Under /run, where only root
// may write, a normal user's goes to the world-writable /run/lock.
func (fx *escapeFixture) makeFIFOs(t *testing.T) {
	t.Helper()
	run := "/run"
	if unix.Access(run, unix.W_OK) != nil {
		run = "/run/lock"
		fx.globs = append(fx.globs, filepath.Join(run, "*"+fx.marker+"*"))
	}
	name := fx.marker + "-fifo"
	for _, f := range []hostFIFO{
		{vector: "fifo-tmp", path: filepath.Join("/tmp", name), shadowed: true},
		{vector: "fifo-var-tmp", path: filepath.Join("/var/tmp", name), shadowed: true},
		{vector: "fifo-run", path: filepath.Join(run, name), shadowed: true},
		{vector: "fifo-dev-shm", path: filepath.Join("/dev/shm", name), shadowed: true},
		{vector: "fifo-project", path: filepath.Join(fx.project, "fifo")},
		{vector: "fifo-home-cache", path: filepath.Join(fx.home, ".cache", "fifo")},
		// Neither in the project nor under HOME: as root a root-only FIFO
		// in a root-only directory under /srv, as a service keeps one.
		fx.outsideFIFO(t),
	} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mkfifo(f.path, 0o666); err != nil {
			t.Fatalf("make a host FIFO: %v", err)
		}
		// Writable by anyone, as a FIFO meant for other users is, unless
		// the vector says otherwise.
		os.Chmod(f.path, cmp.Or(f.mode, 0o666))
		t.Cleanup(func() { os.Remove(f.path) })
		fx.fifos = append(fx.fifos, f)
	}
}

// outsideFIFO is a host FIFO outside the project and HOME: as root, mode
// 0600 in a directory of mode 0700 under /srv; else in a directory of
// the test's.
func (fx *escapeFixture) outsideFIFO(t *testing.T) hostFIFO {
	t.Helper()
	if os.Geteuid() != 0 {
		return hostFIFO{vector: "fifo-outside", path: filepath.Join(testkit.HostDir(t), "fifo"), mode: 0o600}
	}
	dir := filepath.Join("/srv", fx.marker)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	fx.globs = append(fx.globs, filepath.Join("/srv", "*"+fx.marker+"*"))
	return hostFIFO{vector: "fifo-outside", path: filepath.Join(dir, "fifo"), mode: 0o600}
}

// fifoReader is a host process's read end of a FIFO, counting what
// arrives.
type fifoReader struct {
	r, w *os.File
	n    atomic.Int64
	done chan struct{}
}

// read opens the FIFO for reading, and for writing too, so that reads
// wait for data rather than see the end of a FIFO with no writer.
func (f hostFIFO) read(t *testing.T) *fifoReader {
	t.Helper()
	r, err := os.OpenFile(f.path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatalf("open the host FIFO for reading: %v", err)
	}
	w, err := os.OpenFile(f.path, os.O_WRONLY, 0)
	if err != nil {
		r.Close()
		t.Fatalf("open the host FIFO for writing: %v", err)
	}
	fr := &fifoReader{r: r, w: w, done: make(chan struct{})}
	go func() {
		defer close(fr.done)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			fr.n.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	return fr
}

// close stops reading and returns what was read.
func (fr *fifoReader) close() int64 {
	fr.w.Close()
	<-fr.done
	fr.r.Close()
	return fr.n.Load()
}

// httpSessions attacks the HTTP server's session table (promise 7): a
// client without the token opens nothing and what it sent is never
// logged; with it, no more than --max-sessions sessions live at once,
// however many it asks for.
func (fx *escapeFixture) httpSessions(t *testing.T) {
	token := "escape-token-" + fx.marker
	project := testkit.NewProject(t)
	hs := testkit.StartHTTP(t, project, append(fx.env("JAIL_MCP_TOKEN="+token), fx.backend.Env...), append(slices.Clone(fx.backend.Args), "--max-sessions", "2")...)
	wrong := "wrong-token-" + fx.marker + "-attacker"
	for _, auth := range []string{"", "Bearer " + wrong, "Basic " + wrong} {
		r := hs.MustRaw(t, http.MethodPost, "", map[string]string{"Authorization": auth}, testkit.InitializeRPC(1))
		if r.Code != http.StatusUnauthorized || r.Header.Get("Mcp-Session-Id") != "" {
			fx.escape(t, "initialize with Authorization %q: status %d, session %q", auth, r.Code, r.Header.Get("Mcp-Session-Id"))
		}
	}
	if !testkit.Warned(hs, "bearer token refused", "remote=127.0.0.1:", "reason=wrong") || !testkit.Warned(hs, "bearer token refused", "reason=missing") {
		t.Errorf("refused tokens are not logged:\n%s", hs.Stderr)
	}
	if strings.Contains(hs.Stderr.String(), wrong) {
		t.Errorf("the server logged a refused token:\n%s", hs.Stderr)
	}
	var s *testkit.HTTPSession
	for range 2 {
		s = hs.Connect(t, "")
		if res, raw := s.Exec(map[string]any{"command": "echo $HOME"}); res.Backend != fx.backend.Name || strings.TrimSpace(res.Stdout) != s.Jail() {
			t.Fatalf("session on %s: %+v %s", fx.backend.Name, res, testkit.ResultText(raw))
		}
	}
	// From a session's own command (network on): the server's metrics
	// want the token (a session id is none), /healthz says nothing but
	// ok, and no token is in the command's environment.
	base := strings.TrimSuffix(hs.URL, "/mcp")
	res, _ := s.Exec(map[string]any{"command": "curl -s -o $HOME/m1 -w '%{http_code}\\n' " + base + "/metrics; " +
		"curl -s -o $HOME/m2 -w '%{http_code}\\n' -H 'Mcp-Session-Id: " + s.ID + "' " + base + "/metrics; " +
		"curl -s " + base + "/healthz; env | grep -c -i token; cat $HOME/m1 $HOME/m2 | grep -c jail_mcp_"})
	if res.Stdout != "401\n401\nok\n0\n0\n" {
		fx.escape(t, "the server's /metrics and /healthz from a command: %q, want 401, 401, ok, no token, no metrics", res.Stdout)
	}
	for i := range 5 {
		if r := hs.MustRaw(t, http.MethodPost, "", nil, testkit.InitializeRPC(10+i)); r.Code != http.StatusServiceUnavailable || r.Header.Get("Mcp-Session-Id") != "" {
			fx.escape(t, "initialize beyond --max-sessions 2: status %d, session %q", r.Code, r.Header.Get("Mcp-Session-Id"))
		}
	}
	if got := testkit.JailNames(t, project); len(got) != 2 {
		fx.escape(t, "jails made: %v, want the 2 sessions'", got)
	}
}

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
		server := ts.Cmd.Process.Pid
		tids := testkit.ThreadsOf(t, server)
		if len(tids) < 2 {
			t.Fatalf("the server has %d threads: the attack proves less than it should", len(tids))
		}
		env := map[string]any{"SERVERPID": strconv.Itoa(server)}
		if fx.landlock() {
			// The guard of the session's domain, the server's child: it is
			// in the session's outer domain, out of a command's reach.
			ts.Exec(map[string]any{"command": "true"})
			guards := testkit.GuardsOf(server)
			if len(guards) == 0 {
				t.Fatal("no guard of the server's agents found: the attack proves less than it should")
			}
			env["GUARDPID"] = strconv.Itoa(guards[0])
			defer func() {
				for _, g := range guards {
					if st := testkit.ProcStatFile(filepath.Join("/proc", strconv.Itoa(g), "stat")); len(st) < 3 || st[2] == "T" || st[2] == "t" || st[2] == "Z" {
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
				t.Errorf("saw %d of the server's %d threads: the attack proves less than it should\n%s", n, len(tids), testkit.Tail(res.Stdout))
			}
		} else if strings.Contains(res.Stdout, "server-thread ") {
			fx.escape(t, "the server's threads are visible in the jail:\n%s", testkit.Tail(res.Stdout))
		}
		if fx.landlock() && !strings.Contains(res.Stdout, "guard-thread ") {
			t.Errorf("the guard was not seen: the attack proves less than it should\n%s", testkit.Tail(res.Stdout))
		}
		if !strings.Contains(res.Stdout, "agent-thread ") {
			t.Errorf("the agent's threads were not seen: the attack proves less than it should\n%s", testkit.Tail(res.Stdout))
		}
		for _, tid := range testkit.ThreadsOf(t, server) {
			st := testkit.ProcStatFile(filepath.Join("/proc", strconv.Itoa(server), "task", strconv.Itoa(tid), "stat"))
			if len(st) > 2 && (st[2] == "T" || st[2] == "t") {
				fx.escape(t, "server thread %d is stopped (state %s)", tid, st[2])
			}
			if tracer := testkit.StatusFile(filepath.Join("/proc", strconv.Itoa(server), "task", strconv.Itoa(tid), "status"), "TracerPid"); tracer != "0" && tracer != "" {
				fx.escape(t, "server thread %d traced by %s", tid, tracer)
			}
		}
		// The server still keeps time: a call with a 1 s timeout ends
		// about then, and the session's agent still runs calls.
		start := time.Now()
		r, _ := ts.Exec(map[string]any{"command": "sleep 30", "timeout_ms": 1000})
		if !r.TimedOut || time.Since(start) > 15*time.Second {
			fx.escape(t, "the server no longer keeps its timeouts: %+v after %v", r, time.Since(start))
		}
		if r, _ := ts.Exec(map[string]any{"command": "echo alive"}); r.Stdout != "alive\n" || r.Agent != "" {
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
		defer testkit.KillMarked(m)
		ts := fx.start(t, testkit.NewProject(t), fx.env(), "--session", "ak")
		other := make(chan tools.ExecResult, 1)
		go func() {
			r, _, _ := callExec(context.WithoutCancel(t.Context()), ts, map[string]any{"command": "sleep " + m, "timeout_ms": 60000})
			other <- r
		}()
		if !testkit.WaitFor(10*time.Second, func() bool { return testkit.Sleepers(m) == 1 }) {
			t.Fatal("the other call did not start")
		}
		start := time.Now()
		r, raw := ts.Exec(map[string]any{"command": `export AGENTPID=$PPID
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
			t.Errorf("no thread of the agent shares the call's domain: the vector proves nothing (%+v %q)", r, testkit.ResultText(raw))
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
		if !testkit.WaitFor(5*time.Second, func() bool { return testkit.Sleepers(m) == 0 }) {
			fx.escape(t, "a call of the killed agent left processes: %v", testkit.ProcessesWith(m))
		}
		r, _ = ts.Exec(map[string]any{"command": "echo again"})
		if r.Stdout != "again\n" || !strings.Contains(r.Agent, "started a new session agent") {
			t.Errorf("the next call: %+v", r)
		}
		if st := ts.Status(); len(st.Agents) != 1 || st.Agents[0].Restarts != 1 || st.Agents[0].Ended == "" {
			t.Errorf("jail_status agents: %+v", st.Agents)
		}
		if r, _ := fx.a.Exec(map[string]any{"command": "echo other"}); r.Stdout != "other\n" || r.Agent != "" {
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
    # Every descriptor, not only stdout: the agent holds the inodes its
    # read views granted (O_PATH), the server its jails and the host's.
    SYS_pidfd_getfd = 438
    for n in range(256):
        if libc.syscall(SYS_pidfd_getfd, fd, n, 0) >= 0:
            escaped("pidfd_getfd of %s's descriptor %d" % (kind, n))
            break
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
