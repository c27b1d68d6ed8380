//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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

	// The masking of listening sockets, by the paths the kernel lists when
	// the call starts, must hold for every other way a host daemon's
	// socket can be reached.
	fx.vector(t, "unix-socket-late", func(t *testing.T) {
		dir := hostDir(t)
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
		if !waitFor(10*time.Second, func() bool { return len(processesWith(token)) > 0 }) {
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
		dir := hostDir(t)
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
		dir := hostDir(t)
		t.Chdir(dir)
		l := listenUnix(t, "unix", "daemon.sock")
		l.mustAccept(t)
		fx.attack(t, fx.a, unixConnect, map[string]any{"env": map[string]any{"SOCKS": filepath.Join(dir, "daemon.sock")}})
		l.mustBeUntouched(t, fx.escape)
	})
	fx.vector(t, "unix-socket-other-netns", func(t *testing.T) {
		// A daemon in another network namespace (a container) listening
		// on a host path: the kernel lists it only in its own namespace.
		sock := filepath.Join(hostDir(t), "container.sock")
		l := listenInNetns(t, fx.py, sock)
		l.mustAccept(t)
		fx.attack(t, fx.a, unixConnect, map[string]any{"env": map[string]any{"SOCKS": sock}})
		l.mustBeUntouched(t, fx.escape)
	})
	fx.vector(t, "unix-socket-datagram", func(t *testing.T) {
		// A daemon's datagram socket (a syslog, a notify socket) never listens.
		dir := hostDir(t)
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

	fx.vector(t, "signal", func(t *testing.T) {
		victim := startHostSleep(t, "1235."+strconv.Itoa(os.Getpid()))
		env := map[string]any{"HOSTPID": strconv.Itoa(victim.pid), "SERVERPID": strconv.Itoa(fx.a.cmd.Process.Pid)}
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
		fx.a.exec(map[string]any{"command": "kill -9 -1; kill -STOP -1; sleep 0.2"})
		victim.mustLive(t, fx.escape)
		if res, _ := fx.a.exec(map[string]any{"command": "echo alive"}); res.Stdout != "alive\n" {
			fx.escape(t, "the server did not survive: %+v", res)
		}
	})

	fx.vector(t, "ptrace", func(t *testing.T) {
		victim := startHostSleep(t, "1236."+strconv.Itoa(os.Getpid()))
		env := map[string]any{"HOSTPID": strconv.Itoa(victim.pid), "SERVERPID": strconv.Itoa(fx.a.cmd.Process.Pid)}
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
		if tracer := statusField(t, victim.pid, "TracerPid"); tracer != "0" {
			fx.escape(t, "host process traced by %s", tracer)
		}
	})

	fx.vector(t, "tiocsti", func(t *testing.T) {
		// The server has a real controlling terminal: the one a command
		// would inject keystrokes into.
		if tty := procStatField(t, fx.a.cmd.Process.Pid, 4); tty == "0" {
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

	fx.vector(t, "fds", func(t *testing.T) {
		res, _ := fx.a.exec(map[string]any{"argv": []string{"ls", "/proc/self/fd"}})
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
			if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", fx.a.cmd.Process.Pid, fd)); err == nil {
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
				target == "/dev/null", within(target, fx.jails["a"]):
			default:
				fx.escape(t, "descriptor of the host in the jail: %s", line)
			}
		}
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
