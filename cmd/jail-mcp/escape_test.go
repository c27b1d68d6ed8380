//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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
// The attacks assume nothing about the uid they run as: the same suite runs
// as root (CI) and as a normal user.
func TestEscape(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b testBackend) {
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
	top     *testing.T  // TestEscape/<backend>
	backend testBackend // every server of the suite runs on it
	marker  string      // in the name of every host object an attack aims at
	project string      // holds the jails of sessions a, b and d
	home    string      // the servers' HOME, with fake credentials, --auth all
	victim  string      // a directory outside the project
	py      string
	a       *testServer // the attacker, with a controlling terminal
	b       *testServer // another session of the same project
	d       *testServer // the one tricked into acting as a deputy
	tty     *os.File    // a's controlling terminal, slave side
	jails   map[string]string
	fifos   []hostFIFO // host FIFOs, each the target of a vector

	hostSock, projSock, abstract *hostListener

	roots  []string        // trees snapshotted whole
	opaque map[string]bool // jails whose contents change by design
	globs  []string        // host paths named with the marker
	before map[string]nodeState

	gap        string   // the running vector's knownGaps key, if it is one of this backend
	escapes    []string // what got out in a known gap
	unexpected int      // escapes reported as failures, by every vector so far
}

func newEscapeFixture(t *testing.T, b testBackend) *escapeFixture {
	fx := &escapeFixture{
		top:     t,
		backend: b,
		marker:  fmt.Sprintf("jail-mcp-escape-%d", os.Getpid()),
		project: newProject(t),
		home:    hostDir(t),
		victim:  hostDir(t),
		py:      python3(t),
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
	fx.jails = map[string]string{}
	for _, s := range []string{"a", "b", "d"} {
		fx.jails[s] = filepath.Join(fx.project, ".agent-home", s)
	}
	for ts, script := range map[*testServer]string{
		fx.a: `echo a-secret > "$HOME/a-secret"`,
		fx.b: `echo b-secret > "$HOME/b-secret"`,
		fx.d: `true`,
	} {
		if res, raw := ts.exec(map[string]any{"command": script}); res.ExitCode != 0 || !res.Confined {
			t.Fatalf("set-up call: %+v %q", res, text(raw))
		}
	}

	// Host daemons, bound after the servers started: masking is per call.
	fx.hostSock = listenUnix(t, "unix", filepath.Join(hostDir(t), "agent.sock"))
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
	// The first walk sets the access times that reading files and listing
	// directories update once; the baseline is the second.
	fx.snapshot(t)
	fx.before = fx.snapshot(t)
	return fx
}

// start starts a server of the suite on its backend.
func (fx *escapeFixture) start(t *testing.T, project string, env []string, args ...string) *testServer {
	t.Helper()
	return fx.backend.start(t, project, env, args...)
}

// startWithTTY is start with a controlling terminal (startServerWithTTY).
func (fx *escapeFixture) startWithTTY(t *testing.T, project string, env []string, args ...string) (*testServer, *os.File) {
	t.Helper()
	b := fx.backend
	ts, tty := startServerWithTTY(t, project, append(slices.Clone(env), b.env...), append(slices.Clone(b.args), args...)...)
	if got := ts.status().Backend; got != b.name {
		t.Fatalf("server runs backend %q, want %q", got, b.name)
	}
	return ts, tty
}

// landlock tells whether the suite runs on the Landlock backend: no mount,
// pid or IPC namespace, so what the host has is visible (reads are not a
// promise) and only acts on it must fail; credentials are symlinks placed
// in the calling session's jail for each call.
func (fx *escapeFixture) landlock() bool { return fx.backend.name == "landlock" }

// env is the servers' environment: the test's, with HOME the fake one.
func (fx *escapeFixture) env(extra ...string) []string {
	env := slices.DeleteFunc(serverEnv(), func(kv string) bool { return strings.HasPrefix(kv, "HOME=") })
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
		key := fx.backend.name + "/" + strings.TrimPrefix(t.Name(), fx.top.Name()+"/")
		fx.gap, fx.escapes = "", nil
		if when, ok := knownGaps[key]; ok && when() {
			fx.gap = key
		}
		defer func() { fx.gap, fx.escapes = "", nil }()
		base := fx.before
		attack(t)
		fx.checkHost(t)
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
	diff := diffSnapshots(fx.before, after)
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
// whenever b runs a call; the rest of the host is still compared with the
// baseline. What another session did to b's jail must be checked before
// (checkHost). bubblewrap binds credentials and leaves the jail as it was:
// nothing is taken in.
func (fx *escapeFixture) ownCalls(t *testing.T) {
	t.Helper()
	if !fx.landlock() {
		return
	}
	// The first walk sets the access times b's calls left to update.
	fx.snapshot(t)
	jail, now := fx.jails["b"], fx.snapshot(t)
	for p := range fx.before {
		if within(p, jail) {
			delete(fx.before, p)
		}
	}
	for p, st := range now {
		if within(p, jail) {
			fx.before[p] = st
		}
	}
}

// vars are the variables every attack gets: where the host targets are.
func (fx *escapeFixture) vars(ts *testServer) map[string]any {
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
// most attempts aim at.
const attackPrelude = `try() { if "$@" >/dev/null 2>&1 </dev/null; then echo "ESCAPED: $*"; fi; }
targets() { printf '%s\n' "$VFILE" "$VICTIM" "$VICTIM/sub" "$KEEP" "$PROJECT" "$PROJECT/.agent-home" "$OTHER" "$HOSTHOME" "$HOSTHOME/.gitconfig"; }
`

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

// py embeds a Python attack in an attack script; it must run to its end.
func py(code string) string {
	return "\"$PY\" - <<'PYEOF'\n" + pyPrelude + code + "\nprint(\"" + pyDone + "\", flush=True)\nPYEOF\n"
}

// attack runs script in ts's jail and fails the test for every ESCAPED
// line, and when the script did not run to its end.
func (fx *escapeFixture) attack(t *testing.T, ts *testServer, script string, extra map[string]any) tools.ExecResult {
	t.Helper()
	env := fx.vars(ts)
	args := map[string]any{"command": attackPrelude + script + "\necho attack-finished\n", "timeout_ms": 60000}
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
	res, raw := ts.exec(args)
	if raw.StructuredContent == nil || !res.Confined {
		t.Fatalf("attack did not run confined: %q", text(raw))
	}
	for _, line := range strings.Split(res.Stdout, "\n") {
		if strings.HasPrefix(line, "ESCAPED") {
			fx.escape(t, "escape: %s", line)
		}
	}
	if !strings.HasSuffix(res.Stdout, "attack-finished\n") || strings.Count(res.Stdout, pyDone) != strings.Count(script, pyDone) {
		t.Errorf("attack did not run to its end (exit %d, signal %q, limit %q)\nstdout: %s\nstderr: %s",
			res.ExitCode, res.Signal, res.Limit, tail(res.Stdout), tail(res.Stderr))
	}
	return res
}

func tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}

// Promise 1: no write to the host outside the session's jail.
func (fx *escapeFixture) noHostWrite(t *testing.T) {
	for _, v := range []struct{ name, script string }{
		{"plain-write", `
for f in "$VFILE" "$VICTIM/new-$MARKER" "$KEEP" "$PROJECT/new-$MARKER" "$PROJECT/src/main.c" \
	"/etc/$MARKER" "/$MARKER" "/usr/local/$MARKER" "$HOSTHOME/$MARKER" "$HOSTHOME/.bashrc" \
	"$PROJECT/.agent-home/$MARKER" "$PROJECT/.agent-home/.gitignore"; do
	try sh -c 'echo x > "$1"' sh "$f"
	try sh -c 'echo x >> "$1"' sh "$f"
	try cp "$KEEP" "$f"
done
for d in "$VICTIM" "$PROJECT" "$HOSTHOME" /etc; do
	try mkdir "$d/dir-$MARKER"
	try mkfifo "$d/fifo-$MARKER"
	try ln -s / "$d/link-$MARKER"
done
try rm "$VFILE"
try rm -r "$VICTIM/sub"
try rmdir "$VICTIM/emptydir"
try rm "$KEEP"
` + py(`
for p in TARGETS + [E["VICTIM"] + "/new-" + E["MARKER"], E["PROJECT"] + "/new-" + E["MARKER"]]:
    attempt("open for writing " + p, os.open, p, os.O_WRONLY | os.O_CREAT, 0o644)
    attempt("open a directory for writing " + p, os.open, p, os.O_RDWR | os.O_DIRECTORY)
    attempt("O_TMPFILE in " + p, os.open, p, os.O_WRONLY | getattr(os, "O_TMPFILE", 0o20200000), 0o600)
`)},
		{"rename-out", `
echo evil > "$HOME/evil"; mkdir -p "$HOME/evildir"
for dst in "$VFILE" "$KEEP" "$VICTIM/new-$MARKER" "$PROJECT/new-$MARKER" "$OTHER/b-secret" "$HOSTHOME/.gitconfig"; do
	try mv -f "$HOME/evil" "$dst"
done
try mv -T "$HOME/evildir" "$VICTIM/sub"
try mv -T "$HOME/evildir" "$VICTIM/emptydir"
` + py(`
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
AT_FDCWD, RENAME_NOREPLACE, RENAME_EXCHANGE = -100, 1, 2
src = HOME + "/evil"
for dst in TARGETS + [E["VICTIM"] + "/new-" + E["MARKER"]]:
    attempt("rename over " + dst, os.rename, src, dst)
    attempt("replace " + dst, os.replace, src, dst)
    if libc.renameat2(AT_FDCWD, src.encode(), AT_FDCWD, dst.encode(), RENAME_EXCHANGE) == 0:
        escaped("renameat2 RENAME_EXCHANGE with " + dst)
    if libc.renameat2(AT_FDCWD, src.encode(), AT_FDCWD, (dst + "-" + E["MARKER"]).encode(), RENAME_NOREPLACE) == 0:
        escaped("renameat2 next to " + dst)
`)},
		{"rename-in", `
for src in "$VFILE" "$KEEP" "$VICTIM/sub" "$OTHER/b-secret" "$HOSTHOME/.gitconfig" "$HOSTHOME/.config/gh"; do
	try mv "$src" "$HOME/stolen"
	rm -rf "$HOME/stolen"
done
` + py(`
for src in TARGETS + [E["OTHER"] + "/b-secret", E["HOSTHOME"] + "/.config/gh"]:
    attempt("rename " + src + " into the jail", os.rename, src, HOME + "/stolen")
`)},
		{"hardlink", `
for src in "$VFILE" "$KEEP" "$VICTIM/big" "$OTHER/b-secret" "$HOSTHOME/.gitconfig"; do
	try sh -c 'ln "$1" "$2" && echo x >> "$2"' sh "$src" "$HOME/hardlink"
	try ln "$src" "$HOME/hardlink2"
	rm -f "$HOME/hardlink" "$HOME/hardlink2"
done
` + py(`
for src in TARGETS + [E["VICTIM"] + "/big", E["OTHER"] + "/b-secret"]:
    dst = HOME + "/hardlink3"
    try:
        fd = os.open(src, os.O_RDONLY)
    except OSError:
        continue
    # linkat(AT_SYMLINK_FOLLOW) through the descriptor's magic link
    attempt("link " + src + " through /proc/self/fd", os.link, "/proc/self/fd/%d" % fd, dst)
    os.close(fd)
    try:
        os.unlink(dst)
    except OSError:
        pass
`)},
		{"symlink", `
ln -sfn "$VFILE" "$HOME/to-file"; ln -sfn "$VICTIM" "$HOME/to-dir"; ln -sfn "$KEEP" "$HOME/to-keep"
ln -sfn / "$HOME/to-root"; ln -sfn "$OTHER" "$HOME/to-other"
try sh -c 'echo x > "$HOME/to-file"'
try sh -c 'echo x >> "$HOME/to-keep"'
try sh -c 'echo x > "$HOME/to-dir/new-$MARKER"'
try sh -c 'echo x > "$HOME/to-root$VFILE"'
try sh -c 'echo x > "$HOME/to-other/b-secret"'
try cp "$KEEP" "$HOME/to-file"
try truncate -s 0 "$HOME/to-file"
try mkdir "$HOME/to-dir/dir-$MARKER"
try mv "$HOME/to-dir/file" "$HOME/stolen"
` + py(`
attempt("open through a symlink", os.open, HOME + "/to-file", os.O_WRONLY)
`)},
		{"truncate", `
targets | while read -r f; do
	try truncate -s 0 "$f"
	try truncate -s 1M "$f"
	try sh -c ': > "$1"' sh "$f"
done
try truncate -s 0 "$VICTIM/big"
` + py(`
for p in TARGETS + [E["VICTIM"] + "/big"]:
    attempt("truncate " + p, os.truncate, p, 0)
    try:
        fd = os.open(p, os.O_RDONLY)
    except OSError:
        continue
    attempt("ftruncate a read-only descriptor of " + p, os.ftruncate, fd, 0)
    os.close(fd)
`)},
		{"chmod", metadataThrough(`
try chmod 777 "$HOME/to-file"
try chmod 777 "$HOME/to-dir"
`, `
	try chmod 777 "$p$VFILE"
`, `
	try chmod 777 "$f"
`, `
	try chmod 777 "$d"
`) + `
targets | while read -r f; do
	try chmod 777 "$f"
	try chmod 000 "$f"
	try chmod u+s "$f"
	try chmod +t "$f"
done
` + py(`
for p in TARGETS:
    try:
        mode = os.lstat(p).st_mode & 0o7777
    except OSError:
        continue
    # the same mode: harmless should it ever get through
    attempt("chmod " + p, os.chmod, p, mode)
attempt("fchmod a read-only descriptor", os.fchmod, 7, 0o777)
`) + "exec 7<&-\n"},
		{"chown", metadataThrough("", "", "", "") + `
targets | while read -r f; do
	try chown "$(id -u):$(id -g)" "$f"
	try chown 65534:65534 "$f"
	try chgrp "$(id -g)" "$f"
	try chown -h "$(id -u)" "$f"
done
` + py(`
for p in TARGETS:
    try:
        st = os.lstat(p)
    except OSError:
        continue
    attempt("chown " + p + " to its own owner", os.chown, p, st.st_uid, st.st_gid)
    attempt("lchown " + p, os.lchown, p, -1, -1)
attempt("fchown a read-only descriptor", os.fchown, 7, -1, -1)
`) + "exec 7<&-\n"},
		{"utime", metadataThrough(`
try touch -d 2000-01-01 "$HOME/to-file"
`, `
	try touch -c -d 2000-01-01 "$p$VFILE"
`, `
	try touch -c -d 2000-01-01 "$f"
`, "") + `
targets | while read -r f; do
	try touch -c "$f"
	try touch -c -d 2000-01-01 "$f"
	try touch -c -a -d 2000-01-01 "$f"
	try touch -c -m -d 2000-01-01 "$f"
	try touch -c -h -d 2000-01-01 "$f"
done
` + py(`
for p in TARGETS:
    attempt("utime " + p, os.utime, p, (0, 0))
    attempt("utime now " + p, os.utime, p)
    attempt("utime without following " + p, os.utime, p, (0, 0), follow_symlinks=False)
attempt("utime through a symlink", os.utime, HOME + "/to-file", (0, 0))
attempt("futimes a read-only descriptor", os.utime, 7, (0, 0))
`) + "exec 7<&-\n"},
		{"xattr", py(`
for p in TARGETS:
    for name in ("user.jail_mcp", "trusted.jail_mcp", "security.jail_mcp"):
        attempt("setxattr %s on %s" % (name, p), os.setxattr, p, name, b"1")
    attempt("removexattr on " + p, os.removexattr, p, "user.jail_mcp")
`)},
		{"proc-self-root", `
for p in /proc/self/root /proc/thread-self/root "/proc/$$/root"; do
	try sh -c 'echo x > "$1$2"' sh "$p" "$VFILE"
	try sh -c 'echo x > "$1$2/new-$MARKER"' sh "$p" "$PROJECT"
	try sh -c 'echo x > "$1$2/new-$MARKER"' sh "$p" "$HOSTHOME"
	try sh -c 'echo x > "$1$2/b-secret"' sh "$p" "$OTHER"
	try mkdir "$p$VICTIM/dir-$MARKER"
done
`},
		{"proc-1-root", `
for p in /proc/[0-9]*; do
	try sh -c 'echo x > "$1/root$2"' sh "$p" "$VFILE"
	try sh -c 'echo x > "$1/root$2/new-$MARKER"' sh "$p" "$VICTIM"
	try sh -c 'echo x > "$1/root$2/new-$MARKER"' sh "$p" "$PROJECT"
	try sh -c 'echo x > "$1/root/$2"' sh "$p" "$MARKER"
done
`},
		{"proc-self-cwd", `
cd "$PROJECT"
try sh -c 'echo x > /proc/self/cwd/keep.txt'
try sh -c 'echo x > "/proc/self/cwd/new-$MARKER"'
try sh -c 'echo x > "/proc/$PPID/cwd/new-$MARKER"'
cd "$VICTIM"
try sh -c 'echo x > /proc/self/cwd/file'
try sh -c 'echo x > "/proc/self/cwd/new-$MARKER"'
try sh -c 'echo x > "/proc/$PPID/cwd/new-$MARKER"'
cd "$HOSTHOME"
try sh -c 'echo x > /proc/self/cwd/.gitconfig'
cd "$HOME"
`},
		{"proc-self-fd", `
exec 7<"$VFILE" 8<"$VICTIM" 9<"$KEEP"
try sh -c 'echo x > /proc/self/fd/7'
try sh -c 'echo x >> /proc/self/fd/9'
try sh -c 'echo x > "/proc/self/fd/8/new-$MARKER"'
try sh -c 'echo x > "/dev/fd/8/new-$MARKER"'
` + py(`
attempt("reopen a read-only descriptor for writing", os.open, "/proc/self/fd/7", os.O_WRONLY)
attempt("create through a directory descriptor", os.open, "new-" + E["MARKER"], os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=8)
attempt("mkdir through a directory descriptor", os.mkdir, "dir-" + E["MARKER"], dir_fd=8)
`) + `exec 7<&- 8<&- 9<&-
`},
		{"dev", `
try mknod "$HOME/null-$MARKER" c 1 3
try mknod "$HOME/disk-$MARKER" b 8 0
try mknod "/dev/$MARKER" c 1 3
# the private /dev may take a file; the host's must not see it
echo private > "/dev/$MARKER-file" 2>/dev/null
` + py(`
for d in ("/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg", "/dev/sda", "/dev/vda", "/dev/nvme0n1",
          "/dev/xvda", "/dev/loop0", "/dev/console", "/dev/tty0", "/dev/tty1", "/dev/fuse",
          "/dev/net/tun", "/dev/kvm", "/dev/vsock", "/dev/vhost-vsock", "/dev/cpu/0/msr"):
    attempt("open %s for writing" % d, os.open, d, os.O_WRONLY | os.O_NONBLOCK)
`)},
		{"tmp", `
for d in /tmp /var/tmp /run /run/lock /var/lock /dev/mqueue "/run/user/$(id -u)"; do
	try sh -c 'echo x > "$1/$2"' sh "$d" "$MARKER"
	try mkdir "$d/$MARKER-dir"
	try mkfifo "$d/$MARKER-fifo"
done
# the private /dev/shm takes these; the host's must not see them
echo private > "/dev/shm/$MARKER-private" 2>/dev/null
` + py(`
try:
    fd = os.open("/dev/shm/" + E["MARKER"] + "-shm", os.O_RDWR | os.O_CREAT, 0o600)
    os.ftruncate(fd, 4096)
    os.write(fd, b"shm")
except OSError:
    pass
`)},
	} {
		fx.vector(t, v.name, func(t *testing.T) {
			if other := onOtherSession[v.name]; other != "" {
				fx.bothWays(t, other)
			}
			fx.attack(t, fx.a, v.script, nil)
		})
	}

	fx.vector(t, "remount", func(t *testing.T) {
		before := mountPoints(t)
		fx.attack(t, fx.a, `
try mount -o remount,rw /
try mount -o remount,rw "$PROJECT"
try mount -o remount,bind,rw "$PROJECT"
try mount -o remount,rw "$HOSTHOME/.gitconfig"
try mount -t tmpfs none "$VICTIM"
try mount -t tmpfs none "$PROJECT"
try mount -t tmpfs none "$HOSTHOME"
try mount -t tmpfs none /mnt
try mount --bind "$HOME" "$VICTIM"
try mount --bind "$HOME" "$PROJECT"
try umount "$HOME/.gitconfig"
try sh -c 'echo x > "$VFILE"'
`+py(`
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
MS_RDONLY, MS_REMOUNT, MS_BIND = 1, 32, 4096
for target, fstype, flags in ((b"/", None, MS_REMOUNT), (E["PROJECT"].encode(), None, MS_REMOUNT | MS_BIND),
                              (E["VICTIM"].encode(), b"tmpfs", 0), (E["PROJECT"].encode(), b"tmpfs", 0)):
    if libc.mount(b"none", target, fstype, flags, None) == 0:
        escaped("mount(2) on " + target.decode())
`), nil)
		if after := mountPoints(t); !slices.Equal(before, after) {
			fx.escape(t, "host mounts changed:\nbefore %v\nafter  %v", before, after)
		}
	})

	fx.vector(t, "credential", func(t *testing.T) {
		res := fx.attack(t, fx.a, `
cat "$HOME/.gitconfig" "$HOME/.config/gh/hosts.yml" "$HOME/.codex/auth.json"; echo
for f in `+credentialFiles+`; do
	try sh -c 'echo x >> "$1"' sh "$f"
	try truncate -s 0 "$f"
done
for d in `+credentialDirs+`; do
	try sh -c 'echo x > "$1/new-$MARKER"' sh "$d"
	try ln -s /etc/passwd "$d/link-$MARKER"
done
for f in "$HOSTHOME/.gitconfig" "$HOSTHOME/.config/gh" "$HOSTHOME/.codex/auth.json" "$HOSTHOME/.claude.json"; do
	try mv "$f" "$f.moved"
	try rm -r "$f"
done
# mount points of the jail: the kernel refuses, and the host is not them
rm -f "$HOME/.gitconfig" 2>/dev/null; rm -rf "$HOME/.config/gh" 2>/dev/null; umount "$HOME/.gitconfig" 2>/dev/null
# the writable state copies take writes, privately
echo private >> "$HOME/.codex/config.toml"; echo private >> "$HOME/.claude.json"
`, nil)
		for _, want := range []string{"host-user", "gho_fake_host_token", "codex-fake-secret"} {
			if !strings.Contains(res.Stdout, want) {
				t.Errorf("credential %q not exposed read-only: the attack proves nothing\n%s", want, res.Stdout)
			}
		}
	})

	fx.vector(t, "other-session", func(t *testing.T) {
		fx.bothWays(t, `
for f in `+otherSessionFiles+`; do
	try sh -c 'echo x > "$1"' sh "$f"
	try sh -c 'echo x >> "$1"' sh "$f"
	try sh -c 'echo x > "/proc/self/root$1"' sh "$f"
	try truncate -s 0 "$f"
	try rm "$f"
	try ln "$f" "$HOME/hardlink"
done
try rm -r "$OTHER/.tmp"
try ln -s "$VICTIM" "$OTHER/.cache2"
try mv "$OTHER/.config" "$OTHER/.config2"
try mkdir "$PROJECT/.agent-home/c-$MARKER"
try ln -s "$VICTIM" "$PROJECT/.agent-home/z-$MARKER"
try mv "$OTHER" "$OTHER-moved"
try rmdir "$OTHER"
try mv "$HOME" "$HOME-moved"
try sh -c 'echo x > "$PROJECT/.agent-home/.gitignore"'
`)
	})
}

// The credentials a call gets in its jail and their host originals, and
// the places in the other session's jail that attacks aim at.
const (
	credentialFiles = `"$HOME/.gitconfig" "$HOME/.config/gh/hosts.yml" "$HOME/.codex/auth.json" \
	"$HOSTHOME/.gitconfig" "$HOSTHOME/.config/gh/hosts.yml" "$HOSTHOME/.codex/auth.json" \
	"$HOSTHOME/.codex/config.toml" "$HOSTHOME/.claude.json"`
	credentialDirs    = `"$HOME/.config/gh" "$HOSTHOME/.config/gh" "$HOSTHOME/.codex" "$HOSTHOME/.config" "$HOSTHOME"`
	otherSessionFiles = `"$OTHER/b-secret" "$OTHER/a-secret" "$OTHER/new-$MARKER" "$OTHER/.tmp/new-$MARKER" "$OTHER/.jail-mcp/new-$MARKER"`
)

// onOtherSession are the metadata attempts on the other session's jail,
// run both ways (bothWays) before the vector's own attack.
var onOtherSession = map[string]string{
	"chmod": "for f in " + otherSessionFiles + `; do
	try chmod 777 "$f"
done
try chmod 777 "$OTHER"
`,
	"utime": "for f in " + otherSessionFiles + `; do
	try touch -d 2000-01-01 "$f"
done
`,
}

// metadataThrough is the start of a metadata vector (chmod, chown, utime):
// its attempts through the ways the other vectors of promise 1 write by,
// which are here and not there so that those vectors hold on a backend
// that does not cover metadata (knownGaps). viaLink runs with $HOME/to-file
// and $HOME/to-dir symlinks to the victim, viaRoot per /proc/self/root
// form as $p, onCredential per credential file as $f, onCredentialDir per
// credential directory as $d; descriptor 7, open read-only on the victim
// file, is for the vector's Python part, which closes it. They run before
// the vector's own attempts: as a normal user on a backend that lets
// chmod through, those leave the targets unreachable.
func metadataThrough(viaLink, viaRoot, onCredential, onCredentialDir string) string {
	s := "exec 7<\"$VFILE\"\n"
	if viaLink != "" {
		s += `ln -sfn "$VFILE" "$HOME/to-file"; ln -sfn "$VICTIM" "$HOME/to-dir"` + viaLink
	}
	if viaRoot != "" {
		s += `for p in /proc/self/root /proc/thread-self/root "/proc/$$/root"; do` + viaRoot + "done\n"
	}
	if onCredential != "" {
		s += "for f in " + credentialFiles + "; do" + onCredential + "done\n"
	}
	if onCredentialDir != "" {
		s += "for d in " + credentialDirs + "; do" + onCredentialDir + "done\n"
	}
	return s
}

// bothWays runs script as session a, whose $OTHER is b's jail (in the
// snapshot), then as session b, whose $OTHER is a's jail: a's file is
// checked here.
func (fx *escapeFixture) bothWays(t *testing.T, script string) {
	t.Helper()
	secret := filepath.Join(fx.jails["a"], "a-secret")
	stateOf(t, secret) // reading it sets its access time once
	before := map[string]nodeState{secret: stateOf(t, secret), fx.jails["a"]: stateOf(t, fx.jails["a"])}
	fx.attack(t, fx.a, script, nil)
	fx.checkHost(t) // what a did to b's jail, before b's own calls change it
	fx.attack(t, fx.b, script, nil)
	fx.ownCalls(t)
	if after := stateOf(t, secret); after != before[secret] {
		fx.escape(t, "session a's file changed: %+v -> %+v", before[secret], after)
	}
	if fx.gap != "" {
		fx.restore(before)
	}
}

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

// Promise 3: nothing outlives its call unless asked to (a job), nor its
// session.
func (fx *escapeFixture) nothingOutlives(t *testing.T) {
	forms := []struct{ name, start string }{
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
	}
	marker := func(i int) string { return fmt.Sprintf("1234.%d%02d", os.Getpid(), i) }
	startAll := func(m string) string {
		var b strings.Builder
		for _, f := range forms {
			fmt.Fprintf(&b, f.start+"\n", m)
		}
		return b.String()
	}
	// alive counts, inside the jail, the sleeps a script started.
	alive := func(m string) string {
		return fmt.Sprintf(`sleep 0.3
n=0; for c in /proc/[0-9]*/cmdline; do [ "$(tr '\0' ' ' < "$c" 2>/dev/null)" = "sleep %s " ] && n=$((n+1)); done; echo "alive $n"
`, m)
	}
	for i, f := range forms {
		fx.vector(t, f.name, func(t *testing.T) {
			m := marker(i)
			defer killMarked(m)
			res, _ := fx.a.exec(map[string]any{"command": fmt.Sprintf(f.start, m) + "\n" + alive(m), "env": fx.vars(fx.a)})
			if !strings.Contains(res.Stdout, "alive 1\n") {
				t.Fatalf("the daemon did not start: %+v", res)
			}
			if pids := processesWith(m); len(pids) > 0 {
				fx.escape(t, "running after the call returned: %v", pids)
			}
		})
	}
	fx.vector(t, "timeout", func(t *testing.T) {
		m := marker(10)
		defer killMarked(m)
		// The count of alive walks every process in view, which under
		// Landlock is every process of the host: time enough for a busy one.
		res, _ := fx.a.exec(map[string]any{"command": startAll(m) + alive(m) + "sleep 100", "timeout_ms": 5000, "env": fx.vars(fx.a)})
		if !res.TimedOut || res.Limit != "timeout" || !strings.Contains(res.Stdout, fmt.Sprintf("alive %d\n", len(forms))) {
			t.Fatalf("result: %+v", res)
		}
		if pids := processesWith(m); len(pids) > 0 {
			fx.escape(t, "running after the timeout: %v", pids)
		}
	})
	fx.vector(t, "cancel", func(t *testing.T) {
		m := marker(11)
		defer killMarked(m)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, _, err := callExec(ctx, fx.a, map[string]any{"command": startAll(m) + "sleep 100", "env": fx.vars(fx.a)})
			done <- err
		}()
		if !waitFor(10*time.Second, func() bool { return sleepers(m) >= len(forms) }) {
			cancel()
			t.Fatalf("the daemons did not start: %d", sleepers(m))
		}
		cancel()
		<-done
		if !waitFor(3*time.Second, func() bool { return len(processesWith(m)) == 0 }) {
			fx.escape(t, "running after the cancel: %v", processesWith(m))
		}
	})
	fx.vector(t, "server-sigkill", func(t *testing.T) {
		m := marker(12)
		defer killMarked(m)
		ts := fx.start(t, newProject(t), fx.env(), "--session", "k")
		go callExec(context.WithoutCancel(t.Context()), ts, map[string]any{"command": startAll(m) + "sleep 100", "env": fx.vars(ts)})
		if !waitFor(10*time.Second, func() bool { return sleepers(m) >= len(forms) }) {
			t.Fatalf("the daemons did not start: %d", sleepers(m))
		}
		ts.cmd.Process.Kill()
		if !waitFor(5*time.Second, func() bool { return len(processesWith(m)) == 0 }) {
			fx.escape(t, "orphans of the killed server: %v", processesWith(m))
		}
	})
}

// Promise 4: the server is never a confused deputy. Session d plants
// symlinks to the victim wherever the server works in a jail, then makes
// the server work there.
func (fx *escapeFixture) noConfusedDeputy(t *testing.T) {
	jail := fx.jails["d"]
	// No credential is bound while planting, so that every credential
	// place is a plain name the command can replace.
	plant := func(t *testing.T, script string) {
		t.Helper()
		fx.attack(t, fx.d, script, map[string]any{"auth": []string{}})
	}
	// spill prints more than the inline limit, so the server keeps the
	// output in the jail; its kept output must stay in the jail.
	spill := func(t *testing.T, ts *testServer, auth []string) {
		t.Helper()
		args := map[string]any{"command": `head -c 100000 /dev/zero | tr '\0' s; cat "$HOME/.gitconfig" >/dev/null; echo done`}
		if auth != nil {
			args["auth"] = auth
		}
		res, raw := ts.exec(args)
		if raw.StructuredContent == nil {
			t.Logf("call refused: %q", text(raw))
			return
		}
		if res.OutputPath != "" {
			real, err := filepath.EvalSymlinks(res.OutputPath)
			if !within(res.OutputPath, jail) || (err == nil && !within(real, jail)) {
				fx.escape(t, "output kept outside the jail: %s (%s)", res.OutputPath, real)
			}
		}
	}
	const moveJailMCP = `mv -T "$HOME/.jail-mcp" "$HOME/.old-jail-mcp-$$" 2>/dev/null || rm -rf "$HOME/.jail-mcp" 2>/dev/null
`
	const plantState = moveJailMCP + `mkdir -p "$HOME/.jail-mcp/state/claude" "$HOME/.jail-mcp/state/codex" "$HOME/.jail-mcp/state/gh/.config" "$HOME/.jail-mcp/state/git"
ln -sfn "$VICTIM" "$HOME/.jail-mcp/output"
ln -sfn "$VFILE" "$HOME/.jail-mcp/state/claude/.claude.json"
ln -sfn "$VFILE" "$HOME/.jail-mcp/state/claude/.claude.json.new"
ln -sfn "$VICTIM" "$HOME/.jail-mcp/state/codex/.codex"
ln -sfn "$VICTIM" "$HOME/.jail-mcp/state/gh/.config/gh"
ln -sfn "$VFILE" "$HOME/.jail-mcp/state/git/.gitconfig"
`
	const plantPlaces = `for p in .tmp .cache .config .local .runtime .codex .claude .gemini .kimi .gitconfig .claude.json .git-credentials; do
	mv -T "$HOME/$p" "$HOME/.old-$p-$$" 2>/dev/null || rm -rf "$HOME/$p" 2>/dev/null
	case $p in .gitconfig|.claude.json|.git-credentials) ln -sfn "$VFILE" "$HOME/$p" ;; *) ln -sfn "$VICTIM" "$HOME/$p" ;; esac
done
`

	fx.vector(t, "output-spill", func(t *testing.T) {
		for _, p := range []string{
			moveJailMCP + `ln -sfn "$VICTIM" "$HOME/.jail-mcp"`,
			moveJailMCP + `mkdir -p "$HOME/.jail-mcp"; ln -sfn "$VICTIM" "$HOME/.jail-mcp/output"`,
			moveJailMCP + `mkdir -p "$HOME/.jail-mcp/output"; for i in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21; do ln -sfn "$VICTIM" "$HOME/.jail-mcp/output/0000000$i"; done`,
		} {
			// The output of the planting call itself is spilled after the plant.
			plant(t, p+`
head -c 100000 /dev/zero | tr '\0' s; echo`)
			spill(t, fx.d, nil)
			spill(t, fx.d, []string{})
		}
	})
	fx.vector(t, "skeleton-and-credential-places", func(t *testing.T) {
		plant(t, plantPlaces)
		spill(t, fx.d, nil)
		fx.attack(t, fx.d, `ls -la "$HOME" >/dev/null; echo private >> "$HOME/.claude.json"; echo private >> "$HOME/.codex/config.toml"`, nil)
	})
	fx.vector(t, "state-copies", func(t *testing.T) {
		plant(t, plantState)
		spill(t, fx.d, nil)
		fx.attack(t, fx.d, `echo private >> "$HOME/.claude.json"; echo private >> "$HOME/.codex/config.toml"`, nil)
	})
	fx.vector(t, "restart", func(t *testing.T) {
		// Left for the next server of the session, which copies the
		// credential state when it opens the session.
		plant(t, plantState+plantPlaces)
		again := fx.start(t, fx.project, fx.env(), "--session", "d", "--auth", "all")
		spill(t, again, nil)
	})
	fx.vector(t, "usage", func(t *testing.T) {
		plant(t, plantPlaces+`ln -sfn "$VICTIM/big" "$HOME/big-link"; ln -sfn / "$HOME/root-link"; ln -sfn "$VICTIM" "$HOME/victim-link"`)
		// The disk watchdog counts the jail once a second too.
		fx.d.exec(map[string]any{"command": "sleep 1.2"})
		st := fx.d.status()
		if st.Usage.Bytes >= 2<<20 {
			fx.escape(t, "usage counts what symlinks point at: %+v", st.Usage)
		}
	})
	fx.vector(t, "reset", func(t *testing.T) {
		plant(t, plantState+plantPlaces+`
mkdir -p "$HOME/locked/inner" "$HOME/ro/inner" "$HOME/deep/a/b"
echo x > "$HOME/locked/inner/f"
ln -sfn "$VICTIM" "$HOME/deep/a/b/c"; ln -sfn "$VICTIM" "$HOME/locked/inner/v"; ln -sfn "$VICTIM/sub" "$HOME/ro/inner/v"
chmod 000 "$HOME/locked"; chmod 500 "$HOME/ro"`)
		res, err := fx.d.call(t.Context(), "jail_reset", nil)
		if err != nil || res.IsError {
			t.Errorf("reset: %v %q", err, text(res))
		}
		if res, _ := fx.d.exec(map[string]any{"command": "echo after"}); res.Stdout != "after\n" {
			t.Errorf("after reset: %+v", res)
		}
	})
	fx.vector(t, "race", func(t *testing.T) {
		stop := filepath.Join(hostDir(t), "stop")
		token := "race-" + fx.marker
		done := make(chan tools.ExecResult, 1)
		var raceErr error
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			res, _, err := callExec(ctx, fx.d, map[string]any{
				"auth": []string{},
				"env":  merge(fx.vars(fx.d), map[string]any{"STOP": stop}),
				"command": "# " + token + `
i=0
while [ ! -e "$STOP" ] && [ $i -lt 3000 ]; do
	i=$((i+1))
	mv -T "$HOME/.jail-mcp" "$HOME/.old-jm-$i" 2>/dev/null
	case $((i % 3)) in
	0) ln -sfn "$VICTIM" "$HOME/.jail-mcp" ;;
	1) mkdir -p "$HOME/.jail-mcp/state/claude" "$HOME/.jail-mcp/state/codex"
	   ln -sfn "$VICTIM" "$HOME/.jail-mcp/output"
	   ln -sfn "$VFILE" "$HOME/.jail-mcp/state/claude/.claude.json"
	   ln -sfn "$VFILE" "$HOME/.jail-mcp/state/claude/.claude.json.new"
	   ln -sfn "$VICTIM" "$HOME/.jail-mcp/state/codex/.codex" ;;
	2) mkdir -p "$HOME/.jail-mcp"; ln -sfn "$VICTIM" "$HOME/.jail-mcp/state" ;;
	esac
	for p in .config .codex .tmp .cache; do
		mv -T "$HOME/$p" "$HOME/.old$p-$i" 2>/dev/null; ln -sfn "$VICTIM" "$HOME/$p" 2>/dev/null
	done
	mv -T "$HOME/.claude.json" "$HOME/.old-cj-$i" 2>/dev/null; ln -sfn "$VFILE" "$HOME/.claude.json" 2>/dev/null
done
echo "iterations $i"
`,
			})
			raceErr = err
			done <- res
		}()
		if !waitFor(10*time.Second, func() bool { return len(processesWith(token)) > 0 }) {
			t.Fatal("the racing command did not start")
		}
		start := time.Now()
		var wg sync.WaitGroup
		var calls, broken atomic.Int64
		for w := range 4 {
			wg.Go(func() {
				for i := range 5 {
					cmd := "cat ~/.gitconfig ~/.claude.json >/dev/null 2>&1; echo private >> ~/.codex/config.toml 2>/dev/null; echo ok"
					if (w+i)%2 == 0 {
						cmd = "head -c 70000 /dev/zero | tr '\\0' r"
					}
					// Bounded, so that a server that hangs fails the
					// vector instead of the whole suite's timeout.
					ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
					_, _, err := callExec(ctx, fx.d, map[string]any{"command": cmd})
					if err != nil {
						broken.Add(1)
					}
					if _, err := fx.d.call(ctx, "jail_status", nil); err != nil {
						broken.Add(1)
					}
					cancel()
					calls.Add(1)
				}
			})
		}
		wg.Wait()
		if d := 2*time.Second - time.Since(start); d > 0 {
			time.Sleep(d)
		}
		os.WriteFile(stop, nil, 0o644)
		res := <-done
		t.Logf("%d calls raced the command; %s", calls.Load(), strings.TrimSpace(res.Stdout))
		if raceErr != nil {
			t.Errorf("the racing command's call: %v", raceErr)
		}
		if broken.Load() > 0 {
			t.Errorf("%d calls failed at the transport or did not return within a minute: the server broke\nserver stderr:\n%s", broken.Load(), tail(fx.d.stderr.String()))
		}
		if res, _ := fx.d.exec(map[string]any{"command": "echo after"}); res.Stdout != "after\n" {
			t.Errorf("after the race: %+v", res)
		}
		if res, err := fx.d.call(t.Context(), "jail_reset", nil); err != nil || res.IsError {
			t.Errorf("reset after the race: %v", err)
		}
	})

	// A session directory or jail base that is a symlink (planted by a
	// command of an earlier life of the project, say) is refused, never
	// followed, by the server and by jail-mcp run.
	for _, v := range []struct{ name, link, session string }{
		{"session-dir-symlink", ".agent-home/evil", "evil"},
		{"jail-base-symlink", ".agent-home", "evil"},
	} {
		fx.vector(t, v.name, func(t *testing.T) {
			project := newProject(t)
			link := filepath.Join(project, v.link)
			if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(fx.victim, link); err != nil {
				t.Fatal(err)
			}
			// On the suite's backend: its flags before the command of run.
			flags := append([]string{"--project", project, "--session", v.session}, fx.backend.args...)
			for _, args := range [][]string{
				append([]string{"serve"}, flags...),
				append(append([]string{"run"}, flags...), "--", "/bin/sh", "-c", `echo x > "$HOME/pwned-`+fx.marker+`"`),
			} {
				cmd := exec.Command(os.Args[0], args...)
				cmd.Env = append(fx.env(), fx.backend.env...)
				cmd.Dir = project
				out, err := cmd.CombinedOutput()
				if err == nil || !strings.Contains(string(out), "symlink") && !strings.Contains(string(out), "not "+filepath.Join(project, ".agent-home")) {
					fx.escape(t, "%s with a symlinked %s: %v\n%s", args[0], v.link, err, out)
				}
			}
		})
	}
}

