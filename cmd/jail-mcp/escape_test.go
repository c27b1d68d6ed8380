//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/mark3labs/mcp-go/mcp"
	"golang.org/x/sys/unix"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/tools"
)

// TestEscape attacks every promise of docs/security.md through the real server,
// on every confining backend (testBackends), one subtest per vector:
// TestEscape/<backend>/<promise>/<vector>. Every attack must fail, and
// after each one the host must be as it was: the project, the servers'
// HOME with its fake credentials, a victim directory outside the project,
// another session's jail, /dev/shm and every host path named with the
// suite's marker are snapshotted once and compared after each vector.
//
// A vector a backend is known not to close (knownGaps) must still escape:
// its escapes are logged as EXPECTED FAILURE, never skipped, and it fails
// once it no longer escapes, so that the gap is taken off the list.
//
// The servers run with the defaults: under bubblewrap the project view is
// on (asserted), so a write to the project exits 0 into the session's
// layer; it is judged by the host, not by its exit status (inView), and
// the host project's files must be byte-identical at the suite's end
// (projectIntact). Under Landlock the view is off (asserted).
//
// The attacks assume nothing about the uid they run as: the same suite runs
// as root (CI) and as a normal user.
func TestEscape(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		fx := newEscapeFixture(t, b)
		t.Run("1", fx.noHostWrite)
		t.Run("2", fx.noChannel)
		t.Run("3", fx.nothingOutlives)
		t.Run("4", fx.noConfusedDeputy)
		t.Run("5", fx.rootIsNotSpecial)
		t.Run("6", fx.secretsStayOut)
		t.Run("7", fx.bounded)
		t.Run("8", fx.failClosed)
		t.Run("jobs", fx.jobs)
		t.Run("egress", fx.egress)
		t.Run("mask", fx.mask)
		t.Run("project", fx.projectIntact)
	})
}

// knownGaps are the vectors a backend is known not to close, by
// <backend>/<promise>/<vector>, each with when the gap shows. The backend
// lists them among the promises it does not keep (jail_status); they are
// open for the reason given here, not by oversight.
var knownGaps = map[string]func() bool{
	// Landlock has no access right for changes of metadata: utime of a
	// file the server's user owns works from the jail wherever the file
	// is. seccomp cannot close it either: it cannot tell a path in the
	// jail from one outside, and setting times is what every build tool
	// does in its own jail.
	"landlock/1/utime": gapAlways,
	// chmod and chown likewise, for a server that is not root: seccomp
	// could only deny them everywhere, in the jail too, where a normal
	// user's commands need them (chmod +x). As root the Landlock backend
	// denies them outright (a root server owns the host's files), and the
	// gap closes.
	"landlock/1/chmod": gapNotRoot,
	"landlock/1/chown": gapNotRoot,
	// Opening a FIFO for writing ignores a read-only mount. bubblewrap
	// shadows /tmp, /var/tmp and /run, where host programs keep FIFOs, but
	// the project and HOME must stay in view: a FIFO there reaches its host
	// reader unless the session agent's Landlock layer inside the sandbox
	// denies the open, which needs Landlock ABI 6 (bwrap's direct mode
	// without it).
	"bwrap/2/fifo-project":    gapBwrapDirect,
	"bwrap/2/fifo-home-cache": gapBwrapDirect,
	"bwrap/2/fifo-outside":    gapBwrapDirect,
	// Opening a FIFO for reading: Landlock's read right and a read-only
	// mount cannot tell a FIFO from a file, and seccomp cannot see what a
	// path names, so any FIFO the server's user can open for reading,
	// wherever a call reads (the project, HOME, any other directory, as
	// root a root-only FIFO anywhere) is open to a reader in the jail.
	// Only where a call reads nothing of the host (/tmp, /var/tmp, /run,
	// /dev/shm, the --deny-read list) is a FIFO out of reach. doctor and
	// jail_status declare it (TestFIFOReadDeclared).
	"bwrap/2/fifo-read-project":       gapAlways,
	"bwrap/2/fifo-read-home-cache":    gapAlways,
	"bwrap/2/fifo-read-outside":       gapAlways,
	"landlock/2/fifo-read-project":    gapAlways,
	"landlock/2/fifo-read-home-cache": gapAlways,
	"landlock/2/fifo-read-outside":    gapAlways,
}

