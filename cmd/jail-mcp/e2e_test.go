package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

func TestWritesOnlyInsideTheJail(t *testing.T) {
	project := newProject(t)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, project, serverEnv(), "--session", "w")
	jail := filepath.Join(project, ".agent-home", "w")
	marker := fmt.Sprintf("jail-mcp-test-%d", time.Now().UnixNano())

	res, _ := ts.exec(map[string]any{"command": "echo inside > $HOME/in.txt && cat $HOME/in.txt"})
	if res.ExitCode != 0 || res.Stdout != "inside\n" || !res.Confined || res.Backend != "bwrap" {
		t.Fatalf("write in the jail: %+v", res)
	}
	if got := mustRead(t, filepath.Join(jail, "in.txt")); got != "inside\n" {
		t.Errorf("jail file = %q", got)
	}

	for _, target := range []string{
		filepath.Join(project, marker),
		filepath.Join("/tmp", marker),
		filepath.Join(home, marker),
		filepath.Join("/etc", marker),
		filepath.Join(project, ".agent-home", marker),
		filepath.Join(project, ".agent-home", "other-session", marker),
		filepath.Join("/var/tmp", marker),
	} {
		t.Run(target, func(t *testing.T) {
			res, _ := ts.exec(map[string]any{"argv": []string{"/bin/sh", "-c", `echo x > "$1"`, "sh", target}})
			if res.ExitCode == 0 {
				t.Errorf("write to %s succeeded", target)
			}
			if fileExists(target) {
				os.Remove(target)
				t.Errorf("%s exists on the host", target)
			}
		})
	}
	t.Run("project file unchanged", func(t *testing.T) {
		f := filepath.Join(project, "keep.txt")
		os.WriteFile(f, []byte("keep"), 0o644)
		res, _ := ts.exec(map[string]any{"command": "echo gone > keep.txt; rm -f keep.txt; mv keep.txt x; chmod 777 keep.txt; touch -d 2000-01-01 keep.txt"})
		if res.ExitCode == 0 {
			t.Errorf("changing the project succeeded: %+v", res)
		}
		if got := mustRead(t, f); got != "keep" {
			t.Errorf("project file = %q", got)
		}
	})
}

