//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/session/layer"
	"github.com/jail-mcp/jail-mcp/tools"
)

// watchLimit is the inotify watches of the user namespace the blind-watch
// test runs its server in: small, so that a command uses them up fast,
// and the namespace's own, so that no other test of the user runs short.
const watchLimit = 3000

// exhaustInotify adds watches, one file each in the directory it is
// given (files: the server's watch of the jail's usage takes one watch
// for the directory, none for its files),
// until the kernel refuses one, says how many it holds, and keeps taking
// every watch that frees up until it is killed.
const exhaustInotify = `import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
fd = libc.inotify_init1(0)
n, told = 0, False
while n < 1000000:
    p = os.path.join(d, str(n))
    open(p, "a").close()
    if libc.inotify_add_watch(fd, p.encode(), 0x100) >= 0:
        n += 1
        continue
    if not told:
        print("held", n, os.strerror(ctypes.get_errno()), flush=True)
        told = True
    time.sleep(0.005)
`

// inotifyUserns runs the server of cmd in a user namespace of its own
// (the caller's uid and gid mapped to themselves) whose inotify watches
// are watchLimit, with no capabilities left.
func inotifyUserns(cmd *exec.Cmd) {
	script := fmt.Sprintf(`echo %d > /proc/sys/user/max_inotify_watches && exec setpriv --inh-caps=-all --ambient-caps=-all -- "$@"`, watchLimit)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		panic(err)
	}
	cmd.Args = append([]string{"unshare", fmt.Sprintf("--map-user=%d", os.Getuid()), fmt.Sprintf("--map-group=%d", os.Getgid()), "--keep-caps",
		"sh", "-c", script, "sh", cmd.Path}, cmd.Args[1:]...)
	cmd.Path = unshare
}

// TestOverlayBlindWatch: a program of the host's uses up the user's
// inotify watches (they are the user's, whoever adds them), so that the
// server's watch of the project cannot watch a directory the host makes;
// the watch says it is blind, every call then reads the project as it is
// (a view of its own), jail_apply never writes over what the host made
// there, and once the watches are free again the watch sees all again.
// The server runs in a user namespace of its own with few watches, the
// host's program in that namespace too.
func TestOverlayBlindWatch(t *testing.T) {
	project := testkit.NewProject(t)
	writeFiles(t, project, map[string]string{"keep.txt": "keep\n"})
	bw := testkit.Backends()[0]
	ts := bw.StartWith(t, project, testkit.ServerEnv(), inotifyUserns, "--overlay", "on", "--session", "blind")
	if st := ts.Status(); st.ViewWatch != "watching" {
		t.Fatalf("view_watch %q at the start, want watching", st.ViewWatch)
	}
	py := testkit.Python3(t)
	// The host's program, in the server's user namespace.
	host := exec.Command("nsenter", fmt.Sprintf("--user=/proc/%d/ns/user", ts.Cmd.Process.Pid), "--preserve-credentials", "--", py, "-c", exhaustInotify, filepath.Join(t.TempDir(), "watches"))
	stdout, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	host.Stderr = os.Stderr
	if err := host.Start(); err != nil {
		t.Fatalf("nsenter: %v", err)
	}
	stopped := false
	stopHost := func() {
		if !stopped {
			stopped = true
			host.Process.Kill()
			host.Wait()
		}
	}
	defer stopHost()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if !strings.HasPrefix(line, "held") {
		t.Fatalf("the host's program that uses up the watches: %q %v", line, err)
	}
	t.Logf("the host's program: %s", strings.TrimSpace(line))

	// A directory, then a file in it, made by the host.
	dir := filepath.Join(project, "made")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	makeBlind(t, ts, project)
	if res, raw := ts.Exec(map[string]any{"command": "cat made/f 2>&1; ls -a made"}); res.ExitCode != 0 {
		t.Fatalf("a call: %s", testkit.ResultText(raw))
	}
	// A copy made within layer.ViewSlack of a call's end may be that
	// call's, whose view looked made/f up before the host made it: a
	// conflict. The host writes, and the calls after run, once that call
	// is out of reach (a wait that only a faster machine shortens).
	time.Sleep(2 * time.Duration(layer.ViewSlack))
	writeFiles(t, project, map[string]string{"made/f": "host-1\n"})
	if res, raw := ts.Exec(map[string]any{"command": "cat made/f"}); res.Stdout != "host-1\n" {
		t.Errorf("a call after the host wrote made/f reads %q, want host-1: %s", res.Stdout, testkit.ResultText(raw))
	}
	// What the call makes of the file is applied over the host's file
	// only as the call saw it.
	if res, raw := ts.Exec(map[string]any{"command": "echo view >> made/f"}); res.ExitCode != 0 {
		t.Fatalf("append: %s", testkit.ResultText(raw))
	}
	// The host's program ends: its watches are free, and the watch sees
	// all again.
	stopHost()
	waitWatch(t, ts, "watching")
	var applied tools.ApplyResult
	res, err := ts.Call(t.Context(), "jail_apply", map[string]any{"paths": []string{"made"}})
	if err != nil {
		t.Fatal(err)
	}
	testkit.DecodeResult(t, res, &applied)
	if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "host-1\nview\n" {
		t.Errorf("jail_apply wrote made/f as %q (%s), want the host's line kept", b, testkit.ResultText(res))
	}
	// The host changes the file after the view copied it: a conflict.
	if res, raw := ts.Exec(map[string]any{"command": "echo view-2 >> made/f"}); res.ExitCode != 0 {
		t.Fatalf("append: %s", testkit.ResultText(raw))
	}
	writeFiles(t, project, map[string]string{"made/f.new": "host-2\n"})
	if err := os.Rename(filepath.Join(dir, "f.new"), filepath.Join(dir, "f")); err != nil {
		t.Fatal(err)
	}
	res, err = ts.Call(t.Context(), "jail_apply", map[string]any{"paths": []string{"made/f"}})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "f")); !strings.Contains(testkit.ResultText(res), "conflict") || string(b) != "host-2\n" {
		t.Errorf("jail_apply over a file the host changed: %s; the host's file %q", testkit.ResultText(res), b)
	}

	// Watched again, made/ too.
	if res, raw := ts.Exec(map[string]any{"command": "cat made/h 2>&1; true"}); res.ExitCode != 0 {
		t.Fatalf("a call: %s", testkit.ResultText(raw))
	}
	writeFiles(t, project, map[string]string{"later/g": "host-3\n", "made/h": "host-4\n"})
	if res, raw := ts.Exec(map[string]any{"command": "cat later/g made/h"}); res.Stdout != "host-3\nhost-4\n" {
		t.Errorf("a call after the watch saw all again reads %q: %s", res.Stdout, testkit.ResultText(raw))
	}
}