// gapBwrapDirect: bwrap runs each call in its own sandbox, without a
// session agent (a kernel whose Landlock is older than ABI 6).
var gapBwrapDirect = sync.OnceValue(func() bool {
	b, err := jail.Open(context.Background(), "bwrap", jail.Options{Getenv: os.Getenv})
	return err == nil && !b.Agents()
})

func gapAlways() bool  { return true }
func gapNotRoot() bool { return os.Geteuid() != 0 }

// escapeFixture is the host the suite attacks.
type escapeFixture struct {
	top     *testing.T      // TestEscape/<backend>
	backend testkit.Backend // every server of the suite runs on it
	marker  string          // in the name of every host object an attack aims at
	project string          // holds the jails of sessions a, b and d
	home    string          // the servers' HOME, with fake credentials, --auth all
	victim  string          // a directory outside the project
	py      string
	a       *testkit.Server // the attacker, with a controlling terminal
	b       *testkit.Server // another session of the same project
	d       *testkit.Server // the one tricked into acting as a deputy
	tty     *os.File        // a's controlling terminal, slave side
	jails   map[string]string
	fifos   []hostFIFO // host FIFOs, each the target of a vector

	hostSock, projSock, abstract *hostListener

	roots  []string        // trees snapshotted whole
	opaque map[string]bool // jails whose contents change by design
	globs  []string        // host paths named with the marker
	before map[string]testkit.Node

	view        bool                   // the project view is on (bubblewrap's default)
	upperMode   map[string]fs.FileMode // of each session's layer, before the attacks
	hostProject map[string]projectFile // the host project's files, before the attacks

	gap        string   // the running vector's knownGaps key, if it is one of this backend
	escapes    []string // what got out in a known gap
	unexpected int      // escapes reported as failures, by every vector so far
}