func TestJailEnvironment(t *testing.T) {
	project := newProject(t)
	ts := startServer(t, project, serverEnv("SSH_AUTH_SOCK=/tmp/agent.sock", "SECRET_TOKEN=hunter2", "MY_VAR=passed"), "--session", "env", "--pass-env", "MY_*")
	jail := filepath.Join(project, ".agent-home", "env")
	res, _ := ts.exec(map[string]any{"command": "env"})
	env := map[string]string{}
	for _, line := range strings.Split(res.Stdout, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	want := map[string]string{
		"HOME":            jail,
		"TMPDIR":          jail + "/.tmp",
		"XDG_CONFIG_HOME": jail + "/.config",
		"XDG_CACHE_HOME":  jail + "/.cache",
		"XDG_DATA_HOME":   jail + "/.local/share",
		"XDG_STATE_HOME":  jail + "/.local/state",
		"XDG_RUNTIME_DIR": jail + "/.runtime",
		"MY_VAR":          "passed",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	for _, k := range []string{"SSH_AUTH_SOCK", "SECRET_TOKEN", asServer} {
		if _, ok := env[k]; ok {
			t.Errorf("%s leaked into the jail", k)
		}
	}
	// Every XDG directory exists and is writable.
	res, _ = ts.exec(map[string]any{"command": `for d in "$TMPDIR" "$XDG_CONFIG_HOME" "$XDG_CACHE_HOME" "$XDG_DATA_HOME" "$XDG_STATE_HOME" "$XDG_RUNTIME_DIR"; do touch "$d/f" || exit 1; done`})
	if res.ExitCode != 0 {
		t.Errorf("XDG directories not writable: %+v", res)
	}
	// A request's env is added; only fds 0-2 reach the child.
	res, _ = ts.exec(map[string]any{"command": `echo "$EXTRA"; ls /proc/self/fd`, "env": map[string]any{"EXTRA": "v a l"}})
	if !strings.HasPrefix(res.Stdout, "v a l\n") {
		t.Errorf("request env: %q", res.Stdout)
	}
	fds := strings.Fields(strings.TrimPrefix(res.Stdout, "v a l\n"))
	// ls itself opens one descriptor for the directory it lists.
	if len(fds) > 4 || fds[0] != "0" || fds[1] != "1" || fds[2] != "2" {
		t.Errorf("child fds: %v", fds)
	}
}

func TestSessionsPersistAndSeparate(t *testing.T) {
	project := newProject(t)
	a := startServer(t, project, serverEnv(), "--session", "alpha")
	if res, _ := a.exec(map[string]any{"command": "echo one > $HOME/note"}); res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	if res, _ := a.exec(map[string]any{"command": "cat $HOME/note"}); res.Stdout != "one\n" {
		t.Errorf("second call of one session: %+v", res)
	}
	a.c.Close()

	again := startServer(t, project, serverEnv(), "--session", "alpha")
	if res, _ := again.exec(map[string]any{"command": "cat $HOME/note"}); res.Stdout != "one\n" {
		t.Errorf("after restart with the same --session: %+v", res)
	}
	b := startServer(t, project, serverEnv(), "--session", "beta")
	if res, _ := b.exec(map[string]any{"command": "cat $HOME/note"}); res.ExitCode == 0 {
		t.Errorf("session beta sees alpha's file: %+v", res)
	}
	if res, _ := b.exec(map[string]any{"command": "echo two > " + filepath.Join(project, ".agent-home", "alpha", "note")}); res.ExitCode == 0 {
		t.Errorf("session beta wrote into alpha's jail")
	}
	if got := mustRead(t, filepath.Join(project, ".agent-home", "alpha", "note")); got != "one\n" {
		t.Errorf("alpha's note = %q", got)
	}
	if got := mustRead(t, filepath.Join(project, ".agent-home", ".gitignore")); got != "*\n" {
		t.Errorf(".gitignore = %q", got)
	}
	// A new UUID when no --session is given.
	u := startServer(t, project, serverEnv())
	st := u.status()
	if len(st.Session) != 36 || st.Jail != filepath.Join(project, ".agent-home", st.Session) {
		t.Errorf("default session: %q %q", st.Session, st.Jail)
	}
}

func TestTimeoutKillsTheWholeTree(t *testing.T) {
	project := newProject(t)
	ts := startServer(t, project, serverEnv(), "--session", "timeout")
	marker := "987654." + strconv.Itoa(os.Getpid())
	start := time.Now()
	res, raw := ts.exec(map[string]any{"command": fmt.Sprintf("sleep %s & sleep %s", marker, marker), "timeout_ms": 1000})
	elapsed := time.Since(start)
	if !res.TimedOut || res.Limit != "timeout" || !raw.IsError || res.ExitCode != -1 || res.Signal != "SIGKILL" {
		t.Errorf("result: %+v", res)
	}
	if elapsed > 2*time.Second {
		t.Errorf("returned %v after the call, more than a second past the 1 s deadline", elapsed)
	}
	if pids := processesWith(marker); len(pids) > 0 {
		t.Errorf("left running: %v", pids)
	}
	if !strings.Contains(text(raw), "timed out") {
		t.Errorf("text: %q", text(raw))
	}
}

func TestCancelKillsTheCommand(t *testing.T) {
	project := newProject(t)
	ts := startServer(t, project, serverEnv(), "--session", "cancel")
	marker := "876543." + strconv.Itoa(os.Getpid())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := ts.call(ctx, "jailed_exec", map[string]any{"command": fmt.Sprintf("sleep %s & sleep %s", marker, marker)})
		done <- err
	}()
	// bwrap, the shell and both sleeps carry the marker.
	if !waitFor(10*time.Second, func() bool { return len(processesWith("sleep "+marker)) >= 2 }) {
		t.Fatalf("command did not start; running: %v", processesWith(marker))
	}
	cancel()
	if err := <-done; err == nil {
		t.Error("cancelled call returned no error")
	}
	if !waitFor(3*time.Second, func() bool { return len(processesWith(marker)) == 0 }) {
		t.Errorf("left running after cancel: %v", processesWith(marker))
	}
	if !waitFor(3*time.Second, func() bool { return ts.status().Running == 0 }) {
		t.Error("status still counts the cancelled command")
	}
	// The server keeps serving.
	if res, _ := ts.exec(map[string]any{"argv": []string{"true"}}); res.ExitCode != 0 {
		t.Errorf("after cancel: %+v", res)
	}
}

func TestLargeOutputIsBounded(t *testing.T) {
	project := newProject(t)
	ts := startServer(t, project, serverEnv(), "--session", "big")
	const total = 100 << 20
	res, raw := ts.exec(map[string]any{"command": fmt.Sprintf("head -c %d /dev/zero | tr '\\000' a; echo tail-marker", total)})
	if res.ExitCode != 0 || raw.IsError {
		t.Fatalf("result: %+v", res)
	}
	if res.StdoutBytes != total+12 || !res.StdoutTruncated {
		t.Errorf("stdout_bytes %d truncated %t", res.StdoutBytes, res.StdoutTruncated)
	}
	if len(res.Stdout) > 65536 {
		t.Errorf("inline stdout is %d bytes", len(res.Stdout))
	}
	if !strings.Contains(res.Stdout, "bytes left out") || !strings.HasSuffix(res.Stdout, "tail-marker\n") || !strings.HasPrefix(res.Stdout, "aaaa") {
		t.Errorf("inline stdout lacks head, marker or tail: %q ... %q", res.Stdout[:40], res.Stdout[len(res.Stdout)-200:])
	}
	if !strings.HasPrefix(res.OutputPath, filepath.Join(project, ".agent-home", "big")+"/") {
		t.Fatalf("output_path %q not in the jail", res.OutputPath)
	}
	fi, err := os.Stat(filepath.Join(res.OutputPath, "stdout"))
	if err != nil || fi.Size() != 64<<20 {
		t.Errorf("kept output: %v %v", fi, err)
	}
	if st, err := os.Stat(filepath.Join(res.OutputPath, "stderr")); err != nil || st.Size() != 0 {
		t.Errorf("kept stderr: %v %v", st, err)
	}
	if hwm := peakRSS(t, ts.cmd.Process.Pid); hwm > 64<<20 {
		t.Errorf("server peak RSS %d MiB while the command printed 100 MiB", hwm>>20)
	}

	// A whole output that fits is kept whole in the file.
	res, _ = ts.exec(map[string]any{"command": "seq 1 100000", "timeout_ms": 30000})
	if !res.StdoutTruncated {
		t.Fatalf("seq output not truncated: %d bytes", res.StdoutBytes)
	}
	want, _ := exec.Command("seq", "1", "100000").Output()
	if got := mustRead(t, filepath.Join(res.OutputPath, "stdout")); got != string(want) {
		t.Errorf("kept output differs from seq's (%d vs %d bytes)", len(got), len(want))
	}
}

// peakRSS reads the high-water mark of a process's resident memory.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

func TestBadInputIsRefusedInOneLine(t *testing.T) {
	project := newProject(t)
	os.WriteFile(filepath.Join(project, "file"), nil, 0o644)
	ts := startServer(t, project, serverEnv(), "--session", "bad", "--network", "off")
	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"nothing", map[string]any{}, "give one of command"},
		{"both", map[string]any{"command": "true", "argv": []string{"true"}}, "exactly one"},
		{"empty command", map[string]any{"command": ""}, "command is empty"},
		{"empty argv", map[string]any{"argv": []string{}}, "argv is empty"},
		{"argv not array", map[string]any{"argv": "true"}, "argument argv"},
		{"argv number", map[string]any{"argv": []any{1}}, "argument argv"},
		{"unknown", map[string]any{"command": "true", "shell": "bash"}, `unknown argument "shell"`},
		{"cwd outside", map[string]any{"command": "true", "cwd": "/etc"}, "outside the project"},
		{"cwd missing", map[string]any{"command": "true", "cwd": "nope"}, "no such directory"},
		{"cwd file", map[string]any{"command": "true", "cwd": "file"}, "not a directory"},
		{"cwd other jail", map[string]any{"command": "true", "cwd": ".agent-home"}, "not this session's jail"},
		{"env HOME", map[string]any{"command": "true", "env": map[string]any{"HOME": "/"}}, "reserved"},
		{"env XDG", map[string]any{"command": "true", "env": map[string]any{"XDG_CONFIG_HOME": "/"}}, "reserved"},
		{"env TMPDIR", map[string]any{"command": "true", "env": map[string]any{"TMPDIR": "/"}}, "reserved"},
		{"env bad name", map[string]any{"command": "true", "env": map[string]any{"A-B": "x"}}, "not a valid variable name"},
		{"env not string", map[string]any{"command": "true", "env": map[string]any{"A": 1}}, "argument env"},
		{"timeout zero", map[string]any{"command": "true", "timeout_ms": 0}, "positive"},
		{"timeout negative", map[string]any{"command": "true", "timeout_ms": -5}, "positive"},
		{"timeout fraction", map[string]any{"command": "true", "timeout_ms": 1.5}, "timeout_ms"},
		{"timeout string", map[string]any{"command": "true", "timeout_ms": "10"}, "timeout_ms"},
		{"network on when off", map[string]any{"command": "true", "network": true}, "network"},
		{"network not bool", map[string]any{"command": "true", "network": "no"}, "argument network"},
		{"auth unknown", map[string]any{"command": "true", "auth": []string{"nope"}}, "unknown CLI"},
		{"stdin not string", map[string]any{"command": "true", "stdin": 5}, "argument stdin"},
		{"NUL in command", map[string]any{"command": "echo \x00"}, "NUL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, res := ts.exec(tc.args)
			if !res.IsError || res.StructuredContent != nil {
				t.Fatalf("not refused: %+v", res)
			}
			if line := oneLineText(t, res); !strings.Contains(line, tc.want) {
				t.Errorf("got %q, want it to mention %q", line, tc.want)
			}
		})
	}
	for _, tool := range []string{"jail_status", "jail_reset"} {
		res, err := ts.call(t.Context(), tool, map[string]any{"x": 1})
		if err != nil || !res.IsError {
			t.Errorf("%s with an unknown argument: %v %+v", tool, err, res)
		}
	}
	res, err := ts.call(t.Context(), "no_such_tool", nil)
	if err == nil && !res.IsError {
		t.Errorf("unknown tool accepted")
	}
	// The server still serves, and the refusals changed nothing.
	if res, _ := ts.exec(map[string]any{"command": "echo still here", "network": false}); res.Stdout != "still here\n" {
		t.Errorf("after bad input: %+v", res)
	}
	entries, _ := os.ReadDir(project)
	if len(entries) != 2 { // file and .agent-home
		t.Errorf("project changed: %v", entries)
	}
}