// TestCallWatchBound: a jailed command (a job) that takes every inotify
// watch it can is ended once it holds more than its share, a quarter of
// the user's, and its result says so; the project's watch then sees all
// again. Without the bound the job holds them until it ends (it sleeps
// for ten minutes after), and the wait for its end fails. Each backend's
// server runs in a user namespace of its own with watchLimit watches.
func TestCallWatchBound(t *testing.T) {
	py := testkit.Python3(t)
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		args := []string{"--session", "watches"}
		if b.Name == "bwrap" {
			args = append(args, "--overlay", "on")
		}
		ts := b.StartWith(t, project, testkit.ServerEnv(), inotifyUserns, args...)
		job := ts.StartJob(map[string]any{"command": `"$PY" -c "$SCRIPT" "$TMPDIR/watches"; sleep 600`, "env": map[string]any{"PY": py, "SCRIPT": exhaustInotify}})
		if _, end := ts.ReadUntil(job, "never printed", 2*time.Minute); end.Running {
			t.Errorf("a jailed command that takes every inotify watch runs on, two minutes later")
			ts.Job(map[string]any{"job_id": job, "signal": "KILL"})
			return
		}
		share := fmt.Sprintf("inotify watches, over its share of %d", watchLimit/4)
		if res, raw := ts.Job(map[string]any{"job_id": job}); !strings.Contains(testkit.ResultText(raw), share) || !strings.Contains(res.Stopped, share) {
			t.Errorf("the job over its share of the watches (stopped %q): %s", res.Stopped, testkit.ResultText(raw))
		}
		if b.Name == "bwrap" {
			waitWatch(t, ts, "watching")
		}
		if res, raw := ts.Exec(map[string]any{"command": "echo after"}); res.Stdout != "after\n" {
			t.Errorf("a call after: %s", testkit.ResultText(raw))
		}
	})
}

// makeBlind makes directories in project until the server's watch of it
// is blind. The first may be watched still: a watch another process of
// the namespace let go (the server's watch of its jail lets go of a
// directory the jail removed) goes to whoever asks first, the host's
// program or the server. The host's program never lets go of one, so
// that each directory the server watches takes one of the few others
// left: the server runs out after as many as those (19 here).
func makeBlind(t *testing.T, ts *testkit.Server, project string) {
	t.Helper()
	for i := 0; i <= 200; i++ {
		if i > 0 {
			if err := os.Mkdir(filepath.Join(project, fmt.Sprintf("more-%d", i)), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if st := ts.Status(); strings.HasPrefix(st.ViewWatch, "blind") {
				t.Logf("view_watch after %d more directories: %s", i, st.ViewWatch)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Fatalf("view_watch stays %q with every watch taken", ts.Status().ViewWatch)
}

// waitWatch waits until jail_status's view_watch begins with want.
func waitWatch(t *testing.T, ts *testkit.Server, want string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st := ts.Status()
		if strings.HasPrefix(st.ViewWatch, want) {
			t.Logf("view_watch: %s", st.ViewWatch)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("view_watch stays %q, want %s", st.ViewWatch, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
