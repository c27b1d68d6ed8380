//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/jailfs/jailfstest"
	"github.com/jail-mcp/jail-mcp/tools"
)

// Promise 7: bounded.
func (fx *escapeFixture) bounded(t *testing.T) {
	project := testkit.NewProject(t)
	// procs' vectors end by a bound or their own end, never by the clock:
	// its timeouts are far off (a 2 s timeout once ended the cgroups
	// vector under .ci/stress's load before its last write). The clamp of
	// a request's timeout has a server of its own (clock).
	procs := fx.start(t, project, fx.env(), "--session", "procs", "--max-procs", "100", "--max-output", "4096", "--timeout", "10m", "--max-timeout", "10m")
	clock := fx.start(t, project, fx.env(), "--session", "clock", "--timeout", "2s", "--max-timeout", "2s")
	// No credentials: their state copies would add bytes to a jail that a
	// file at the per-file bound fills to the byte.
	disk := fx.start(t, project, fx.env(), "--session", "disk", "--max-memory", "64MiB", "--max-disk", "8MiB", "--auth", "none")
	diskJail := filepath.Join(project, ".agent-home", "disk")

	bf := &boundedFixture{escapeFixture: fx, ownProject: project, procs: procs, clock: clock, disk: disk, diskJail: diskJail}
	fx.vector(t, "procs", bf.runawayProcs)
	fx.vector(t, "cgroups", bf.ownCgroups)
	fx.vector(t, "timeout", bf.timeout)
	fx.vector(t, "output", bf.output)
	fx.vector(t, "core", bf.core)
	fx.vector(t, "memory", bf.memory)
	fx.vector(t, "watch-flood", bf.watchFlood)
	fx.vector(t, "threads", bf.threads)
	fx.vector(t, "memfd", bf.memfd)
	fx.vector(t, "dev-shm", bf.devShm)
	fx.vector(t, "sysv-shm", bf.sysvShm)
	fx.vector(t, "tmpfs", bf.tmpfs)
	fx.vector(t, "file-size", bf.fileSize)
	fx.vector(t, "disk", bf.diskFill)
	fx.vector(t, "http-sessions", fx.httpSessions)
	fx.vector(t, "http-flood", fx.httpFlood)
	fx.vector(t, "dirs-symlinks", bf.dirsSymlinks)
	fx.vector(t, "files", bf.files)
	fx.vector(t, "deep-walk", fx.deepWalk)
	fx.vector(t, "disk-burst", bf.diskBurst)
}

// boundedFixture holds promise 7's servers: procs, bounded in processes,
// output and time; disk, in memory, disk and file size.
type boundedFixture struct {
	*escapeFixture
	ownProject  string // the project of its servers
	procs, disk *testkit.Server
	clock       *testkit.Server // --max-timeout 2s
	diskJail    string          // disk's jail
}

// runawayProcs: a fork bomb is ended by --max-procs. It runs on a server
// of its own whose timeout is far off: on a busy machine the shell forks
// slowly, and procs' 2 s timeout once came before its 100th process (the
// bound, not the clock, must end it).
func (fx *boundedFixture) runawayProcs(t *testing.T) {
	srv := fx.start(t, fx.ownProject, fx.env(), "--session", "runaway", "--max-procs", "100", "--timeout", "10m", "--max-timeout", "10m")
	m := fmt.Sprintf("30.%d99", os.Getpid())
	defer testkit.KillMarked(m)
	res, raw := srv.Exec(map[string]any{"command": fmt.Sprintf(`i=0; while [ $i -lt 2000 ]; do sleep %s & i=$((i+1)); done; wait`, m)})
	if res.Limit != "procs" || !raw.IsError {
		t.Errorf("result: %+v", res)
	}
	if pids := testkit.ProcessesWith(m); len(pids) > 0 {
		t.Errorf("left running: %d processes", len(pids))
	}
}

