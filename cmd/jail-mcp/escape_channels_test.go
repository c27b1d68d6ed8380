//go:build linux

package main

import (
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
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hostChannels attacks the channels to the host that a red-team pass found
// open once (promise 2): datagrams from a socketpair socket to a host
// socket path, the server's session keyring, netlink families beyond
// routing, and host FIFOs, which a read-only view does not close.
func (fx *escapeFixture) hostChannels(t *testing.T) {
	fx.vector(t, "unix-socketpair", func(t *testing.T) {
		dir := hostDir(t)
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
		ts := fx.start(t, newProject(t), fx.env(), "--session", "keys")
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
		before := stateOf(t, victim)
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
		ts := startServerCmd(t, newProject(t), append(fx.env(), fx.backend.env...), func(cmd *exec.Cmd) {
			cmd.ExtraFiles = []*os.File{file, dir, nil, nil, nil, nil, file}
		}, append(slices.Clone(fx.backend.args), "--session", "fds")...)
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
		if after := stateOf(t, victim); after != before {
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
			if f.inView(fx.backend.name) && !strings.Contains(res.Stdout, "SEEN\n") {
				t.Errorf("the FIFO %s is not seen in the jail: the attack proves nothing\n%s", f.path, res.Stdout)
			}
		})
	}
}

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
	if !waitFor(2*time.Second, func() bool { return p.hits.Load() > 0 }) {
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
	} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mkfifo(f.path, 0o666); err != nil {
			t.Fatalf("make a host FIFO: %v", err)
		}
		// Writable by anyone, as a FIFO meant for other users is.
		os.Chmod(f.path, 0o666)
		t.Cleanup(func() { os.Remove(f.path) })
		fx.fifos = append(fx.fifos, f)
	}
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
	project := newProject(t)
	hs := startHTTP(t, project, append(fx.env(), fx.backend.env...), append(slices.Clone(fx.backend.args), "--token", token, "--max-sessions", "2")...)
	wrong := "wrong-token-" + fx.marker + "-attacker"
	for _, auth := range []string{"", "Bearer " + wrong, "Basic " + wrong} {
		r := hs.mustRaw(t, http.MethodPost, "", map[string]string{"Authorization": auth}, httpInitialize(1))
		if r.code != http.StatusUnauthorized || r.header.Get("Mcp-Session-Id") != "" {
			fx.escape(t, "initialize with Authorization %q: status %d, session %q", auth, r.code, r.header.Get("Mcp-Session-Id"))
		}
	}
	if !httpWarned(hs, "bearer token refused", "remote=127.0.0.1:", "reason=wrong") || !httpWarned(hs, "bearer token refused", "reason=missing") {
		t.Errorf("refused tokens are not logged:\n%s", hs.stderr)
	}
	if strings.Contains(hs.stderr.String(), wrong) {
		t.Errorf("the server logged a refused token:\n%s", hs.stderr)
	}
	for range 2 {
		s := hs.connect(t, "")
		if res, raw := s.exec(map[string]any{"command": "echo $HOME"}); res.Backend != fx.backend.name || strings.TrimSpace(res.Stdout) != s.jail() {
			t.Fatalf("session on %s: %+v %s", fx.backend.name, res, text(raw))
		}
	}
	for i := range 5 {
		if r := hs.mustRaw(t, http.MethodPost, "", nil, httpInitialize(10+i)); r.code != http.StatusServiceUnavailable || r.header.Get("Mcp-Session-Id") != "" {
			fx.escape(t, "initialize beyond --max-sessions 2: status %d, session %q", r.code, r.header.Get("Mcp-Session-Id"))
		}
	}
	if got := httpJailNames(t, project); len(got) != 2 {
		fx.escape(t, "jails made: %v, want the 2 sessions'", got)
	}
}