func TestExitStatusAndStdin(t *testing.T) {
	project := newProject(t)
	ts := startServer(t, project, serverEnv(), "--session", "io")
	res, raw := ts.exec(map[string]any{"command": "echo out; echo err >&2; exit 3"})
	if res.ExitCode != 3 || !raw.IsError || res.Stdout != "out\n" || res.Stderr != "err\n" {
		t.Errorf("exit 3: %+v", res)
	}
	if !strings.HasPrefix(text(raw), "exit 3") {
		t.Errorf("text: %q", text(raw))
	}
	res, raw = ts.exec(map[string]any{"argv": []string{"cat"}, "stdin": "given\n"})
	if res.Stdout != "given\n" || raw.IsError {
		t.Errorf("stdin: %+v", res)
	}
	// Without stdin the command reads end of file at once: it never
	// inherits the server's stdin, which is the JSON-RPC pipe.
	res, _ = ts.exec(map[string]any{"argv": []string{"cat"}, "timeout_ms": 5000})
	if res.TimedOut || res.Stdout != "" || res.ExitCode != 0 {
		t.Errorf("empty stdin: %+v", res)
	}
	res, raw = ts.exec(map[string]any{"command": "kill -9 $$"})
	if !raw.IsError || res.ExitCode == 0 {
		t.Errorf("killed by a signal: %+v", res)
	}
	res, raw = ts.exec(map[string]any{"argv": []string{"/nonexistent/program"}})
	if !raw.IsError || res.ExitCode == 0 {
		t.Errorf("missing program: %+v %q", res, text(raw))
	}
	res, _ = ts.exec(map[string]any{"command": "pwd", "cwd": ".agent-home/io/.cache"})
	if res.Stdout != filepath.Join(project, ".agent-home/io/.cache")+"\n" {
		t.Errorf("cwd in the jail: %+v", res)
	}
	os.Mkdir(filepath.Join(project, "sub"), 0o755)
	res, _ = ts.exec(map[string]any{"command": "pwd", "cwd": "sub"})
	if res.Stdout != filepath.Join(project, "sub")+"\n" {
		t.Errorf("relative cwd: %+v", res)
	}
	res, _ = ts.exec(map[string]any{"command": "cat /proc/net/dev | wc -l", "network": false})
	if strings.TrimSpace(res.Stdout) != "3" { // two header lines and lo
		t.Errorf("network off still sees interfaces: %q", res.Stdout)
	}
}