func newEscapeFixture(t *testing.T, b testkit.Backend) *escapeFixture {
	fx := &escapeFixture{
		top:     t,
		backend: b,
		marker:  fmt.Sprintf("jail-mcp-escape-%d", os.Getpid()),
		project: testkit.NewProject(t),
		home:    testkit.HostDir(t),
		victim:  testkit.HostDir(t),
		py:      testkit.Python3(t),
	}
	writeFiles(t, fx.home, map[string]string{
		".gitconfig":           "[user]\n\tname = host-user\n",
		".config/gh/hosts.yml": "github.com:\n    oauth_token: gho_fake_host_token\n",
		".codex/auth.json":     `{"token":"codex-fake-secret"}`,
		".codex/config.toml":   "model = \"host\"\n",
		".claude.json":         `{"host":true}`,
	})
	writeFiles(t, fx.victim, map[string]string{
		"file":      "victim\n",
		"sub/inner": "inner\n",
		"big":       strings.Repeat("v", 2<<20),
	})
	if err := os.Mkdir(filepath.Join(fx.victim, "emptydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, fx.project, map[string]string{"keep.txt": "keep\n", "src/main.c": "int main(void) { return 0; }\n"})

	env := fx.env()
	fx.a, fx.tty = fx.startWithTTY(t, fx.project, env, "--session", "a", "--auth", "all")
	fx.b = fx.start(t, fx.project, env, "--session", "b", "--auth", "all")
	fx.d = fx.start(t, fx.project, env, "--session", "d", "--auth", "all")
	for _, ts := range []*testkit.Server{fx.a, fx.b, fx.d} {
		// The defaults: the view on under bubblewrap (--overlay auto),
		// off under Landlock, saying why.
		st := ts.Status()
		if st.OverlayMode != "auto" || st.Overlay == fx.landlock() || fx.landlock() && !strings.Contains(st.OverlayReason, "landlock") {
			t.Fatalf("%s: project view on %t under --overlay %q (%s), want it on under bubblewrap, off under Landlock", st.Session, st.Overlay, st.OverlayMode, st.OverlayReason)
		}
		fx.view = st.Overlay
	}
	fx.jails = map[string]string{}
	for _, s := range []string{"a", "b", "d"} {
		fx.jails[s] = filepath.Join(fx.project, ".agent-home", s)
	}
	for ts, script := range map[*testkit.Server]string{
		fx.a: `echo a-secret > "$HOME/a-secret"`,
		fx.b: `echo b-secret > "$HOME/b-secret"`,
		fx.d: `true`,
	} {
		if res, raw := ts.Exec(map[string]any{"command": script}); res.ExitCode != 0 || !res.Confined {
			t.Fatalf("set-up call: %+v %q", res, testkit.ResultText(raw))
		}
	}

	// Host daemons, bound after the servers started: masking is per call.
	fx.hostSock = listenUnix(t, "unix", filepath.Join(testkit.HostDir(t), "agent.sock"))
	fx.projSock = listenUnix(t, "unix", filepath.Join(fx.project, "daemon.sock"))
	fx.abstract = listenUnix(t, "unix", fmt.Sprintf("@jail-mcp-test-%d", os.Getpid()))
	posix := filepath.Join("/dev/shm", fx.marker+"-posix")
	if err := os.WriteFile(posix, []byte("host-shm\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(posix) })
	// A connection from the host sets a socket's access time once.
	for _, l := range []*hostListener{fx.hostSock, fx.projSock, fx.abstract} {
		l.mustAccept(t)
	}

	fx.roots = []string{fx.project, fx.home, fx.victim, "/dev/shm"}
	fx.opaque = map[string]bool{fx.jails["a"]: true, fx.jails["d"]: true}
	for _, dir := range []string{"/tmp", "/var/tmp", "/dev", "/run", "/", "/etc", "/usr/local"} {
		fx.globs = append(fx.globs, filepath.Join(dir, "*"+fx.marker+"*"))
	}
	fx.makeFIFOs(t)
	fx.upperMode = map[string]fs.FileMode{}
	for s, jail := range fx.jails {
		fx.upperMode[s] = testkit.StateOf(filepath.Join(jail, ".overlay", "upper")).Mode
	}
	fx.hostProject = fx.projectFiles(t)
	// The first walk sets the access times that reading files and listing
	// directories update once; the baseline is the second.
	fx.snapshot(t)
	fx.before = fx.snapshot(t)
	return fx
}

// start starts a server of the suite on its backend.
func (fx *escapeFixture) start(t *testing.T, project string, env []string, args ...string) *testkit.Server {
	t.Helper()
	return fx.backend.Start(t, project, env, args...)
}

// startWithTTY is start with a controlling terminal (startServerWithTTY).
func (fx *escapeFixture) startWithTTY(t *testing.T, project string, env []string, args ...string) (*testkit.Server, *os.File) {
	t.Helper()
	b := fx.backend
	ts, tty := startServerWithTTY(t, project, append(slices.Clone(env), b.Env...), append(slices.Clone(b.Args), args...)...)
	if got := ts.Status().Backend; got != b.Name {
		t.Fatalf("server runs backend %q, want %q", got, b.Name)
	}
	return ts, tty
}

// landlock tells whether the suite runs on the Landlock backend: no mount,
// pid or IPC namespace, so what the host has is visible (reads are not a
// promise) and only acts on it must fail; credentials are symlinks placed
// in the calling session's jail for each call.
func (fx *escapeFixture) landlock() bool { return fx.backend.Name == "landlock" }

// env is the servers' environment: the test's, with HOME the fake one.
func (fx *escapeFixture) env(extra ...string) []string {
	env := slices.DeleteFunc(testkit.ServerEnv(), func(kv string) bool { return strings.HasPrefix(kv, "HOME=") })
	env = append(env, "HOME="+fx.home)
	return append(env, extra...)
}

// vector runs one attack as a subtest and then checks the host. In a
// known gap of the backend (knownGaps) the escapes are collected, not
// failed on: the vector must escape, is logged as an EXPECTED FAILURE, and
// what it changed of the host is undone and taken as the new baseline, so
// that the vectors after it are judged on their own.
func (fx *escapeFixture) vector(t *testing.T, name string, attack func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		key := fx.backend.Name + "/" + strings.TrimPrefix(t.Name(), fx.top.Name()+"/")
		fx.gap, fx.escapes = "", nil
		if when, ok := knownGaps[key]; ok && when() {
			fx.gap = key
		}
		defer func() { fx.gap, fx.escapes = "", nil }()
		base := fx.before
		attack(t)
		fx.checkHost(t)
		fx.resetViews(t)
		if fx.gap == "" {
			return
		}
		if len(fx.escapes) == 0 {
			t.Errorf("known gap %s no longer reproduces: remove it from knownGaps", key)
			return
		}
		t.Logf("EXPECTED FAILURE (known %s gap): %d escapes, first: %s", key, len(fx.escapes), fx.escapes[0])
		fx.restore(base)
		fx.snapshot(t) // sets the access times the attack left to update
		fx.before = fx.snapshot(t)
	})
}

// escapeFunc is fx.escape, for helpers that detect escapes.
type escapeFunc func(t *testing.T, format string, args ...any)

// escape reports one thing that got out of the jail: a failure of the
// vector, unless the vector is a known gap of the backend, where it is
// collected for the vector's verdict. Every check that detects an escape
// reports through it; set-up failures do not.
func (fx *escapeFixture) escape(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if fx.gap != "" {
		fx.escapes = append(fx.escapes, msg)
		return
	}
	fx.unexpected++
	t.Error(msg)
}

// checkHost compares the host with the baseline. A difference is reported
// once, by the vector that made it: the baseline then moves on.
func (fx *escapeFixture) checkHost(t *testing.T) {
	t.Helper()
	after := fx.snapshot(t)
	diff := testkit.DiffSnapshots(fx.before, after)
	for i, d := range diff {
		if i == 20 && fx.gap == "" {
			fx.escape(t, "host changed: %d more differences", len(diff)-i)
			break
		}
		fx.escape(t, "host changed: %s", d)
	}
	fx.before = after
}

// ownCalls takes into the baseline what session b's own calls changed of
// its jail. Under Landlock credentials are symlinks placed in the calling
// session's jail for each call and removed after it, so b's jail changes
// whenever b runs a call; under the project view b's writes to the
// project land in its layer, in its jail. The rest of the host is still
// compared with the baseline. What another session did to b's jail must
// be checked before (checkHost). bubblewrap without the view binds
// credentials and leaves the jail as it was: nothing is taken in.
func (fx *escapeFixture) ownCalls(t *testing.T) {
	t.Helper()
	if fx.landlock() || fx.view {
		fx.rebase(t, fx.jails["b"])
	}
}

// rebase takes jail's present state into the baseline.
func (fx *escapeFixture) rebase(t *testing.T, jail string) {
	t.Helper()
	// The first walk sets the access times b's calls left to update.
	fx.snapshot(t)
	now := fx.snapshot(t)
	for p := range fx.before {
		if testkit.Within(p, jail) {
			delete(fx.before, p)
		}
	}
	for p, st := range now {
		if testkit.Within(p, jail) {
			fx.before[p] = st
		}
	}
}

// vars are the variables every attack gets: where the host targets are.
func (fx *escapeFixture) vars(ts *testkit.Server) map[string]any {
	other := fx.jails["b"]
	if ts == fx.b {
		other = fx.jails["a"]
	}
	return map[string]any{
		"VICTIM":   fx.victim,
		"VFILE":    filepath.Join(fx.victim, "file"),
		"KEEP":     filepath.Join(fx.project, "keep.txt"),
		"PROJECT":  fx.project,
		"HOSTHOME": fx.home,
		"OTHER":    other,
		"MARKER":   fx.marker,
		"PY":       fx.py,
	}
}

// attackPrelude runs before every attack script. try runs one attempt and
// prints an ESCAPED line when it succeeds; targets lists the host paths
// most attempts aim at, those the jail sees (bubblewrap shows no other
// session's jail: a touch -c of what is not there succeeds on nothing).
const attackPrelude = `try() { if "$@" >/dev/null 2>&1 </dev/null; then echo "ESCAPED: $*"; fi; }
targets() { for f in "$VFILE" "$VICTIM" "$VICTIM/sub" "$KEEP" "$PROJECT" "$PROJECT/.agent-home" "$OTHER" "$HOSTHOME" "$HOSTHOME/.gitconfig"; do if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\n' "$f"; fi; done; }
`

// py embeds a Python attack in an attack script; it must run to its end.
func py(code string) string {
	return "\"$PY\" - <<'PYEOF'\n" + pyPrelude + code + "\nprint(\"" + pyDone + "\", flush=True)\nPYEOF\n"
}

// pyPrelude starts every Python attack: escaped prints the line the suite
// fails on, attempt calls f and reports it when it does not raise OSError.
const pyPrelude = `import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
E = os.environ
HOME = E["HOME"]
TARGETS = [E["VFILE"], E["VICTIM"], E["VICTIM"] + "/sub", E["KEEP"], E["PROJECT"], E["PROJECT"] + "/.agent-home", E["OTHER"], E["HOSTHOME"], E["HOSTHOME"] + "/.gitconfig"]
def escaped(what):
    print("ESCAPED:", what, flush=True)
def attempt(what, f, *a, **kw):
    try:
        f(*a, **kw)
    except (OSError, ValueError):
        return
    escaped(what)
def reach_unix(addr, what):
    import socket
    for kind in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET, socket.SOCK_DGRAM):
        try:
            # The jail denies unix sockets outright (seccomp): EACCES here
            # is the attack failing.
            s = socket.socket(socket.AF_UNIX, kind)
        except PermissionError:
            continue
        s.settimeout(2)
        try:
            if kind == socket.SOCK_DGRAM:
                s.sendto(b"x", addr)
            else:
                s.connect(addr)
            escaped("%s (type %d)" % (what, kind))
        except OSError:
            pass
        s.close()
`

const pyDone = "python-attack-finished"

// attack runs script in ts's jail and fails the test for every ESCAPED
// line, and when the script did not run to its end.
func (fx *escapeFixture) attack(t *testing.T, ts *testkit.Server, script string, extra map[string]any) tools.ExecResult {
	t.Helper()
	env := fx.vars(ts)
	// The server's longest timeout (--max-timeout, 10 minutes by default):
	// an attack ends by its own end or a bound, never by a clock a busy
	// machine can beat (60 s once ended fds and ca-key under .ci/stress).
	args := map[string]any{"command": attackPrelude + script + "\necho attack-finished\n", "timeout_ms": 600000}
	for k, v := range extra {
		if k == "env" {
			for ek, ev := range v.(map[string]any) {
				env[ek] = ev
			}
			continue
		}
		args[k] = v
	}
	args["env"] = env
	res, raw := ts.Exec(args)
	if raw.StructuredContent == nil || !res.Confined {
		t.Fatalf("attack did not run confined: %q", testkit.ResultText(raw))
	}
	inView := 0
	for _, line := range strings.Split(res.Stdout, "\n") {
		switch {
		case !strings.HasPrefix(line, "ESCAPED"):
		case fx.view && fx.inView(line, res.Jail):
			inView++
		default:
			fx.escape(t, "escape: %s", line)
		}
	}
	if inView > 0 {
		t.Logf("%d writes through the project view went to the session's layer (the host is checked after the vector)", inView)
	}
	if !strings.HasSuffix(res.Stdout, "attack-finished\n") || strings.Count(res.Stdout, pyDone) != strings.Count(script, pyDone) {
		t.Errorf("attack did not run to its end (exit %d, signal %q, limit %q)\nstdout: %s\nstderr: %s",
			res.ExitCode, res.Signal, res.Limit, testkit.Tail(res.Stdout), testkit.Tail(res.Stderr))
	}
	return res
}

// startServerWithTTY is startServer with the server in a new session whose
// controlling terminal is a pseudo-terminal, its stderr; it returns the
// terminal's slave side.
func startServerWithTTY(t *testing.T, project string, env []string, args ...string) (*testkit.Server, *os.File) {
	t.Helper()
	master, slave := testkit.OpenPTY(t)
	ts := testkit.StartServerCmd(t, project, env, func(cmd *exec.Cmd) {
		cmd.Stderr = slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 2}
	}, args...)
	go io.Copy(ts.Stderr, master)
	return ts, slave
}

// callExec is ts.exec for goroutines: it reports instead of failing.
func callExec(ctx context.Context, ts *testkit.Server, args map[string]any) (tools.ExecResult, *mcp.CallToolResult, error) {
	var out tools.ExecResult
	res, err := ts.Call(ctx, "jailed_exec", args)
	if err != nil {
		return out, nil, err
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return out, res, err
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return out, res, err
		}
	}
	return out, res, nil
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// hostListener is a host daemon's unix socket that counts who reaches it.
type hostListener struct {
	addr string
	hits atomic.Int64
}

func listenUnix(t *testing.T, network, addr string) *hostListener {
	t.Helper()
	l := &hostListener{addr: addr}
	if network == "unixgram" {
		c, err := net.ListenUnixgram(network, &net.UnixAddr{Name: addr, Net: network})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		go func() {
			buf := make([]byte, 1024)
			for {
				if _, _, err := c.ReadFrom(buf); err != nil {
					return
				}
				l.hits.Add(1)
			}
		}()
		return l
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.hits.Add(1)
			c.Close()
		}
	}()
	return l
}