// Promise 5: root is not special. Every attack above ran through the same
// servers; as root they must have failed all the same, but for the known
// gaps of the backend, which knownGaps says when they show.
func (fx *escapeFixture) rootIsNotSpecial(t *testing.T) {
	fx.vector(t, "root", func(t *testing.T) {
		res := fx.attack(t, fx.a, `echo "uid $(id -u)"; grep CapEff /proc/self/status`, nil)
		if want := fmt.Sprintf("uid %d\n", os.Geteuid()); !strings.HasPrefix(res.Stdout, want) {
			t.Errorf("uid in the jail: %q, want %q", res.Stdout, want)
		}
		if !strings.Contains(res.Stdout, "CapEff:\t0000000000000000") {
			fx.escape(t, "capabilities in the jail: %q", res.Stdout)
		}
		if os.Geteuid() == 0 && fx.unexpected > 0 {
			t.Errorf("the server runs as root (uid 0 in the jail too) and %d attacks above succeeded", fx.unexpected)
		}
	})
}

// Promise 6: secrets stay out unless asked for.
func (fx *escapeFixture) secretsStayOut(t *testing.T) {
	secrets := map[string]string{
		"SSH_AUTH_SOCK":            "/tmp/ssh-" + fx.marker + "/agent.sock",
		"DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus-" + fx.marker,
		"DOCKER_HOST":              "unix:///run/docker-" + fx.marker + ".sock",
		"DISPLAY":                  ":77",
		"XAUTHORITY":               "/tmp/xauth-" + fx.marker,
		"GPG_AGENT_INFO":           "/tmp/gpg-" + fx.marker + ":1:1",
		"AWS_SECRET_ACCESS_KEY":    "aws-" + fx.marker,
		"AWS_ACCESS_KEY_ID":        "akia-" + fx.marker,
		"GITHUB_TOKEN":             "ghp-" + fx.marker,
		"GH_TOKEN":                 "gho-" + fx.marker,
		"OPENAI_API_KEY":           "sk-" + fx.marker,
		"ANTHROPIC_API_KEY":        "sk-ant-" + fx.marker,
		"NPM_TOKEN":                "npm-" + fx.marker,
	}
	var extra []string
	for k, v := range secrets {
		extra = append(extra, k+"="+v)
	}
	project := newProject(t)
	for _, v := range []struct {
		name string
		args []string
		pass []string
	}{
		{"auth-none", []string{"--session", "env", "--auth", "none"}, nil},
		{"pass-env", []string{"--session", "env-pass", "--auth", "none", "--pass-env", "DISPLAY"}, []string{"DISPLAY"}},
	} {
		fx.vector(t, v.name, func(t *testing.T) {
			ts := fx.start(t, project, fx.env(extra...), v.args...)
			// Every process of the jail, bwrap's init included: its
			// environment and its command line.
			res, _ := ts.exec(map[string]any{"command": `env; echo ---; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\0' '\n' < "$f"; echo; done 2>/dev/null`})
			if res.ExitCode != 0 || !strings.Contains(res.Stdout, "---") {
				t.Fatalf("result: %+v", res)
			}
			env, _, _ := strings.Cut(res.Stdout, "---")
			for k, val := range secrets {
				passed := slices.Contains(v.pass, k)
				if got := slices.Contains(strings.Split(env, "\n"), k+"="+val); got != passed {
					fx.escape(t, "%s in the jail: %t, want %t", k, got, passed)
				}
				if !passed && strings.Contains(val, fx.marker) && strings.Contains(res.Stdout, val) {
					fx.escape(t, "the value of %s is visible in the jail", k)
				}
			}
		})
	}
}