func TestBackgroundChildCannotStallACall(t *testing.T) {
	project := newProject(t)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"bwrap", serverEnv(), nil},
		{"unconfined", serverEnv("PATH=/nonexistent:/usr/bin:/bin"), []string{"--fallback", "warn"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			marker := "765432." + strconv.Itoa(os.Getpid())
			ts := startServer(t, project, tc.env, append([]string{"--session", "bg-" + tc.name}, tc.args...)...)
			start := time.Now()
			res, _ := ts.exec(map[string]any{"command": fmt.Sprintf("(sleep %s &); echo started", marker), "timeout_ms": 30000})
			if res.Stdout != "started\n" || res.TimedOut {
				t.Errorf("result: %+v", res)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("a background child held the call for %v", d)
			}
			if tc.name == "bwrap" && !waitFor(2*time.Second, func() bool { return len(processesWith(marker)) == 0 }) {
				t.Errorf("background child outlived the call: %v", processesWith(marker))
			}
			for _, pid := range processesWith(marker) {
				if p, err := strconv.Atoi(pid); err == nil {
					if proc, err := os.FindProcess(p); err == nil {
						proc.Kill()
					}
				}
			}
		})
	}
}

func TestSixteenCallsRunConcurrently(t *testing.T) {
	project := newProject(t)
	ts := startServer(t, project, serverEnv(), "--session", "many")
	const n = 16
	// Each call announces itself and waits until all n have: with fewer
	// than n running at once, none would finish before its timeout.
	script := fmt.Sprintf(`touch "$HOME/.tmp/started.$1"; i=0; while [ "$(ls "$HOME/.tmp" | grep -c started)" -lt %d ]; do i=$((i+1)); [ $i -gt 400 ] && exit 9; sleep 0.05; done`, n)
	var wg sync.WaitGroup
	results := make([]int, n)
	for i := range n {
		wg.Go(func() {
			res, _ := ts.exec(map[string]any{"argv": []string{"/bin/sh", "-c", script, "sh", strconv.Itoa(i)}, "timeout_ms": 60000})
			results[i] = res.ExitCode
		})
	}
	wg.Wait()
	for i, code := range results {
		if code != 0 {
			t.Errorf("call %d exit %d: fewer than %d calls ran at once", i, code, n)
		}
	}
}