// listenInNetns is listenUnix from a process in a network namespace of its
// own, as a container's daemon is.
func listenInNetns(t *testing.T, py, addr string) *hostListener {
	t.Helper()
	l := &hostListener{addr: addr}
	cmd := exec.Command("unshare", "--user", "--map-root-user", "--net", py, "-c", `import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(16)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    print("connection", flush=True)
    c.close()
`, addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testkit.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a daemon in a network namespace: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case line := <-lines:
		if line != "listening" {
			t.Fatalf("daemon in a network namespace: %q %s", line, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("daemon in a network namespace did not start: %s", stderr.String())
	}
	go func() {
		for range lines {
			l.hits.Add(1)
		}
	}()
	return l
}

// mustAccept proves the socket is reachable from the host, then forgets it.
func (l *hostListener) mustAccept(t *testing.T) {
	t.Helper()
	network := "unix"
	c, err := net.Dial(network, l.addr)
	if err != nil {
		network = "unixgram"
		c, err = net.Dial(network, l.addr)
	}
	if err != nil {
		t.Fatalf("the host cannot reach its own socket %s: %v", l.addr, err)
	}
	if network == "unixgram" {
		c.Write([]byte("host"))
	}
	c.Close()
	if !testkit.WaitFor(2*time.Second, func() bool { return l.hits.Load() > 0 }) {
		t.Fatalf("the host socket %s did not see the host", l.addr)
	}
	l.hits.Store(0)
}

func (l *hostListener) mustBeUntouched(t *testing.T, escape escapeFunc) {
	t.Helper()
	testkit.WaitFor(200*time.Millisecond, func() bool { return l.hits.Load() > 0 })
	if n := l.hits.Load(); n > 0 {
		escape(t, "the host socket %s was reached %d times from the jail", l.addr, n)
	}
}

// sysvIDs are SysV IPC objects of the host.
type sysvIDs struct{ shm, msg, sem int }

func hostSysV(t *testing.T) sysvIDs {
	t.Helper()
	var ids sysvIDs
	var err error
	if ids.shm, err = unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600); err != nil {
		t.Fatalf("shmget: %v", err)
	}
	t.Cleanup(func() { unix.SysvShmCtl(ids.shm, unix.IPC_RMID, nil) })
	id, _, errno := unix.Syscall(unix.SYS_MSGGET, unix.IPC_PRIVATE, unix.IPC_CREAT|0o600, 0)
	if errno != 0 {
		t.Fatalf("msgget: %v", errno)
	}
	ids.msg = int(id)
	t.Cleanup(func() { unix.Syscall(unix.SYS_MSGCTL, uintptr(ids.msg), unix.IPC_RMID, 0) })
	id, _, errno = unix.Syscall(unix.SYS_SEMGET, unix.IPC_PRIVATE, 1, unix.IPC_CREAT|0o600)
	if errno != 0 {
		t.Fatalf("semget: %v", errno)
	}
	ids.sem = int(id)
	t.Cleanup(func() { unix.Syscall6(unix.SYS_SEMCTL, uintptr(ids.sem), 0, unix.IPC_RMID, 0, 0, 0) })
	return ids
}

// check: every object still exists, unattached, empty and at zero.
func (ids sysvIDs) check(t *testing.T, escape escapeFunc) {
	t.Helper()
	for _, c := range []struct {
		file, idCol, valCol string
		id                  int
	}{
		{"shm", "shmid", "nattch", ids.shm},
		{"msg", "msqid", "qnum", ids.msg},
	} {
		row, ok := sysvipcRow(t, c.file, c.idCol, c.id)
		if !ok {
			escape(t, "the host's %s %d is gone", c.file, c.id)
		} else if row[c.valCol] != "0" {
			escape(t, "the host's %s %d has %s %s", c.file, c.id, c.valCol, row[c.valCol])
		}
	}
	const getval = 12
	v, _, errno := unix.Syscall6(unix.SYS_SEMCTL, uintptr(ids.sem), 0, getval, 0, 0, 0)
	if errno != 0 || v != 0 {
		escape(t, "the host's semaphore %d: value %d, %v", ids.sem, v, errno)
	}
}

func sysvipcRow(t *testing.T, file, idCol string, id int) (map[string]string, bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/sysvipc/" + file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	header := strings.Fields(lines[0])
	for _, line := range lines[1:] {
		row := map[string]string{}
		for i, f := range strings.Fields(line) {
			if i < len(header) {
				row[header[i]] = f
			}
		}
		if row[idCol] == strconv.Itoa(id) {
			return row, true
		}
	}
	return nil, false
}

// hostQueue is a POSIX message queue of the host.
type hostQueue struct {
	name string
	fd   int
}

func hostMQueue(t *testing.T, name string) hostQueue {
	t.Helper()
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		t.Fatal(err)
	}
	fd, _, errno := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(p)), unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o600, 0, 0, 0)
	if errno != 0 {
		t.Fatalf("mq_open: %v", errno)
	}
	t.Cleanup(func() {
		unix.Close(int(fd))
		unix.Syscall(unix.SYS_MQ_UNLINK, uintptr(unsafe.Pointer(p)), 0, 0)
	})
	return hostQueue{name: name, fd: int(fd)}
}