// Promise 7: bounded.
func (fx *escapeFixture) bounded(t *testing.T) {
	project := newProject(t)
	procs := fx.start(t, project, fx.env(), "--session", "procs", "--max-procs", "100", "--max-output", "4096", "--timeout", "2s", "--max-timeout", "2s")
	// No credentials: their state copies would add bytes to a jail that a
	// file at the per-file bound fills to the byte.
	disk := fx.start(t, project, fx.env(), "--session", "disk", "--max-memory", "64MiB", "--max-disk", "8MiB", "--auth", "none")
	diskJail := filepath.Join(project, ".agent-home", "disk")

	fx.vector(t, "procs", func(t *testing.T) {
		m := fmt.Sprintf("30.%d99", os.Getpid())
		defer killMarked(m)
		res, raw := procs.exec(map[string]any{"command": fmt.Sprintf(`i=0; while [ $i -lt 2000 ]; do sleep %s & i=$((i+1)); done; wait`, m)})
		if res.Limit != "procs" || !raw.IsError {
			t.Errorf("result: %+v", res)
		}
		if pids := processesWith(m); len(pids) > 0 {
			t.Errorf("left running: %d processes", len(pids))
		}
	})
	fx.vector(t, "timeout", func(t *testing.T) {
		start := time.Now()
		res, _ := procs.exec(map[string]any{"command": "sleep 30", "timeout_ms": 3600000})
		if !res.TimedOut || res.Limit != "timeout" || time.Since(start) > 5*time.Second {
			t.Errorf("a request past --max-timeout 2s: %+v after %v", res, time.Since(start))
		}
	})
	fx.vector(t, "output", func(t *testing.T) {
		res, _ := procs.exec(map[string]any{"command": `head -c 10485760 /dev/zero | tr '\0' o; head -c 10485760 /dev/zero | tr '\0' e >&2`})
		if len(res.Stdout) > 4096 || len(res.Stderr) > 4096 || res.StdoutBytes != 10<<20 || res.StderrBytes != 10<<20 {
			t.Errorf("inline %d and %d bytes of %d and %d printed, --max-output 4096", len(res.Stdout), len(res.Stderr), res.StdoutBytes, res.StderrBytes)
		}
		if hwm := peakRSS(t, procs.cmd.Process.Pid); hwm > 64<<20 {
			t.Errorf("server peak RSS %d MiB", hwm>>20)
		}
	})
	fx.vector(t, "core", func(t *testing.T) {
		res := fx.attack(t, disk, `
echo "core $(ulimit -c) fsize $(ulimit -f)"
try sh -c 'ulimit -c unlimited'
try sh -c 'ulimit -c 1'
try sh -c 'ulimit -f unlimited'
`+py(`
import resource
for r in (resource.RLIMIT_CORE, resource.RLIMIT_FSIZE):
    attempt("raise rlimit %d" % r, resource.setrlimit, r, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
`), nil)
		if !strings.Contains(res.Stdout, "core 0 fsize 16384\n") { // 8 MiB in 512-byte blocks
			t.Errorf("rlimits in the jail: %q", res.Stdout)
		}
	})
	fx.vector(t, "memory", func(t *testing.T) {
		res, raw := disk.exec(map[string]any{"command": `"$PY" -c 'import time
chunks = [b"m" * (1 << 20) for _ in range(512)]
time.sleep(30)'`, "env": map[string]any{"PY": fx.py}, "timeout_ms": 60000})
		if res.Limit != "memory" || !raw.IsError || res.DurationMS > 20000 {
			t.Errorf("result: %+v", res)
		}
	})
	fx.vector(t, "file-size", func(t *testing.T) {
		res, _ := disk.exec(map[string]any{"argv": []string{"dd", "if=/dev/zero", "of=" + filepath.Join(diskJail, "big"), "bs=1M", "count=20"}})
		// bubblewrap's init reports a command a signal killed as 128+n;
		// the Landlock backend waits for the command itself, and reports
		// the signal.
		exitOK := (res.ExitCode == -1 && res.Signal == "SIGXFSZ") ||
			(!fx.landlock() && res.ExitCode == 128+int(syscall.SIGXFSZ))
		if res.Limit != "file_size" || !exitOK {
			t.Errorf("dd of 20 MB: %+v", res)
		}
		if fi, err := os.Stat(filepath.Join(diskJail, "big")); err != nil || fi.Size() > 8<<20 {
			fx.escape(t, "file past --max-disk 8MiB: %v %v", fi.Size(), err)
		}
		if r, err := disk.call(t.Context(), "jail_reset", nil); err != nil || r.IsError {
			t.Fatalf("reset: %v", err)
		}
		res = fx.attack(t, disk, `
head -c 20000000 /dev/zero > "$HOME/big"; echo "status $?"
echo "size $(stat -c %s "$HOME/big")"
# One file at the bound fills the jail: gone before the next.
rm -f "$HOME/big"
try truncate -s 100M "$HOME/sparse"
try dd if=/dev/zero of="$HOME/seek" bs=1 count=1 seek=20000000
`+py(`
# Python ignores SIGXFSZ: the write fails instead.
try:
    with open(HOME + "/big-py", "wb") as f:
        f.write(b"p" * 20000000)
    escaped("wrote 20 MB")
except OSError:
    pass
print("size-py", os.stat(HOME + "/big-py").st_size)
os.remove(HOME + "/big-py")
`)+`rm -f "$HOME/big" "$HOME/big-py" "$HOME/sparse" "$HOME/seek"`, nil)
		for _, line := range strings.Split(res.Stdout, "\n") {
			if size, ok := strings.CutPrefix(line, "size"); ok {
				if n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(size, "-py")), 10, 64); err != nil || n > 8<<20 {
					fx.escape(t, "file past --max-disk 8MiB: %s", line)
				}
			}
		}
		if !strings.Contains(res.Stdout, fmt.Sprintf("status %d\n", 128+int(syscall.SIGXFSZ))) {
			t.Errorf("the writer did not get SIGXFSZ: %q", res.Stdout)
		}
	})
	fx.vector(t, "disk", func(t *testing.T) {
		res, raw := disk.exec(map[string]any{"command": `i=0; while [ $i -lt 60 ]; do head -c 1000000 /dev/zero > "$HOME/f$i"; i=$((i+1)); sleep 0.1; done`})
		if res.Limit != "disk" || !raw.IsError || res.DurationMS > 5000 {
			t.Errorf("result: %+v", res)
		}
		_, refused := disk.exec(map[string]any{"command": "true"})
		if !refused.IsError || refused.StructuredContent != nil || !strings.Contains(oneLineText(t, refused), "--max-disk") {
			t.Errorf("a call over --max-disk: %q", text(refused))
		}
		if r, err := disk.call(t.Context(), "jail_reset", nil); err != nil || r.IsError {
			t.Errorf("reset: %v", err)
		}
	})
	fx.vector(t, "http-sessions", fx.httpSessions)
	fx.vector(t, "disk-burst", func(t *testing.T) {
		// Past the bound between two looks of the watchdog, and exit 0:
		// the call must still say so, and the next must not start.
		res, raw := disk.exec(map[string]any{"command": `i=0; while [ $i -lt 12 ]; do head -c 1048576 /dev/zero > "$HOME/burst$i"; i=$((i+1)); done`})
		if res.Limit != "disk" || !raw.IsError {
			fx.escape(t, "12 MiB written under --max-disk 8MiB, and the call says: %+v", res)
		}
		_, refused := disk.exec(map[string]any{"command": "true"})
		if !refused.IsError || refused.StructuredContent != nil || !strings.Contains(oneLineText(t, refused), "--max-disk") {
			fx.escape(t, "a call over --max-disk ran: %q", text(refused))
		}
		if r, err := disk.call(t.Context(), "jail_reset", nil); err != nil || r.IsError {
			t.Errorf("reset: %v", err)
		}
		if res, _ := disk.exec(map[string]any{"command": "echo after"}); res.Stdout != "after\n" {
			t.Errorf("after the reset: %+v", res)
		}
	})
}