func TestProgressNotifications(t *testing.T) {
	project := newProject(t)
	ts := startServer(t, project, serverEnv(), "--session", "progress")
	req := mcp.CallToolRequest{}
	req.Params.Name = "jailed_exec"
	req.Params.Arguments = map[string]any{"command": "for i in 1 2 3 4 5; do echo line-$i; sleep 0.5; done"}
	req.Params.Meta = &mcp.Meta{ProgressToken: "tok-1"}
	res, err := ts.c.CallTool(t.Context(), req)
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	returned := time.Now()
	time.Sleep(1500 * time.Millisecond)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var progress []timedNote
	for _, n := range ts.notifications {
		if n.n.Method == "notifications/progress" {
			progress = append(progress, n)
		}
	}
	if len(progress) < 1 || len(progress) > 3 {
		t.Fatalf("%d progress notifications for a 2.5 s command, want 1 to 3", len(progress))
	}
	last := -1.0
	for i, n := range progress {
		f := n.n.Params.AdditionalFields
		if f["progressToken"] != "tok-1" {
			t.Errorf("token %v", f["progressToken"])
		}
		msg, _ := f["message"].(string)
		if !strings.HasPrefix(msg, "line-") {
			t.Errorf("message %q", msg)
		}
		p, _ := f["progress"].(float64)
		if p <= last {
			t.Errorf("progress not increasing: %v after %v", p, last)
		}
		last = p
		if n.at.After(returned) {
			t.Errorf("notification %d arrived after the result", i)
		}
		if i > 0 && n.at.Sub(progress[i-1].at) < 900*time.Millisecond {
			t.Errorf("two notifications %v apart", n.at.Sub(progress[i-1].at))
		}
	}
}

