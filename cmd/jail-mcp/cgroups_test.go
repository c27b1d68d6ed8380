//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// TestStartBesideKilledRootServer: a root server that made its cgroups
// dies by SIGKILL (a crash, the OOM killer, a client killing it), then a
// normal user's server starts in the same cgroup. Root's cgroups are the
// user's to find and never to remove: the start once retried each of
// them, nested ones first, hundreds of times, and took 8 to 20 s.
//
// No clock is read: what is asserted is the mechanism. The user's server
// answers initialize and serves while root's cgroup is still there, and
// never even opens it (an inotify watch on it sees no open: the old
// clean-up listed what was nested in it and read its cgroup.procs at
// every try); doctor, as that user, names what is left over and whose.
// That a server removes the cgroups it may remove off its start's path
// (in the background) is not asserted here: telling it from a clean-up
// that was merely quick would take a clock.
//
// Both servers run in a cgroup of the test's own, so that no other root
// server on the machine (of another test) removes root's cgroups meanwhile.
func TestStartBesideKilledRootServer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a root server's cgroups are what a normal user's server must start beside (CI runs as root)")
	}
	cgroups := testCgroups(t)
	bw := testkit.Backends()[0]
	root := bw.StartWith(t, testkit.NewProject(t), testkit.ServerEnv(), inCgroups(cgroups, nil, ""), "--session", "root")
	if res, raw := root.Exec(map[string]any{"command": "true"}); res.ExitCode != 0 {
		t.Fatalf("the root server's call: %s", testkit.ResultText(raw))
	}
	var stale []string
	for _, cg := range cgroups {
		stale = append(stale, filepath.Join(cg, fmt.Sprintf("jail-mcp-%d", root.Cmd.Process.Pid)))
	}
	if _, err := os.Stat(stale[0]); err != nil {
		t.Fatalf("the root server made no cgroup of its own in %s: %v", cgroups[0], err)
	}
	root.End("SIGKILL")
	root.Cmd.Process.Wait() // reaped: a zombie would still count as running
	watch := watchOpens(t, stale)

	u := testUser(t)
	dir := worldDir(t)
	project, home := filepath.Join(dir, "project"), filepath.Join(dir, "home")
	for _, d := range []string{project, home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chown(d, u.uid, u.gid)
	}
	bin := filepath.Join(dir, "jail-mcp.test")
	copyFile(t, os.Args[0], bin)
	env := testkit.ServerEnv("HOME=" + home)
	ts := bw.StartWith(t, project, env, inCgroups(cgroups, &u, bin), "--session", "user")
	if res, raw := ts.Exec(map[string]any{"command": "id -u"}); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != strconv.Itoa(u.uid) {
		t.Fatalf("the user's server's call: %s", testkit.ResultText(raw))
	}
	for _, d := range stale {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("root's cgroup %s: %v; the test proves nothing if it is gone", d, err)
		}
	}

	line := doctorLeftovers(t, inCgroups(cgroups, &u, bin), bin, env, project)
	want := fmt.Sprintf("leftover cgroups: %d of jail-mcp servers killed before they cleaned up, owned by root,", len(stale))
	if !strings.HasPrefix(line, want) || !strings.Contains(line, stale[0]) {
		t.Errorf("doctor as %s: %q, want %q… naming %s", u.name, line, want, stale[0])
	}
	if opened := watch(); len(opened) > 0 {
		t.Errorf("the user's server or doctor opened root's cgroups, which they may never remove: %v", opened)
	}
}

// doctorLeftovers runs doctor (set up by setup) and returns its one line
// on leftover cgroups.
func doctorLeftovers(t *testing.T, setup func(*exec.Cmd), bin string, env []string, dir string) string {
	doctor := exec.Command(bin, "doctor")
	setup(doctor)
	doctor.Env, doctor.Dir = env, dir
	out, err := doctor.Output()
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "leftover cgroups: ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("doctor: %d lines on leftover cgroups, want 1:\n%s", len(lines), out)
	}
	t.Logf("doctor: %s", lines[0])
	return lines[0]
}