// Promise 8: fail closed, with bubblewrap missing or broken. Backend
// selection is what these vectors test: each starts its server with the
// vector's PATH, not the arm's. The bwrap arm asks for bubblewrap by name
// (--backend bwrap): every call is refused, and the status says so. The
// landlock arm lets auto choose, as a host without a working bubblewrap
// does: on this kernel it must choose Landlock, confined, and the same
// calls run but cannot write outside the jail.
func (fx *escapeFixture) failClosed(t *testing.T) {
	fake := hostDir(t)
	if err := os.WriteFile(filepath.Join(fake, "bwrap"), []byte("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	backend := map[string]string{"bwrap": "bwrap", "landlock": "auto"}[fx.backend.name]
	for _, v := range []struct{ name, path string }{
		{"bwrap-missing", "/nonexistent"},
		{"bwrap-broken", fake + ":/usr/bin:/bin"},
	} {
		fx.vector(t, v.name, func(t *testing.T) {
			project := newProject(t)
			ts := startServer(t, project, fx.env("PATH="+v.path), "--session", "closed", "--backend", backend)
			ran := filepath.Join(project, "ran-"+fx.marker)
			touch := "/usr/bin/touch " + ran
			for _, args := range []map[string]any{
				{"command": touch},
				{"argv": []string{"/usr/bin/touch", ran}},
				{"command": touch, "stdin": "x"},
				{"command": touch, "network": false},
				{"command": touch, "cwd": "."},
				{"command": touch, "auth": []string{}},
				{"command": touch, "timeout_ms": 1000},
			} {
				out, res := ts.exec(args)
				if fx.landlock() {
					if res.StructuredContent == nil || !out.Confined || out.Backend != "landlock" || out.ExitCode == 0 {
						fx.escape(t, "auto without a working bubblewrap: %v -> %+v %q", args, out, text(res))
					}
					if fileExists(ran) {
						fx.escape(t, "wrote outside the jail: %s exists", ran)
						os.Remove(ran)
					}
					continue
				}
				if !res.IsError || res.StructuredContent != nil {
					fx.escape(t, "ran without a jail: %v -> %q", args, text(res))
				}
				if fileExists(ran) {
					t.Fatalf("the command ran: %s exists", ran)
				}
			}
			st := ts.status()
			if fx.landlock() {
				if st.Backend != "landlock" || !st.Available || !st.Confined {
					t.Errorf("auto without a working bubblewrap: status %+v", st)
				}
			} else if st.Available || st.Confined {
				t.Errorf("status: %+v", st)
			}
		})
	}
}

// startServerWithTTY is startServer with the server in a new session whose
// controlling terminal is a pseudo-terminal, its stderr; it returns the
// terminal's slave side.
func startServerWithTTY(t *testing.T, project string, env []string, args ...string) (*testServer, *os.File) {
	t.Helper()
	master, slave := openPTY(t)
	ts := startServerCmd(t, project, env, func(cmd *exec.Cmd) {
		cmd.Stderr = slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 2}
	}, args...)
	go io.Copy(ts.stderr, master)
	return ts, slave
}

func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Non-canonical, so that TIOCINQ counts every injected byte, not only
	// complete lines.
	tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Lflag &^= unix.ICANON | unix.ECHO
	if err := unix.IoctlSetTermios(int(slave.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		slave.Close()
		master.Close()
	})
	return master, slave
}

