//go:build linux

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/jail"
)

// Promise 7: bounded.
func (fx *escapeFixture) bounded(t *testing.T) {
	project := testkit.NewProject(t)
	procs := fx.start(t, project, fx.env(), "--session", "procs", "--max-procs", "100", "--max-output", "4096", "--timeout", "2s", "--max-timeout", "2s")
	// No credentials: their state copies would add bytes to a jail that a
	// file at the per-file bound fills to the byte.
	disk := fx.start(t, project, fx.env(), "--session", "disk", "--max-memory", "64MiB", "--max-disk", "8MiB", "--auth", "none")
	diskJail := filepath.Join(project, ".agent-home", "disk")

	fx.vector(t, "procs", func(t *testing.T) {
		m := fmt.Sprintf("30.%d99", os.Getpid())
		defer testkit.KillMarked(m)
		res, raw := procs.Exec(map[string]any{"command": fmt.Sprintf(`i=0; while [ $i -lt 2000 ]; do sleep %s & i=$((i+1)); done; wait`, m)})
		if res.Limit != "procs" || !raw.IsError {
			t.Errorf("result: %+v", res)
		}
		if pids := testkit.ProcessesWith(m); len(pids) > 0 {
			t.Errorf("left running: %d processes", len(pids))
		}
	})
	// Its own cgroups (a call's, nested in its agent's, where the server
	// makes cgroups): no bound raised, no move out of them or into
	// another's, no cgroup of its own made, on any hierarchy.
	fx.vector(t, "cgroups", func(t *testing.T) {
		fx.attack(t, procs, `
for line in $(cut -d: -f2,3 /proc/self/cgroup); do
	ctrl=${line%%:*}; rel=${line#*:}
	[ -n "$ctrl" ] || continue
	d=/sys/fs/cgroup/$ctrl$rel
	[ -d "$d" ] || continue
	for f in pids.max memory.limit_in_bytes memory.memsw.limit_in_bytes; do
		[ -e "$d/$f" ] && try sh -c "echo max > '$d/$f'" && try sh -c "echo -1 > '$d/$f'"
	done
	for up in "$d/.." "$d/../.." "$d/../../.." "/sys/fs/cgroup/$ctrl"; do
		try sh -c "echo \$\$ > '$up/tasks'"
		try sh -c "echo \$\$ > '$up/cgroup.procs'"
	done
	try mkdir "$d/escape"
done
`, nil)
	})
	fx.vector(t, "timeout", func(t *testing.T) {
		start := time.Now()
		res, _ := procs.Exec(map[string]any{"command": "sleep 30", "timeout_ms": 3600000})
		if !res.TimedOut || res.Limit != "timeout" || time.Since(start) > 5*time.Second {
			t.Errorf("a request past --max-timeout 2s: %+v after %v", res, time.Since(start))
		}
	})
	fx.vector(t, "output", func(t *testing.T) {
		res, _ := procs.Exec(map[string]any{"command": `head -c 10485760 /dev/zero | tr '\0' o; head -c 10485760 /dev/zero | tr '\0' e >&2`})
		if len(res.Stdout) > 4096 || len(res.Stderr) > 4096 || res.StdoutBytes != 10<<20 || res.StderrBytes != 10<<20 {
			t.Errorf("inline %d and %d bytes of %d and %d printed, --max-output 4096", len(res.Stdout), len(res.Stderr), res.StdoutBytes, res.StderrBytes)
		}
		if hwm := testkit.PeakRSS(t, procs.Cmd.Process.Pid); hwm > 64<<20 {
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
		res, raw := disk.Exec(map[string]any{"command": `"$PY" -c 'import time
chunks = [b"m" * (1 << 20) for _ in range(512)]
time.sleep(30)'`, "env": map[string]any{"PY": fx.py}, "timeout_ms": 60000})
		if res.Limit != "memory" || !raw.IsError || res.DurationMS > 20000 {
			t.Errorf("result: %+v", res)
		}
	})
	// Threads take pids as processes do, and count as processes: the
	// pids cgroup counts them, and so does the watchdog (num_threads).
	fx.vector(t, "threads", func(t *testing.T) {
		res, raw := procs.Exec(map[string]any{"command": `"$PY" -c 'import threading, time
stop = threading.Event()
for _ in range(300):
    try:
        threading.Thread(target=stop.wait, daemon=True).start()
    except RuntimeError:
        break
time.sleep(30)'`, "env": map[string]any{"PY": fx.py}})
		if res.Limit != "procs" || !raw.IsError {
			fx.escape(t, "one process of 300 threads under --max-procs 100: %+v", res)
		}
	})
	// Pages written into a memfd with write(2) are in no resident set
	// (each memfd below the per-file bound, 8 MiB here).
	fx.vector(t, "memfd", func(t *testing.T) {
		res, raw := disk.Exec(map[string]any{"command": `"$PY" -c 'import os, time
fds = [os.memfd_create("fill") for _ in range(40)]
for fd in fds:
    for _ in range(6):
        os.write(fd, b"m" * (1 << 20))
time.sleep(30)'`, "env": map[string]any{"PY": fx.py}, "timeout_ms": 60000})
		if res.Limit != "memory" || !raw.IsError || res.DurationMS > 20000 {
			fx.escape(t, "240 MiB in memfds under --max-memory 64MiB: %+v", res)
		}
	})
	// Files of /dev/shm outlive the call that wrote them, and belong to no
	// process: call after call, 24 MiB each (in files below the per-file
	// bound), must not keep more than --max-memory there. Under landlock
	// /dev/shm is the host's, and read-only.
	fx.vector(t, "dev-shm", func(t *testing.T) {
		stopped := false
		for i := range 6 {
			res, raw := disk.Exec(map[string]any{"command": fmt.Sprintf(`for j in 1 2 3 4; do head -c 6291456 /dev/zero > /dev/shm/fill%d-$j || exit; done`, i)})
			t.Logf("call %d: exit %d, limit %q: %s", i, res.ExitCode, res.Limit, testkit.ResultText(raw))
			switch {
			case res.Limit == "memory":
				stopped = true
			case raw.StructuredContent == nil:
				if !strings.Contains(testkit.OneLineText(t, raw), "--max-memory") {
					t.Errorf("call %d refused: %q", i, testkit.ResultText(raw))
				}
				stopped = true
			case fx.landlock() && res.ExitCode == 0:
				fx.escape(t, "the host's /dev/shm written: %+v", res)
			}
		}
		if fx.landlock() {
			// An unnamed file, which no look at the host's /dev/shm sees.
			fx.attack(t, disk, py(`attempt("O_TMPFILE in the host's /dev/shm", os.open, "/dev/shm", os.O_TMPFILE | os.O_RDWR, 0o600)`), nil)
		} else {
			if held := sandboxShm(t, disk); held > 64<<20 {
				fx.escape(t, "the session's /dev/shm holds %d MiB, --max-memory 64MiB", held>>20)
			}
			if !stopped {
				t.Errorf("144 MiB written to /dev/shm under --max-memory 64MiB, and no call was stopped or refused")
			}
		}
		if r, err := disk.Call(t.Context(), "jail_reset", nil); err != nil || r.IsError {
			t.Fatalf("reset: %v", err)
		}
	})
	// System V segments outlive their processes too, in the sandbox's IPC
	// namespace (landlock denies System V IPC): once they hold more than
	// --max-memory, no call runs on.
	fx.vector(t, "sysv-shm", func(t *testing.T) {
		disk.Exec(map[string]any{"command": py(`
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
for _ in range(8):
    id = libc.shmget(0, 16 << 20, 0o1600)
    if id < 0:
        break
    p = libc.shmat(id, None, 0)
    ctypes.memset(p, 1, 16 << 20)
    libc.shmdt(p)
`), "env": merge(fx.vars(disk), map[string]any{"PY": fx.py})})
		if fx.landlock() {
			return // the host's segments, which no command can make
		}
		res, raw := disk.Exec(map[string]any{"command": "cat /proc/sysvipc/shm"})
		t.Logf("the call after: limit %q: %s", res.Limit, testkit.ResultText(raw))
		if raw.StructuredContent != nil && res.Limit == "" {
			var held int64
			for _, line := range strings.Split(res.Stdout, "\n")[1:] {
				if f := strings.Fields(line); len(f) >= 16 {
					rss, _ := strconv.ParseInt(f[14], 10, 64)
					held += rss
				}
			}
			if held > 64<<20 {
				fx.escape(t, "a call ran while the session's System V segments held %d MiB, --max-memory 64MiB", held>>20)
			}
		} else if raw.StructuredContent == nil && !strings.Contains(testkit.OneLineText(t, raw), "--max-memory") {
			t.Errorf("refused: %q", testkit.ResultText(raw))
		}
		if r, err := disk.Call(t.Context(), "jail_reset", nil); err != nil || r.IsError {
			t.Fatalf("reset: %v", err)
		}
	})
	// bubblewrap hides the credentials' state copies under a tmpfs its
	// owner could make writable again: memory no bound counts.
	fx.vector(t, "tmpfs", func(t *testing.T) {
		fx.attack(t, procs, py(`
for line in open("/proc/self/mountinfo"):
    pre, post = line.split(" - ", 1)
    mnt = pre.split()[4].encode().decode("unicode_escape")
    if post.split()[0] != "tmpfs" or not mnt.startswith(HOME + "/"):
        continue
    attempt("chmod " + mnt, os.chmod, mnt, 0o700)
    attempt("write in the tmpfs " + mnt, lambda: open(mnt + "/fill", "wb").write(b"x" * 4096))
`), nil)
	})
	fx.vector(t, "file-size", func(t *testing.T) {
		res, _ := disk.Exec(map[string]any{"argv": []string{"dd", "if=/dev/zero", "of=" + filepath.Join(diskJail, "big"), "bs=1M", "count=20"}})
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
		if r, err := disk.Call(t.Context(), "jail_reset", nil); err != nil || r.IsError {
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
		res, raw := disk.Exec(map[string]any{"command": `i=0; while [ $i -lt 60 ]; do head -c 1000000 /dev/zero > "$HOME/f$i"; i=$((i+1)); sleep 0.1; done`})
		if res.Limit != "disk" || !raw.IsError || res.DurationMS > 5000 {
			t.Errorf("result: %+v", res)
		}
		_, refused := disk.Exec(map[string]any{"command": "true"})
		if !refused.IsError || refused.StructuredContent != nil || !strings.Contains(testkit.OneLineText(t, refused), "--max-disk") {
			t.Errorf("a call over --max-disk: %q", testkit.ResultText(refused))
		}
		if r, err := disk.Call(t.Context(), "jail_reset", nil); err != nil || r.IsError {
			t.Errorf("reset: %v", err)
		}
	})
	fx.vector(t, "http-sessions", fx.httpSessions)
	fx.vector(t, "http-flood", fx.httpFlood)
	fx.vector(t, "disk-burst", func(t *testing.T) {
		// Past the bound between two looks of the watchdog, and exit 0:
		// the call must still say so, and the next must not start.
		res, raw := disk.Exec(map[string]any{"command": `i=0; while [ $i -lt 12 ]; do head -c 1048576 /dev/zero > "$HOME/burst$i"; i=$((i+1)); done`})
		if res.Limit != "disk" || !raw.IsError {
			fx.escape(t, "12 MiB written under --max-disk 8MiB, and the call says: %+v", res)
		}
		_, refused := disk.Exec(map[string]any{"command": "true"})
		if !refused.IsError || refused.StructuredContent != nil || !strings.Contains(testkit.OneLineText(t, refused), "--max-disk") {
			fx.escape(t, "a call over --max-disk ran: %q", testkit.ResultText(refused))
		}
		if r, err := disk.Call(t.Context(), "jail_reset", nil); err != nil || r.IsError {
			t.Errorf("reset: %v", err)
		}
		if res, _ := disk.Exec(map[string]any{"command": "echo after"}); res.Stdout != "after\n" {
			t.Errorf("after the reset: %+v", res)
		}
	})
}

// httpFloodFiles is the descriptors the server of httpFlood may open.
const httpFloodFiles = 1024

// httpFlood: a command with network on floods its own server's HTTP port
// with connections: three processes, each opening 900 (more than the
// server's descriptors together), each asking /healthz and keeping the
// connection alive, and opening another in place of each the server
// closes. Another session's calls and a new session must still be
// served.
func (fx *escapeFixture) httpFlood(t *testing.T) {
	const procs, per = 3, 900
	token := "escape-flood-" + fx.marker
	hs := testkit.StartHTTPCmd(t, testkit.NewProject(t), "127.0.0.1:0", append(fx.env("JAIL_MCP_TOKEN="+token), fx.backend.Env...), testkit.LimitFiles(httpFloodFiles),
		fx.backend.Args...)
	victim := hs.Connect(t, "")
	if res, raw := victim.Exec(map[string]any{"command": "echo before"}); res.Stdout != "before\n" {
		t.Fatalf("victim: %+v %s", res, testkit.ResultText(raw))
	}
	attacker := hs.Connect(t, "")
	res, _ := attacker.Exec(map[string]any{"command": "echo $HOME"})
	jail := strings.TrimSpace(res.Stdout)
	u, err := url.Parse(hs.URL)
	if err != nil || jail == "" {
		t.Fatalf("url %q, jail %q: %v", hs.URL, jail, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan testkit.CallResult, 1)
	env := fx.vars(nil)
	env["PORT"], env["PER"], env["PROCS"] = u.Port(), strconv.Itoa(per), strconv.Itoa(procs)
	go func() {
		r, err := attacker.Call(ctx, "jailed_exec", map[string]any{"command": py(httpFloodScript), "timeout_ms": 600000, "env": env})
		done <- testkit.CallResult{Res: r, Err: err}
	}()
	defer func() {
		cancel()
		<-done
	}()
	var counts []string
	if !testkit.WaitFor(3*time.Minute, func() bool {
		counts, _ = filepath.Glob(filepath.Join(jail, "flooding-*"))
		return len(counts) == procs
	}) {
		select {
		case r := <-done:
			done <- r
			t.Fatalf("the flood ended before it flooded: %v %s", r.Err, testkit.ResultText(r.Res))
		default:
		}
		t.Fatalf("the flood did not start within 3 minutes: %d of %d processes", len(counts), procs)
	}
	opened := 0
	for _, c := range counts {
		n, _ := strconv.Atoi(strings.TrimSpace(testkit.MustRead(t, c)))
		opened += n
	}
	if opened <= httpFloodFiles {
		t.Errorf("the flood opened %d connections, not more than the server's %d descriptors: the attack proves less than it should", opened, httpFloodFiles)
	}
	// The flood goes on while both are served.
	callCtx, callCancel := context.WithTimeout(t.Context(), time.Minute)
	defer callCancel()
	if r, err := testkit.ExecVia(callCtx, victim.Client, map[string]any{"command": "echo during"}); err != nil || r.Stdout != "during\n" {
		fx.escape(t, "another session's call under the flood: %+v %v", r, err)
	}
	c, _, err := hs.Dial(callCtx, "", token)
	if err != nil {
		fx.escape(t, "a new session under the flood: %v", err)
		return
	}
	defer c.Close()
	if r, err := testkit.ExecVia(callCtx, c, map[string]any{"command": "echo new"}); err != nil || r.Stdout != "new\n" {
		fx.escape(t, "a new session's call under the flood: %+v %v", r, err)
	}
	// The server kept its connections under half its descriptors
	// (--max-conns by default) by closing the flood's.
	code, text := httpGet(t, hs, http.MethodGet, "/metrics", "Bearer "+token)
	shed := 0.0
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "jail_mcp_http_connections_shed_total{"); ok {
			if _, v, ok := strings.Cut(rest, "} "); ok {
				n, _ := strconv.ParseFloat(v, 64)
				shed += n
			}
		}
	}
	if open := metricValue(text, "jail_mcp_http_connections"); code != http.StatusOK || shed == 0 || open < 0 || open > httpFloodFiles/2 {
		fx.escape(t, "metrics after the flood: status %d, %v open connections, %v shed; want at most %d open", code, open, shed, httpFloodFiles/2)
	}
}

// httpFloodScript is httpFlood's attack.
const httpFloodScript = `
import selectors, socket
port, per, procs = int(E["PORT"]), int(E["PER"]), int(E["PROCS"])
req = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
def connect():
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.sendall(req)
        s.setblocking(False)
        return s
    except OSError:
        return None
def flood(i):
    sel = selectors.DefaultSelector()
    n = 0
    for _ in range(per):
        s = connect()
        if s:
            sel.register(s, selectors.EVENT_READ)
            n += 1
    with open(os.path.join(HOME, "flooding-%d" % i), "w") as f:
        f.write("%d\n" % n)
    while True:
        for key, _ in sel.select(1):
            s = key.fileobj
            try:
                if s.recv(65536):
                    continue
            except BlockingIOError:
                continue
            except OSError:
                pass
            sel.unregister(s)
            s.close()
            s = connect()
            if s:
                sel.register(s, selectors.EVENT_READ)
kids = []
for i in range(procs):
    pid = os.fork()
    if pid == 0:
        try:
            flood(i)
        finally:
            os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
`

// sandboxShm is what the /dev/shm of ts's session agents holds, from
// the host: each agent's sandbox, by its init's root.
func sandboxShm(t *testing.T, ts *testkit.Server) int64 {
	t.Helper()
	var held int64
	for _, agent := range testkit.AgentsOf(ts.Cmd.Process.Pid) {
		st, ok := jail.ReadStat(strconv.Itoa(agent))
		if !ok {
			continue
		}
		var fs syscall.Statfs_t
		if err := syscall.Statfs(fmt.Sprintf("/proc/%d/root/dev/shm", st.PPid), &fs); err != nil {
			t.Fatalf("the /dev/shm of agent %d: %v", agent, err)
		}
		held += int64(fs.Blocks-fs.Bfree) * fs.Bsize
	}
	return held
}