// Its own cgroups (a call's, nested in its agent's, where the server
// makes cgroups): no bound raised, no move out of them or into
// another's, no cgroup of its own made, on any hierarchy.
func (fx *boundedFixture) ownCgroups(t *testing.T) {
	fx.attack(t, fx.procs, `
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
}

// timeout: a request's timeout_ms past --max-timeout is clamped to it.
// No clock is read: unclamped, sleep 30 would end on its own, exit 0,
// not timed out.
func (fx *boundedFixture) timeout(t *testing.T) {
	res, _ := fx.clock.Exec(map[string]any{"command": "sleep 30", "timeout_ms": 3600000})
	if !res.TimedOut || res.Limit != "timeout" {
		t.Errorf("a request past --max-timeout 2s: %+v", res)
	}
}

func (fx *boundedFixture) output(t *testing.T) {
	res, _ := fx.procs.Exec(map[string]any{"command": `head -c 10485760 /dev/zero | tr '\0' o; head -c 10485760 /dev/zero | tr '\0' e >&2`})
	if len(res.Stdout) > 4096 || len(res.Stderr) > 4096 || res.StdoutBytes != 10<<20 || res.StderrBytes != 10<<20 {
		t.Errorf("inline %d and %d bytes of %d and %d printed, --max-output 4096", len(res.Stdout), len(res.Stderr), res.StdoutBytes, res.StderrBytes)
	}
	if hwm := testkit.PeakRSS(t, fx.procs.Cmd.Process.Pid); hwm > 64<<20 {
		t.Errorf("server peak RSS %d MiB", hwm>>20)
	}
}

func (fx *boundedFixture) core(t *testing.T) {
	res := fx.attack(t, fx.disk, `
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
}

func (fx *boundedFixture) memory(t *testing.T) {
	res, raw := fx.disk.Exec(map[string]any{"command": `"$PY" -c 'import time
chunks = [b"m" * (1 << 20) for _ in range(512)]
time.sleep(30)'`, "env": map[string]any{"PY": fx.py}, "timeout_ms": 60000})
	if res.Limit != "memory" || !raw.IsError || res.DurationMS > 20000 {
		t.Errorf("result: %+v", res)
	}
}

// The write watch makes each write-open wait for the call's thread,
// which also counts the call's tree: four processes opening files for
// writing without pause must not keep it from seeing a fifth take
// memory past --max-memory.
func (fx *boundedFixture) watchFlood(t *testing.T) {
	res, raw := fx.disk.Exec(map[string]any{"command": `"$PY" -c 'import os, time
for i in range(4):
    if os.fork() == 0:
        p = os.path.join(os.environ["PWD"], "flood-%d" % i)
        while True:
            try:
                os.close(os.open(p, os.O_WRONLY | os.O_CREAT))
            except OSError:
                pass
time.sleep(0.5)
chunks = [b"m" * (1 << 20) for _ in range(512)]
time.sleep(30)'`, "env": map[string]any{"PY": fx.py}, "timeout_ms": 60000})
	if res.Limit != "memory" || !raw.IsError || res.DurationMS > 20000 {
		fx.escape(t, "512 MiB beside a flood of refused writes, under --max-memory: %+v", res)
	}
}

// Threads take pids as processes do, and count as processes: the
// pids cgroup counts them, and so does the watchdog (num_threads).
func (fx *boundedFixture) threads(t *testing.T) {
	res, raw := fx.procs.Exec(map[string]any{"command": `"$PY" -c 'import threading, time
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
}

// Pages written into a memfd with write(2) are in no resident set
// (each memfd below the per-file bound, 8 MiB here).
func (fx *boundedFixture) memfd(t *testing.T) {
	res, raw := fx.disk.Exec(map[string]any{"command": `"$PY" -c 'import os, time
fds = [os.memfd_create("fill") for _ in range(40)]
for fd in fds:
    for _ in range(6):
        os.write(fd, b"m" * (1 << 20))
time.sleep(30)'`, "env": map[string]any{"PY": fx.py}, "timeout_ms": 60000})
	if res.Limit != "memory" || !raw.IsError || res.DurationMS > 20000 {
		fx.escape(t, "240 MiB in memfds under --max-memory 64MiB: %+v", res)
	}
}

// Files of /dev/shm outlive the call that wrote them, and belong to no
// process: call after call, 24 MiB each (in files below the per-file
// bound), must not keep more than --max-memory there. Under landlock
// /dev/shm is the host's, and read-only.
func (fx *boundedFixture) devShm(t *testing.T) {
	stopped := false
	for i := range 6 {
		res, raw := fx.disk.Exec(map[string]any{"command": fmt.Sprintf(`for j in 1 2 3 4; do head -c 6291456 /dev/zero > /dev/shm/fill%d-$j || exit; done`, i)})
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
		fx.attack(t, fx.disk, py(`attempt("O_TMPFILE in the host's /dev/shm", os.open, "/dev/shm", os.O_TMPFILE | os.O_RDWR, 0o600)`), nil)
	} else {
		if held := sandboxShm(t, fx.disk); held > 64<<20 {
			fx.escape(t, "the session's /dev/shm holds %d MiB, --max-memory 64MiB", held>>20)
		}
		if !stopped {
			t.Errorf("144 MiB written to /dev/shm under --max-memory 64MiB, and no call was stopped or refused")
		}
	}
	resetJail(t, fx.disk, t.Fatalf)
}

// System V segments outlive their processes too, in the sandbox's IPC
// namespace (landlock denies System V IPC): once they hold more than
// --max-memory, no call runs on.
func (fx *boundedFixture) sysvShm(t *testing.T) {
	fx.disk.Exec(map[string]any{"command": py(`
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
`), "env": merge(fx.vars(fx.disk), map[string]any{"PY": fx.py})})
	if fx.landlock() {
		return // the host's segments, which no command can make
	}
	res, raw := fx.disk.Exec(map[string]any{"command": "cat /proc/sysvipc/shm"})
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
	resetJail(t, fx.disk, t.Fatalf)
}

// bubblewrap hides the credentials' state copies under a tmpfs its
// owner could make writable again: memory no bound counts.
func (fx *boundedFixture) tmpfs(t *testing.T) {
	fx.attack(t, fx.procs, py(`
for line in open("/proc/self/mountinfo"):
    pre, post = line.split(" - ", 1)
    mnt = pre.split()[4].encode().decode("unicode_escape")
    if post.split()[0] != "tmpfs" or not mnt.startswith(HOME + "/"):
        continue
    attempt("chmod " + mnt, os.chmod, mnt, 0o700)
    attempt("write in the tmpfs " + mnt, lambda: open(mnt + "/fill", "wb").write(b"x" * 4096))
`), nil)
}

func (fx *boundedFixture) fileSize(t *testing.T) {
	res, _ := fx.disk.Exec(map[string]any{"argv": []string{"dd", "if=/dev/zero", "of=" + filepath.Join(fx.diskJail, "big"), "bs=1M", "count=20"}})
	// bubblewrap's init reports a command a signal killed as 128+n;
	// the Landlock backend waits for the command itself, and reports
	// the signal.
	exitOK := (res.ExitCode == -1 && res.Signal == "SIGXFSZ") ||
		(!fx.landlock() && res.ExitCode == 128+int(syscall.SIGXFSZ))
	if res.Limit != "file_size" || !exitOK {
		t.Errorf("dd of 20 MB: %+v", res)
	}
	if fi, err := os.Stat(filepath.Join(fx.diskJail, "big")); err != nil || fi.Size() > 8<<20 {
		fx.escape(t, "file past --max-disk 8MiB: %v %v", fi.Size(), err)
	}
	resetJail(t, fx.disk, t.Fatalf)
	// Each write on its own call: a file at the per-file bound takes
	// the jail over --max-disk too (its directories take blocks), so
	// the watchdog may kill the call for "disk" before it ends.
	for _, w := range []struct{ name, command string }{
		{"big", `head -c 20000000 /dev/zero > "$HOME/big"; echo "status $?"`},
		{"sparse", `truncate -s 100M "$HOME/sparse"`},
		{"seek", `dd if=/dev/zero of="$HOME/seek" bs=1 count=1 seek=20000000`},
		// Python ignores SIGXFSZ: the write fails instead.
		{"big-py", `"$PY" -c 'import os
with open(os.environ["HOME"] + "/big-py", "wb") as f:
    f.write(b"p" * 20000000)'`},
	} {
		res, _ := fx.disk.Exec(map[string]any{"command": w.command, "env": map[string]any{"PY": fx.py}})
		if fi, err := os.Lstat(filepath.Join(fx.diskJail, w.name)); err == nil && fi.Size() > 8<<20 {
			fx.escape(t, "%s: a file of %d bytes, past --max-disk 8MiB", w.name, fi.Size())
		}
		if res.Limit != "file_size" && res.Limit != "disk" && w.name != "sparse" && w.name != "seek" {
			t.Errorf("%s: %+v", w.name, res)
		}
		if strings.Contains(res.Stdout, "status ") && !strings.Contains(res.Stdout, fmt.Sprintf("status %d\n", 128+int(syscall.SIGXFSZ))) {
			t.Errorf("the writer did not get SIGXFSZ: %q", res.Stdout)
		}
		resetJail(t, fx.disk, t.Fatalf)
	}
}

func (fx *boundedFixture) diskFill(t *testing.T) {
	res, raw := fx.disk.Exec(map[string]any{"command": `i=0; while [ $i -lt 60 ]; do head -c 1000000 /dev/zero > "$HOME/f$i"; i=$((i+1)); sleep 0.1; done`})
	if res.Limit != "disk" || !raw.IsError || res.DurationMS > 5000 {
		t.Errorf("result: %+v", res)
	}
	refusesNext(t, fx.disk, "--max-disk", (*testing.T).Errorf)
	resetJail(t, fx.disk, t.Errorf)
}

func (fx *boundedFixture) dirsSymlinks(t *testing.T) {
	// Directories and long symlinks take blocks (4 KiB each here)
	// but no apparent size: 16 MiB of them under --max-disk 8MiB.
	res, raw := fx.disk.Exec(map[string]any{"command": `"$PY" -c 'import os
h = os.environ["HOME"]
for i in range(3000):
    os.mkdir(h + "/d%d" % i)
for i in range(1000):
    os.symlink("x" * 4000, h + "/l%d" % i)'`, "env": map[string]any{"PY": fx.py}})
	if res.Limit != "disk" || !raw.IsError {
		fx.escape(t, "3,000 directories and 1,000 long symlinks under --max-disk 8MiB, and the call says: %+v", res)
	}
	refusesNext(t, fx.disk, "--max-disk", fx.escape)
	resetJail(t, fx.disk, t.Errorf)
}

func (fx *boundedFixture) files(t *testing.T) {
	// Inodes that take no block (empty files, short symlinks,
	// FIFOs) under --max-files 1000.
	files := fx.start(t, fx.ownProject, fx.env(), "--session", "files", "--max-files", "1000", "--auth", "none")
	res, raw := files.Exec(map[string]any{"command": `"$PY" -c 'import os
h = os.environ["HOME"]
for i in range(1500):
    open(h + "/e%d" % i, "w").close()
    os.symlink("t", h + "/s%d" % i)
    os.mkfifo(h + "/p%d" % i)'`, "env": map[string]any{"PY": fx.py}})
	if res.Limit != "files" || !raw.IsError {
		fx.escape(t, "4,500 files of no block under --max-files 1000, and the call says: %+v", res)
	}
	refusesNext(t, files, "--max-files", fx.escape)
	if st := files.Status(); st.Usage.Files < 1000 || st.Limits.MaxFiles != 1000 {
		t.Errorf("jail_status: usage %+v, limits %+v", st.Usage, st.Limits)
	}
	resetJail(t, files, t.Errorf)
	runsAfterReset(t, files)
}

func (fx *boundedFixture) diskBurst(t *testing.T) {
	// Past the bound between two looks of the watchdog, and exit 0:
	// the call must still say so, and the next must not start.
	res, raw := fx.disk.Exec(map[string]any{"command": `i=0; while [ $i -lt 12 ]; do head -c 1048576 /dev/zero > "$HOME/burst$i"; i=$((i+1)); done`})
	if res.Limit != "disk" || !raw.IsError {
		fx.escape(t, "12 MiB written under --max-disk 8MiB, and the call says: %+v", res)
	}
	refusesNext(t, fx.disk, "--max-disk", fx.escape)
	resetJail(t, fx.disk, t.Errorf)
	runsAfterReset(t, fx.disk)
}

// refusesNext checks that ts, past the bound of flag, refuses its next
// call with a word of flag; report counts a call that ran (an escape, or
// (*testing.T).Errorf).
func refusesNext(t *testing.T, ts *testkit.Server, flag string, report escapeFunc) {
	t.Helper()
	_, refused := ts.Exec(map[string]any{"command": "true"})
	if !refused.IsError || refused.StructuredContent != nil || !strings.Contains(testkit.OneLineText(t, refused), flag) {
		report(t, "a call over %s ran: %q", flag, testkit.ResultText(refused))
	}
}

// resetJail empties ts's jail; fail counts a reset that failed (t.Fatalf
// where the vector cannot go on, else t.Errorf).
func resetJail(t *testing.T, ts *testkit.Server, fail func(format string, args ...any)) {
	t.Helper()
	if r, err := ts.Call(t.Context(), "jail_reset", nil); err != nil || r.IsError {
		fail("reset: %v", err)
	}
}

// runsAfterReset checks that ts runs a call again once its jail is reset.
func runsAfterReset(t *testing.T, ts *testkit.Server) {
	t.Helper()
	if res, _ := ts.Exec(map[string]any{"command": "echo after"}); res.Stdout != "after\n" {
		t.Errorf("after the reset: %+v", res)
	}
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
	// The server's descriptor limit is its agents' too: with the project
	// view on, an agent's spares once armed a read view each, holding
	// four times the descriptors of one, and a new session ran out
	// (TestOverlaySparesShareReadView).
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
    # Written whole, then renamed: the test reads the count once the
    # name appears, never a file still being written.
    tmp = os.path.join(HOME, ".count-%d" % i)
    with open(tmp, "w") as f:
        f.write("%d\n" % n)
    os.rename(tmp, os.path.join(HOME, "flooding-%d" % i))
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

// deepWalk: a command makes a chain of 6,000 directories in its jail,
// which the server must then walk (too deep to watch), and keeps a call
// running there so that the watchdog looks at the jail's usage. Walking
// it by paths took minutes, on the watchdog's one loop: meanwhile no call
// of any session of the server was held to its bounds. Another session's
// fork bomb must still be stopped for --max-procs, and jail_status and
// jail_reset of the deep jail must answer.
func (fx *escapeFixture) deepWalk(t *testing.T) {
	const depth = 6000 // past watchDepth and PATH_MAX; each level costs the command a Landlock walk up the chain, so 20,000 took 50 s to make
	project := testkit.NewProject(t)
	hs := testkit.StartHTTP(t, project, append(fx.env(), fx.backend.Env...), append(slices.Clone(fx.backend.Args),
		"--max-procs", "100", "--timeout", "60s", "--max-timeout", "10m", "--auth", "none")...)
	deep, other := hs.Connect(t, ""), hs.Connect(t, "")
	res, _ := deep.Exec(map[string]any{"command": `"$PY" -c 'import os
os.chdir(os.environ["HOME"])
for i in range(` + strconv.Itoa(depth) + `):
    os.mkdir("d")
    os.chdir("d")
open("f", "w").write("bottom")
print("made")'`, "env": map[string]any{"PY": fx.py}, "timeout_ms": 600000})
	// Whatever happens, the chain goes when the test ends: Go's
	// os.RemoveAll (t.TempDir) holds a descriptor a level.
	t.Cleanup(func() { jailfstest.Unchain(t, deep.Jail()) })
	if res.Stdout != "made\n" {
		t.Fatalf("making the chain: %+v", res)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	started := filepath.Join(deep.Jail(), "started")
	running := deep.Background(ctx, `touch "$HOME/started"; exec sleep 600`)
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		select {
		case r := <-running:
			t.Fatalf("the deep jail's call ended: %+v", r)
		case <-time.After(20 * time.Millisecond):
		}
	}

	m := fmt.Sprintf("31.%d99", os.Getpid())
	defer testkit.KillMarked(m)
	bomb, raw := other.Exec(map[string]any{"command": fmt.Sprintf(`i=0; while [ $i -lt 2000 ]; do sleep %s & i=$((i+1)); done; wait`, m), "timeout_ms": 120000})
	if bomb.Limit != "procs" || !raw.IsError {
		fx.escape(t, "a fork bomb beside a deep jail's walk, under --max-procs 100: %+v", bomb)
	}
	st := deep.Status()
	if st.Usage.Files < depth+1 {
		t.Errorf("jail_status of the deep jail: usage %+v, want at least %d files", st.Usage, depth+1)
	}
	cancel()
	<-running
	r, err := deep.Call(t.Context(), "jail_reset", nil)
	if err != nil || r.IsError {
		t.Fatalf("reset of the deep jail: %v %q", err, testkit.ResultText(r))
	}
	var out tools.ResetResult
	if b, _ := json.Marshal(r.StructuredContent); json.Unmarshal(b, &out) != nil || out.RemovedFiles < depth+1 {
		t.Errorf("reset of the deep jail: %q", testkit.ResultText(r))
	}
	if _, err := os.Lstat(filepath.Join(deep.Jail(), "d")); !os.IsNotExist(err) {
		t.Errorf("the chain is still there after the reset: %v", err)
	}
}