// callExec is ts.exec for goroutines: it reports instead of failing.
func callExec(ctx context.Context, ts *testServer, args map[string]any) (tools.ExecResult, *mcp.CallToolResult, error) {
	var out tools.ExecResult
	res, err := ts.call(ctx, "jailed_exec", args)
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
	var stderr syncBuffer
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
	if !waitFor(2*time.Second, func() bool { return l.hits.Load() > 0 }) {
		t.Fatalf("the host socket %s did not see the host", l.addr)
	}
	l.hits.Store(0)
}

func (l *hostListener) mustBeUntouched(t *testing.T, escape escapeFunc) {
	t.Helper()
	waitFor(200*time.Millisecond, func() bool { return l.hits.Load() > 0 })
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
	if state := procStatField(t, s.pid, 0); state != "S" && state != "R" {
		escape(t, "the host process %d is in state %s", s.pid, state)
	}
}

// procStatField is field i after the command name in /proc/pid/stat:
// 0 is the state, 4 the controlling terminal.
func procStatField(t *testing.T, pid, i int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return f[i]
}

func statusField(t testing.TB, pid int, name string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// sleepers counts the processes that are exactly "sleep marker".
func sleepers(marker string) int {
	n := 0
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, "cmdline")); err == nil && string(b) == "sleep\x00"+marker+"\x00" {
			n++
		}
	}
	return n
}