func TestResetKillsAndNeverFollowsSymlinks(t *testing.T) {
	project := newProject(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "precious"), []byte("keep"), 0o644)
	ts := startServer(t, project, serverEnv(), "--session", "reset")
	res, _ := ts.exec(map[string]any{"command": fmt.Sprintf(`mkdir -p a/b && echo 12345 > a/b/f && ln -s %s link && ln -s %s/precious flink && echo x > top`, outside, outside), "cwd": ".agent-home/reset"})
	if res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	marker := "654321." + strconv.Itoa(os.Getpid())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ts.call(t.Context(), "jailed_exec", map[string]any{"command": "sleep " + marker})
	}()
	if !waitFor(10*time.Second, func() bool { return len(processesWith(marker)) > 0 }) {
		t.Fatal("command did not start")
	}
	rr, err := ts.call(t.Context(), "jail_reset", nil)
	if err != nil || rr.IsError {
		t.Fatalf("reset: %v %+v", err, rr)
	}
	var out struct {
		RemovedFiles int64 `json:"removed_files"`
		Killed       int   `json:"killed"`
	}
	decodeStructured(t, rr, &out)
	if out.Killed != 1 || out.RemovedFiles < 4 {
		t.Errorf("reset result %+v", out)
	}
	<-done
	if pids := processesWith(marker); len(pids) > 0 {
		t.Errorf("reset left %v running", pids)
	}
	if got := mustRead(t, filepath.Join(outside, "precious")); got != "keep" {
		t.Errorf("symlink target changed: %q", got)
	}
	jail := filepath.Join(project, ".agent-home", "reset")
	entries, _ := os.ReadDir(jail)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != ".cache .config .local .runtime .tmp" {
		t.Errorf("jail after reset: %v", names)
	}
	if st := ts.status(); st.Usage.Files != 0 || st.Running != 0 {
		t.Errorf("status after reset: %+v", st)
	}
}