// check: the queue still exists under its name and holds no message.
func (q hostQueue) check(t *testing.T, escape escapeFunc) {
	t.Helper()
	var attr [8]int64 // mq_flags, mq_maxmsg, mq_msgsize, mq_curmsgs, reserved
	if _, _, errno := unix.Syscall(unix.SYS_MQ_GETSETATTR, uintptr(q.fd), 0, uintptr(unsafe.Pointer(&attr))); errno != 0 {
		t.Fatalf("mq_getattr: %v", errno)
	}
	if attr[3] != 0 {
		escape(t, "the host's message queue holds %d messages", attr[3])
	}
	p, _ := unix.BytePtrFromString(q.name)
	fd, _, errno := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(p)), unix.O_RDONLY, 0, 0, 0, 0)
	if errno != 0 {
		escape(t, "the host's message queue is gone: %v", errno)
		return
	}
	unix.Close(int(fd))
}

// hostSleep is a host process the jail must not reach.
type hostSleep struct {
	pid  int
	done chan struct{}
}

func startHostSleep(t *testing.T, arg string) hostSleep {
	t.Helper()
	cmd := exec.Command("sleep", arg)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := hostSleep{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-s.done })
	return s
}

func (s hostSleep) mustLive(t *testing.T, escape escapeFunc) {
	t.Helper()
	select {
	case <-s.done:
		escape(t, "the host process %d was killed", s.pid)
		return
	case <-time.After(100 * time.Millisecond):
	}
	if state := testkit.ProcStatField(t, s.pid, 0); state != "S" && state != "R" {
		escape(t, "the host process %d is in state %s", s.pid, state)
	}
}