// testCgroups makes a cgroup of the test's own in the pids and memory v1
// hierarchies (beside the test's), removed at the end with what the
// servers left in it; the test skips where there are none.
func testCgroups(t *testing.T) []string {
	own := map[string]string{}
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (parts[1] == "pids" || parts[1] == "memory") {
			own[parts[1]] = parts[2]
		}
	}
	var dirs []string
	for _, ctrl := range []string{"pids", "memory"} {
		rel, ok := own[ctrl]
		if !ok {
			t.Skipf("no cgroup v1 %s hierarchy here: servers make no cgroups, so none is left to start beside", ctrl)
		}
		d := filepath.Join("/sys/fs/cgroup", ctrl, rel, fmt.Sprintf("jmcp-test-stale-%d", os.Getpid()))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatalf("make the test's cgroup: %v", err)
		}
		t.Cleanup(func() { removeCgroupTree(t, d) })
		dirs = append(dirs, d)
	}
	return dirs
}

// removeCgroupTree removes the cgroup d and those nested in it, killing
// what is still in them.
func removeCgroupTree(t *testing.T, d string) {
	gone := testkit.WaitFor(10*time.Second, func() bool {
		var dirs []string
		filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			b, _ := os.ReadFile(filepath.Join(dirs[i], "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					unix.Kill(pid, unix.SIGKILL)
				}
			}
			os.Remove(dirs[i])
		}
		_, err := os.Stat(d)
		return errors.Is(err, os.ErrNotExist)
	})
	if !gone {
		t.Errorf("the test's cgroup %s is left behind", d)
	}
}

// inCgroups makes cmd start in the cgroups given (a shell, as root, moves
// itself there and execs the program), as u with bin when u is not nil:
// a process stays in the cgroups its parent was in when it forked.
func inCgroups(cgroups []string, u *testUserIDs, bin string) func(*exec.Cmd) {
	return func(cmd *exec.Cmd) {
		script := `for d in ` + shellQuote(cgroups...) + `; do echo $$ > "$d/cgroup.procs" || exit 97; done; exec "$@"`
		argv := []string{cmd.Path}
		if u != nil {
			argv = []string{"setpriv", fmt.Sprintf("--reuid=%d", u.uid), fmt.Sprintf("--regid=%d", u.gid), "--clear-groups", "--", bin}
		}
		cmd.Args = append(append([]string{"sh", "-c", script, "sh"}, argv...), cmd.Args[1:]...)
		cmd.Path = "/bin/sh"
	}
}

func shellQuote(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// watchOpens watches dirs for opens (of them, or of a file in them); the
// function returned lists those seen so far.
func watchOpens(t *testing.T, dirs []string) func() []string {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	names := map[int32]string{}
	for _, d := range dirs {
		wd, err := unix.InotifyAddWatch(fd, d, unix.IN_OPEN|unix.IN_ACCESS)
		if err != nil {
			t.Fatalf("watch %s: %v", d, err)
		}
		names[int32(wd)] = d
	}
	return func() []string {
		var seen []string
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(fd, buf)
			if err != nil || n <= 0 {
				return seen
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
				seen = append(seen, filepath.Join(names[ev.Wd], name))
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}
}

// testUserIDs is a normal user of the host's.
type testUserIDs struct {
	name     string
	uid, gid int
}

// testUser is jailmcp-test, made with useradd if the host has none.
func testUser(t *testing.T) testUserIDs {
	const name = "jailmcp-test"
	u, err := user.Lookup(name)
	if err != nil {
		out, aerr := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput()
		if u, err = user.Lookup(name); err != nil {
			t.Fatalf("make the user %s: %v %s", name, aerr, out)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return testUserIDs{name, uid, gid}
}

// worldDir is a fresh directory every user may search, removed at the
// end: a normal user's server runs from it.
func worldDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "jail-mcp-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testkit.RemoveAllForce(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err = filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// copyFile copies the program from to to, executable by all.
func copyFile(t *testing.T, from, to string) {
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