func TestStatus(t *testing.T) {
	project := newProject(t)
	ts := startServer(t, project, serverEnv(), "--session", "st", "--network", "off", "--timeout", "30s")
	ts.exec(map[string]any{"command": "printf 12345 > $HOME/f"})
	st := ts.status()
	if st.Session != "st" || st.Project != project || st.Jail != filepath.Join(project, ".agent-home", "st") ||
		st.Backend != "bwrap" || !st.Available || !st.Confined || st.Network || st.Usage.Files != 1 ||
		st.Usage.Bytes != 5 || st.Limits.TimeoutMS != 30000 || st.Version == "" || len(st.Guarantees.Kept) == 0 {
		t.Errorf("status: %+v", st)
	}
}

func TestBwrapMissingFailsClosed(t *testing.T) {
	project := newProject(t)
	env := serverEnv("PATH=/nonexistent")
	ts := startServer(t, project, env, "--session", "nobwrap")
	_, res := ts.exec(map[string]any{"argv": []string{"/bin/echo", "hi"}})
	if !res.IsError || res.StructuredContent != nil {
		t.Fatalf("ran without a jail: %+v", res)
	}
	if line := oneLineText(t, res); !strings.Contains(line, "bubblewrap") || !strings.Contains(line, "apt-get install bubblewrap") {
		t.Errorf("refusal %q lacks the reason or the fix", line)
	}
	st := ts.status()
	if st.Available || st.Confined || st.Reason == "" || st.Hint == "" {
		t.Errorf("status: %+v", st)
	}

	warn := startServer(t, project, env, "--session", "nobwrap", "--fallback", "warn")
	r, raw := warn.exec(map[string]any{"argv": []string{"/bin/echo", "hi"}})
	if r.Confined || r.Stdout != "hi\n" || r.Backend != "none" || !strings.Contains(text(raw), "UNCONFINED") {
		t.Errorf("fallback warn: %+v %q", r, text(raw))
	}
	if st := warn.status(); st.Confined || !st.Available {
		t.Errorf("fallback warn status: %+v", st)
	}
}

// TestStdoutIsOnlyJSONRPC drives the server with raw lines and checks that
// every line it writes on stdout is a JSON-RPC message, whatever the
// command prints and whatever the server logs.
func TestStdoutIsOnlyJSONRPC(t *testing.T) {
	project := newProject(t)
	cmd := exec.Command(os.Args[0], "serve", "--project", project, "--session", "raw", "--log-level", "debug")
	cmd.Env = serverEnv()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"jailed_exec","arguments":{"command":"echo not-json; echo also-not >&2; cat /dev/tty 2>/dev/null; exit 0"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"jailed_exec","arguments":{"bogus":1}}}`,
		`this is not json`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"jail_status"}}`,
	}
	go func() {
		for _, l := range lines {
			io.WriteString(stdin, l+"\n")
		}
	}()
	got := map[float64]bool{}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for len(got) < 4 && sc.Scan() {
		var msg map[string]any
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil || msg["jsonrpc"] != "2.0" {
			t.Errorf("stdout line is not JSON-RPC: %q", sc.Text())
			continue
		}
		if id, ok := msg["id"].(float64); ok {
			got[id] = true
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("server exit on EOF: %v", err)
	}
	rest, _ := io.ReadAll(stdout)
	if len(strings.TrimSpace(string(rest))) > 0 {
		t.Errorf("trailing stdout: %q", rest)
	}
	if !strings.Contains(stderr.String(), "starting") {
		t.Errorf("no starting line on stderr: %s", stderr.String())
	}
}