func mountPoints(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			out = append(out, f[4])
		}
	}
	slices.Sort(out)
	return out
}

func (fx *escapeFixture) snapshot(t *testing.T) map[string]testkit.Node {
	t.Helper()
	snap := testkit.Snapshot(fx.roots, fx.opaque, fx.globs...)
	// Another run of this suite on the machine (.ci/run beside .ci/stress)
	// makes and removes its own markers in /dev/shm: not this run's host.
	for p := range snap {
		if name, ok := strings.CutPrefix(p, "/dev/shm/jail-mcp-escape-"); ok && !strings.HasPrefix("jail-mcp-escape-"+name, fx.marker+"-") {
			delete(snap, p)
		}
	}
	// whose entries change its times: what changed in it is seen entry
	// by entry.
	if n, ok := snap["/dev/shm"]; ok {
		n.Atime, n.Mtime, n.Ctime, n.Size, n.Nlink = 0, 0, 0, 0, 0
		snap["/dev/shm"] = n
	}
	fx.viewWork(snap)
	return snap
}

// viewWork leaves out of snap the kernel's work directories of the
// jails' project views (<jail>/.overlay/work/*, and caches/*/work-* of
// the caches' layers), which each jail's own session agent makes, uses
// and removes as its views come and go, and the times of the
// directories that hold them. What is in a layer (upper/) stays in.
func (fx *escapeFixture) viewWork(snap map[string]testkit.Node) {
	for p, n := range snap {
		for _, jail := range fx.jails {
			rel, ok := strings.CutPrefix(p, jail+"/.overlay/")
			if !ok {
				continue
			}
			parts := strings.Split(rel, "/")
			switch {
			case parts[0] == "work" && len(parts) > 1,
				parts[0] == "caches" && len(parts) > 2 && strings.HasPrefix(parts[2], "work-"):
				delete(snap, p)
			case rel == "work", parts[0] == "caches" && len(parts) == 2:
				n.Atime, n.Mtime, n.Ctime, n.Size, n.Nlink = 0, 0, 0, 0, 0
				snap[p] = n
			}
		}
	}
}

// restore puts back the modes and owners states had, where a known gap of
// the backend let an attack change them: the vectors after it then find
// the host they expect. Parents come before their children; jails whose
// contents are not snapshotted and paths that were missing are left.
func (fx *escapeFixture) restore(states map[string]testkit.Node) {
	paths := slices.Sorted(maps.Keys(states))
	for _, p := range paths {
		want := states[p]
		if want == (testkit.Node{}) || fx.opaque[p] || uint32(want.Mode)&unix.S_IFMT == unix.S_IFLNK {
			continue
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			continue
		}
		if st.Uid != want.UID || st.Gid != want.GID {
			unix.Lchown(p, int(want.UID), int(want.GID))
		}
		if st.Mode&0o7777 != uint32(want.Mode)&0o7777 || st.Uid != want.UID || st.Gid != want.GID {
			unix.Chmod(p, uint32(want.Mode)&0o7777)
		}
	}
}