// killMarked kills what an attack left running, by pid, so that a failed
// vector does not leave its processes behind.
func killMarked(marker string) {
	for _, pid := range processesWith(marker) {
		if p, err := strconv.Atoi(pid); err == nil {
			syscall.Kill(p, syscall.SIGKILL)
		}
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

// nodeState is what the suite compares of one host path.
type nodeState struct {
	Mode                fs.FileMode
	UID, GID            uint32
	Size                int64
	Ino, Nlink          uint64
	Atime, Mtime, Ctime int64
	Target              string // of a symlink
	Sum                 string // of a regular file's content
	Xattrs              string
}

func stateOf(t *testing.T, path string) nodeState {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return nodeState{}
	}
	n := nodeState{
		Mode: fs.FileMode(st.Mode), UID: st.Uid, GID: st.Gid, Size: st.Size, Ino: st.Ino, Nlink: st.Nlink,
		Atime: st.Atim.Nano(), Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(),
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		n.Target, _ = os.Readlink(path)
	case unix.S_IFREG:
		if b, err := os.ReadFile(path); err == nil {
			sum := sha256.Sum256(b)
			n.Sum = hex.EncodeToString(sum[:8])
		}
	}
	buf := make([]byte, 4096)
	if sz, err := unix.Llistxattr(path, buf); err == nil && sz > 0 {
		for _, name := range strings.Split(strings.TrimRight(string(buf[:sz]), "\x00"), "\x00") {
			val := make([]byte, 256)
			vn, _ := unix.Lgetxattr(path, name, val)
			n.Xattrs += fmt.Sprintf("%s=%x;", name, val[:max(vn, 0)])
		}
	}
	return n
}

func (fx *escapeFixture) snapshot(t *testing.T) map[string]nodeState {
	t.Helper()
	snap := map[string]nodeState{}
	for _, root := range fx.roots {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if fx.opaque[p] {
				snap[p] = nodeState{Mode: d.Type()}
				return fs.SkipDir
			}
			snap[p] = stateOf(t, p)
			return nil
		})
	}
	for _, g := range fx.globs {
		matches, _ := filepath.Glob(g)
		for _, m := range matches {
			snap[m] = stateOf(t, m)
		}
	}
	return snap
}

func diffSnapshots(before, after map[string]nodeState) []string {
	var out []string
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			out = append(out, "removed "+p)
		case a != b:
			out = append(out, fmt.Sprintf("changed %s:\n  before %+v\n  after  %+v", p, b, a))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			out = append(out, "added "+p)
		}
	}
	slices.Sort(out)
	return out
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// python3 is the interpreter the attacks use: the system one, so that no
// shim (pyenv, say) writes into a home it expects to own.
func python3(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("the escape suite needs python3")
	}
	return p
}

func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// restore puts back the modes and owners states had, where a known gap of
// the backend let an attack change them: the vectors after it then find
// the host they expect. Parents come before their children; jails whose
// contents are not snapshotted and paths that were missing are left.
func (fx *escapeFixture) restore(states map[string]nodeState) {
	paths := slices.Sorted(maps.Keys(states))
	for _, p := range paths {
		want := states[p]
		if want == (nodeState{}) || fx.opaque[p] || uint32(want.Mode)&unix.S_IFMT == unix.S_IFLNK {
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