// TestServerDeathKillsCommands: whether the server is told to stop
// (SIGTERM, or EOF on stdin) or killed outright, nothing a command started
// outlives it, setsid and double-forked children included.
func TestServerDeathKillsCommands(t *testing.T) {
	for _, how := range []string{"SIGTERM", "SIGKILL", "EOF"} {
		t.Run(how, func(t *testing.T) {
			project := newProject(t)
			ts := startServer(t, project, serverEnv(), "--session", "death")
			marker := fmt.Sprintf("543210.%d%d", os.Getpid(), len(how))
			go ts.call(context.WithoutCancel(t.Context()), "jailed_exec", map[string]any{
				"command": fmt.Sprintf("setsid sleep %s & (sleep %s &); sleep %s", marker, marker, marker),
			})
			if !waitFor(10*time.Second, func() bool { return len(processesWith("sleep "+marker)) >= 3 }) {
				t.Fatalf("command did not start: %v", processesWith(marker))
			}
			switch how {
			case "SIGTERM":
				ts.cmd.Process.Signal(syscall.SIGTERM)
			case "SIGKILL":
				ts.cmd.Process.Kill()
			case "EOF":
				ts.c.Close()
			}
			if !waitFor(5*time.Second, func() bool { return len(processesWith(marker)) == 0 }) {
				t.Errorf("left running after %s: %v", how, processesWith(marker))
			}
			if how == "SIGTERM" {
				err := ts.cmd.Wait()
				if err != nil && !strings.Contains(err.Error(), "already") {
					t.Errorf("exit after SIGTERM: %v", err)
				}
			}
		})
	}
}

// TestCredentialsOverMCP: jail_status lists what is exposed (names, places
// and variable names, never values), and a call narrows it.
func TestCredentialsOverMCP(t *testing.T) {
	project := newProject(t)
	home := t.TempDir()
	for _, f := range []string{".config/gh/hosts.yml", ".codex/auth.json"} {
		os.MkdirAll(filepath.Join(home, filepath.Dir(f)), 0o700)
		os.WriteFile(filepath.Join(home, f), []byte("secret-"+filepath.Base(f)), 0o600)
	}
	env := serverEnv("GH_TOKEN=gh-secret-value", "OPENAI_API_KEY=sk-secret-value")
	env = append(slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "HOME=") }), "HOME="+home)
	ts := startServer(t, project, env, "--session", "cred", "--auth", "gh,codex")
	st := ts.status()
	raw, _ := json.Marshal(st.Auth)
	if strings.Contains(string(raw), "secret") {
		t.Errorf("status shows a secret: %s", raw)
	}
	jail := filepath.Join(project, ".agent-home", "cred")
	want := `[{"name":"codex","paths":["` + jail + `/.codex"],"env":["OPENAI_API_KEY"]},{"name":"gh","paths":["` + jail + `/.config/gh"],"env":["GH_TOKEN"]}]`
	if string(raw) != want {
		t.Errorf("status auth:\n got %s\nwant %s", raw, want)
	}
	res, _ := ts.exec(map[string]any{"command": `cat ~/.config/gh/hosts.yml ~/.codex/auth.json; echo " $GH_TOKEN $OPENAI_API_KEY"`})
	if res.Stdout != "secret-hosts.ymlsecret-auth.json gh-secret-value sk-secret-value\n" {
		t.Errorf("all enabled: %q %q", res.Stdout, res.Stderr)
	}
	res, _ = ts.exec(map[string]any{"command": `cat ~/.config/gh/hosts.yml ~/.codex/auth.json 2>/dev/null; echo " $GH_TOKEN $OPENAI_API_KEY"`, "auth": []string{"gh"}})
	if res.Stdout != "secret-hosts.yml gh-secret-value \n" {
		t.Errorf("narrowed to gh: %q", res.Stdout)
	}
	_, refused := ts.exec(map[string]any{"command": "true", "auth": []string{"claude"}})
	if !refused.IsError || !strings.Contains(oneLineText(t, refused), "not enabled by the operator") {
		t.Errorf("widening not refused: %q", text(refused))
	}
	none := startServer(t, project, env, "--session", "cred-none", "--auth", "none")
	if st := none.status(); len(st.Auth) != 0 {
		t.Errorf("--auth none exposes %+v", st.Auth)
	}
	res, _ = none.exec(map[string]any{"command": `cat ~/.config/gh/hosts.yml 2>/dev/null; echo "[$GH_TOKEN]"`})
	if res.Stdout != "[]\n" {
		t.Errorf("--auth none: %q", res.Stdout)
	}
}
