package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/cli"
	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/tools"
)

// e2eMarkerDigits tells the backends apart in the numeric markers the
// tests pass to sleep, so that what one arm leaves behind never counts
// in the other's.
func e2eMarkerDigits(b testkit.Backend) string {
	return strconv.Itoa(len(b.Name))
}

func TestWritesOnlyInsideTheJail(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		// The read-only project (no view): under --overlay auto a write
		// in the project lands in the session's layer, which the overlay
		// tests and the escape suite check.
		ts := b.Start(t, project, testkit.ServerEnv(), "--session", "w", "--overlay", "off")
		jail := filepath.Join(project, ".agent-home", "w")
		marker := fmt.Sprintf("jail-mcp-test-%d", time.Now().UnixNano())

		res, _ := ts.Exec(map[string]any{"command": "echo inside > $HOME/in.txt && cat $HOME/in.txt"})
		if res.ExitCode != 0 || res.Stdout != "inside\n" || !res.Confined || res.Backend != b.Name {
			t.Fatalf("write in the jail: %+v", res)
		}
		if got := testkit.MustRead(t, filepath.Join(jail, "in.txt")); got != "inside\n" {
			t.Errorf("jail file = %q", got)
		}
		t.Run("metadata in the jail", func(t *testing.T) {
			if b.Name == "landlock" && os.Geteuid() == 0 {
				// Documented: as root, the landlock backend denies chmod
				// and chown everywhere, the jail too (root owns the
				// host's files and Landlock does not see metadata).
				res, _ := ts.Exec(map[string]any{"command": `echo x > "$HOME/r" && chmod 755 "$HOME/r"`})
				if res.ExitCode == 0 || !strings.Contains(res.Stderr, "Operation not permitted") {
					t.Errorf("chmod as root under landlock: exit %d stderr %q, want Operation not permitted", res.ExitCode, res.Stderr)
				}
				res, _ = ts.Exec(map[string]any{"command": `touch -d 2001-01-01 "$HOME/r"`})
				if res.ExitCode != 0 {
					t.Errorf("utime in the jail: exit %d stderr %q", res.ExitCode, res.Stderr)
				}
				return
			}
			// The jail is the command's own: it makes a script executable
			// and dates a file as it likes (tar, npm and codex all do).
			res, _ := ts.Exec(map[string]any{"command": `printf '#!/bin/sh\necho ran\n' > "$HOME/s.sh" && chmod 755 "$HOME/s.sh" && "$HOME/s.sh" && touch -d 2001-01-01 "$HOME/s.sh"`})
			if res.ExitCode != 0 || res.Stdout != "ran\n" {
				t.Errorf("chmod and utime of a file in the jail: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			if fi, err := os.Stat(filepath.Join(jail, "s.sh")); err != nil {
				t.Error(err)
			} else if fi.Mode() != 0o755 || fi.ModTime().Year() != 2001 {
				t.Errorf("s.sh in the jail: mode %v mtime %v, want -rwxr-xr-x and 2001", fi.Mode(), fi.ModTime())
			}
		})

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
				res, _ := ts.Exec(map[string]any{"argv": []string{"/bin/sh", "-c", `echo x > "$1"`, "sh", target}})
				if res.ExitCode == 0 {
					t.Errorf("write to %s succeeded", target)
				}
				if testkit.FileExists(target) {
					os.Remove(target)
					t.Errorf("%s exists on the host", target)
				}
			})
		}
		t.Run("project file unchanged", func(t *testing.T) {
			f := filepath.Join(project, "keep.txt")
			if err := os.WriteFile(f, []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
			past := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
			if err := os.Chtimes(f, past, past); err != nil {
				t.Fatal(err)
			}
			// landlock: Landlock does not see metadata changes, so
			// jail_status lists promise 1 as not kept, naming chmod and
			// utime; as root, seccomp denies chmod all the same.
			var notKept string
			if b.Name == "landlock" {
				for _, p := range ts.Status().Guarantees.NotKept {
					if p.ID == 1 {
						notKept = p.Note
					}
				}
				if !strings.Contains(notKept, "chmod") || !strings.Contains(notKept, "utime") {
					t.Errorf("landlock does not list promise 1 as not kept for chmod and utime: %q", notKept)
				}
			}
			for _, op := range []struct {
				name, script string
				// meta: the operation changes metadata only
				meta bool
			}{
				{"write", "echo gone > keep.txt", false},
				{"append", "echo more >> keep.txt", false},
				{"truncate", ": > keep.txt", false},
				{"remove", "rm -f keep.txt", false},
				{"rename", "mv keep.txt x", false},
				{"hard link", "ln keep.txt x", false},
				{"chmod", "chmod 777 keep.txt", true},
				{"utime", "touch -d 2000-01-01 keep.txt", true},
			} {
				t.Run(op.name, func(t *testing.T) {
					res, _ := ts.Exec(map[string]any{"command": op.script})
					if got := testkit.MustRead(t, f); got != "keep" {
						t.Errorf("project file = %q", got)
					}
					if testkit.FileExists(filepath.Join(project, "x")) {
						t.Errorf("%q created a file in the project", op.script)
					}
					fi, err := os.Stat(f)
					if err != nil {
						t.Fatal(err)
					}
					// landlock: a change of metadata alone is not promised
					// (see above), but a root server's chmod is refused.
					mustRefuse := !op.meta || b.Name == "bwrap" || (op.name == "chmod" && os.Geteuid() == 0)
					if !mustRefuse {
						t.Logf("not promised under landlock: %s: exit %d, mode %v, mtime %v", op.script, res.ExitCode, fi.Mode(), fi.ModTime().UTC())
						os.Chmod(f, 0o644)
						os.Chtimes(f, past, past)
						return
					}
					if res.ExitCode == 0 {
						t.Errorf("%q succeeded: %+v", op.script, res)
					}
					if fi.Mode() != 0o644 || !fi.ModTime().Equal(past) {
						t.Errorf("%q changed the project file: mode %v mtime %v", op.script, fi.Mode(), fi.ModTime())
					}
				})
			}
		})
	})
}

func TestJailEnvironment(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		ts := b.Start(t, project, testkit.ServerEnv("SSH_AUTH_SOCK=/tmp/agent.sock", "SECRET_TOKEN=hunter2", "MY_VAR=passed"), "--session", "env", "--pass-env", "MY_*")
		jail := filepath.Join(project, ".agent-home", "env")
		res, _ := ts.Exec(map[string]any{"command": "env"})
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
		for _, k := range []string{"SSH_AUTH_SOCK", "SECRET_TOKEN", testkit.AsServer} {
			if _, ok := env[k]; ok {
				t.Errorf("%s leaked into the jail", k)
			}
		}
		// Every XDG directory exists and is writable.
		res, _ = ts.Exec(map[string]any{"command": `for d in "$TMPDIR" "$XDG_CONFIG_HOME" "$XDG_CACHE_HOME" "$XDG_DATA_HOME" "$XDG_STATE_HOME" "$XDG_RUNTIME_DIR"; do touch "$d/f" || exit 1; done`})
		if res.ExitCode != 0 {
			t.Errorf("XDG directories not writable: %+v", res)
		}
		// A request's env is added; only fds 0-2 reach the child.
		res, _ = ts.Exec(map[string]any{"command": `echo "$EXTRA"; ls /proc/self/fd`, "env": map[string]any{"EXTRA": "v a l"}})
		if !strings.HasPrefix(res.Stdout, "v a l\n") {
			t.Errorf("request env: %q", res.Stdout)
		}
		fds := strings.Fields(strings.TrimPrefix(res.Stdout, "v a l\n"))
		// ls itself opens one descriptor for the directory it lists.
		if len(fds) < 3 || len(fds) > 4 || fds[0] != "0" || fds[1] != "1" || fds[2] != "2" {
			t.Errorf("child fds: %v", fds)
		}
	})
}

func TestSessionsPersistAndSeparate(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		a := b.Start(t, project, testkit.ServerEnv(), "--session", "alpha")
		if res, _ := a.Exec(map[string]any{"command": "echo one > $HOME/note"}); res.ExitCode != 0 {
			t.Fatalf("%+v", res)
		}
		if res, _ := a.Exec(map[string]any{"command": "cat $HOME/note"}); res.Stdout != "one\n" {
			t.Errorf("second call of one session: %+v", res)
		}
		a.Client.Close()

		again := b.Start(t, project, testkit.ServerEnv(), "--session", "alpha")
		if res, _ := again.Exec(map[string]any{"command": "cat $HOME/note"}); res.Stdout != "one\n" {
			t.Errorf("after restart with the same --session: %+v", res)
		}
		beta := b.Start(t, project, testkit.ServerEnv(), "--session", "beta")
		if res, _ := beta.Exec(map[string]any{"command": "cat $HOME/note"}); res.ExitCode == 0 {
			t.Errorf("session beta sees alpha's file: %+v", res)
		}
		if res, _ := beta.Exec(map[string]any{"command": "echo two > " + filepath.Join(project, ".agent-home", "alpha", "note")}); res.ExitCode == 0 {
			t.Errorf("session beta wrote into alpha's jail")
		}
		if got := testkit.MustRead(t, filepath.Join(project, ".agent-home", "alpha", "note")); got != "one\n" {
			t.Errorf("alpha's note = %q", got)
		}
		if got := testkit.MustRead(t, filepath.Join(project, ".agent-home", ".gitignore")); got != "*\n" {
			t.Errorf(".gitignore = %q", got)
		}
		// A new UUID when no --session is given.
		u := b.Start(t, project, testkit.ServerEnv())
		st := u.Status()
		if len(st.Session) != 36 || st.Jail != filepath.Join(project, ".agent-home", st.Session) {
			t.Errorf("default session: %q %q", st.Session, st.Jail)
		}
	})
}

func TestTimeoutKillsTheWholeTree(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		ts := b.Start(t, project, testkit.ServerEnv(), "--session", "timeout")
		marker := "987654." + strconv.Itoa(os.Getpid()) + e2eMarkerDigits(b)
		start := time.Now()
		res, raw := ts.Exec(map[string]any{"command": fmt.Sprintf("sleep %s & sleep %s", marker, marker), "timeout_ms": 1000})
		elapsed := time.Since(start)
		if !res.TimedOut || res.Limit != "timeout" || !raw.IsError || res.ExitCode != -1 || res.Signal != "SIGKILL" {
			t.Errorf("result: %+v", res)
		}
		if elapsed > 2*time.Second {
			t.Errorf("returned %v after the call, more than a second past the 1 s deadline", elapsed)
		}
		if pids := testkit.ProcessesWith(marker); len(pids) > 0 {
			t.Errorf("left running: %v", pids)
		}
		if !strings.Contains(testkit.ResultText(raw), "timed out") {
			t.Errorf("text: %q", testkit.ResultText(raw))
		}
	})
}

func TestCancelKillsTheCommand(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		ts := b.Start(t, project, testkit.ServerEnv(), "--session", "cancel")
		marker := "876543." + strconv.Itoa(os.Getpid()) + e2eMarkerDigits(b)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := ts.Call(ctx, "jailed_exec", map[string]any{"command": fmt.Sprintf("sleep %s & sleep %s", marker, marker)})
			done <- err
		}()
		// Both sleeps carry the marker (so do the shell and, under bwrap,
		// bwrap itself): wait for the sleeps.
		if !testkit.WaitFor(10*time.Second, func() bool { return len(testkit.ProcessesWith("sleep "+marker)) >= 2 }) {
			t.Fatalf("command did not start; running: %v", testkit.ProcessesWith(marker))
		}
		cancel()
		if err := <-done; err == nil {
			t.Error("cancelled call returned no error")
		}
		if !testkit.WaitFor(3*time.Second, func() bool { return len(testkit.ProcessesWith(marker)) == 0 }) {
			t.Errorf("left running after cancel: %v", testkit.ProcessesWith(marker))
		}
		if !testkit.WaitFor(3*time.Second, func() bool { return ts.Status().Running == 0 }) {
			t.Error("status still counts the cancelled command")
		}
		// The server keeps serving.
		if res, _ := ts.Exec(map[string]any{"argv": []string{"true"}}); res.ExitCode != 0 || res.Backend != b.Name {
			t.Errorf("after cancel: %+v", res)
		}
	})
}

func TestLargeOutputIsBounded(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		ts := b.Start(t, project, testkit.ServerEnv(), "--session", "big")
		const total = 100 << 20
		res, raw := ts.Exec(map[string]any{"command": fmt.Sprintf("head -c %d /dev/zero | tr '\\000' a; echo tail-marker", total)})
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
		if hwm := testkit.PeakRSS(t, ts.Cmd.Process.Pid); hwm > 64<<20 {
			t.Errorf("server peak RSS %d MiB while the command printed 100 MiB", hwm>>20)
		}

		// A whole output that fits is kept whole in the file.
		res, _ = ts.Exec(map[string]any{"command": "seq 1 100000", "timeout_ms": 30000})
		if !res.StdoutTruncated {
			t.Fatalf("seq output not truncated: %d bytes", res.StdoutBytes)
		}
		want, _ := exec.Command("seq", "1", "100000").Output()
		if got := testkit.MustRead(t, filepath.Join(res.OutputPath, "stdout")); got != string(want) {
			t.Errorf("kept output differs from seq's (%d vs %d bytes)", len(got), len(want))
		}
	})
}
func TestBadInputIsRefusedInOneLine(t *testing.T) {
	project := testkit.NewProject(t)
	os.WriteFile(filepath.Join(project, "file"), nil, 0o644)
	ts := testkit.StartServer(t, project, testkit.ServerEnv(), "--session", "bad", "--network", "off")
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
			_, res := ts.Exec(tc.args)
			if !res.IsError || res.StructuredContent != nil {
				t.Fatalf("not refused: %+v", res)
			}
			if line := testkit.OneLineText(t, res); !strings.Contains(line, tc.want) {
				t.Errorf("got %q, want it to mention %q", line, tc.want)
			}
		})
	}
	for _, tool := range []string{"jail_status", "jail_reset"} {
		res, err := ts.Call(t.Context(), tool, map[string]any{"x": 1})
		if err != nil || !res.IsError {
			t.Errorf("%s with an unknown argument: %v %+v", tool, err, res)
		}
	}
	res, err := ts.Call(t.Context(), "no_such_tool", nil)
	if err == nil && !res.IsError {
		t.Errorf("unknown tool accepted")
	}
	// The server still serves, and the refusals changed nothing.
	if res, _ := ts.Exec(map[string]any{"command": "echo still here", "network": false}); res.Stdout != "still here\n" {
		t.Errorf("after bad input: %+v", res)
	}
	entries, _ := os.ReadDir(project)
	if len(entries) != 2 { // file and .agent-home
		t.Errorf("project changed: %v", entries)
	}
}

func TestExitStatusAndStdin(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		ts := b.Start(t, project, testkit.ServerEnv(), "--session", "io")
		res, raw := ts.Exec(map[string]any{"command": "echo out; echo err >&2; exit 3"})
		if res.ExitCode != 3 || !raw.IsError || res.Stdout != "out\n" || res.Stderr != "err\n" {
			t.Errorf("exit 3: %+v", res)
		}
		if !strings.HasPrefix(testkit.ResultText(raw), "exit 3") {
			t.Errorf("text: %q", testkit.ResultText(raw))
		}
		res, raw = ts.Exec(map[string]any{"argv": []string{"cat"}, "stdin": "given\n"})
		if res.Stdout != "given\n" || raw.IsError {
			t.Errorf("stdin: %+v", res)
		}
		// Without stdin the command reads end of file at once: it never
		// inherits the server's stdin, which is the JSON-RPC pipe.
		res, _ = ts.Exec(map[string]any{"argv": []string{"cat"}, "timeout_ms": 5000})
		if res.TimedOut || res.Stdout != "" || res.ExitCode != 0 {
			t.Errorf("empty stdin: %+v", res)
		}
		res, raw = ts.Exec(map[string]any{"command": "kill -9 $$"})
		if !raw.IsError || res.ExitCode == 0 {
			t.Errorf("killed by a signal: %+v", res)
		}
		// The command is the child of the agent (or, in bwrap's direct
		// mode, of bwrap's init, which reports a signal as the status
		// 128+N).
		if (res.ExitCode != -1 || res.Signal != "SIGKILL") && (b.Name != "bwrap" || res.ExitCode != 128+9) {
			t.Errorf("killed by SIGKILL: exit %d signal %q, want -1 SIGKILL", res.ExitCode, res.Signal)
		}
		res, raw = ts.Exec(map[string]any{"argv": []string{"/nonexistent/program"}})
		// The agent looks the program up in the jail's view and refuses
		// it with a line that says so (bwrap's direct mode: bwrap fails
		// to exec, an exit status).
		if !raw.IsError || (raw.StructuredContent == nil && !strings.Contains(testkit.OneLineText(t, raw), "not found")) ||
			(raw.StructuredContent != nil && (b.Name != "bwrap" || res.ExitCode == 0)) {
			t.Errorf("missing program: %+v %q", res, testkit.ResultText(raw))
		}
		res, _ = ts.Exec(map[string]any{"command": "pwd", "cwd": ".agent-home/io/.cache"})
		if res.Stdout != filepath.Join(project, ".agent-home/io/.cache")+"\n" {
			t.Errorf("cwd in the jail: %+v", res)
		}
		os.Mkdir(filepath.Join(project, "sub"), 0o755)
		res, _ = ts.Exec(map[string]any{"command": "pwd", "cwd": "sub"})
		if res.Stdout != filepath.Join(project, "sub")+"\n" {
			t.Errorf("relative cwd: %+v", res)
		}
		// network: false cuts the host's loopback as well as the rest.
		tcp, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer tcp.Close()
		go func() {
			for {
				c, err := tcp.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		connect := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo connected", tcp.Addr().(*net.TCPAddr).Port)
		res, _ = ts.Exec(map[string]any{"argv": []string{"bash", "-c", connect}})
		if res.Stdout != "connected\n" {
			t.Errorf("network on: loopback TCP not reachable: %+v", res)
		}
		res, _ = ts.Exec(map[string]any{"argv": []string{"bash", "-c", connect}, "network": false})
		if res.ExitCode == 0 || res.Stdout != "" {
			t.Errorf("network off: loopback TCP reachable: %+v", res)
		}
		udp, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer udp.Close()
		send := fmt.Sprintf("echo datagram > /dev/udp/127.0.0.1/%d", udp.LocalAddr().(*net.UDPAddr).Port)
		res, _ = ts.Exec(map[string]any{"argv": []string{"bash", "-c", send}})
		udp.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, _, err := udp.ReadFrom(make([]byte, 64)); err != nil || res.ExitCode != 0 {
			t.Errorf("network on: no UDP datagram to loopback (exit %d, %d bytes, %v)", res.ExitCode, n, err)
		}
		res, _ = ts.Exec(map[string]any{"argv": []string{"bash", "-c", send}, "network": false})
		udp.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if n, _, err := udp.ReadFrom(make([]byte, 64)); err == nil {
			t.Errorf("network off: a UDP datagram reached the host (exit %d, %d bytes)", res.ExitCode, n)
		}
		// bwrap: the datagram goes to the call's own loopback and is lost
		// there. landlock: seccomp refuses the socket itself.
		if b.Name == "landlock" && res.ExitCode == 0 {
			t.Errorf("network off: a UDP socket could be used: %+v", res)
		}
		res, _ = ts.Exec(map[string]any{"command": "cat /proc/net/dev | wc -l", "network": false})
		// bwrap: the call has its own network namespace, with lo only.
		// landlock: no namespaces, so the host's interfaces are listed;
		// the sockets above are what is cut.
		if lines := strings.TrimSpace(res.Stdout); b.Name == "bwrap" && lines != "3" { // two header lines and lo
			t.Errorf("network off still sees interfaces: %q", res.Stdout)
		}
	})
}

func TestBackgroundChildCannotStallACall(t *testing.T) {
	try := func(t *testing.T, ts *testkit.Server, confined bool) {
		marker := "765432." + strconv.Itoa(os.Getpid()) + strconv.Itoa(len(t.Name()))
		start := time.Now()
		res, _ := ts.Exec(map[string]any{"command": fmt.Sprintf("(sleep %s &); setsid sleep %s & echo started", marker, marker), "timeout_ms": 30000})
		if res.Stdout != "started\n" || res.TimedOut || res.Confined != confined {
			t.Errorf("result: %+v", res)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("a background child held the call for %v", d)
		}
		if confined && !testkit.WaitFor(2*time.Second, func() bool { return len(testkit.ProcessesWith(marker)) == 0 }) {
			t.Errorf("background child outlived the call: %v", testkit.ProcessesWith(marker))
		}
		for _, pid := range testkit.ProcessesWith(marker) {
			if p, err := strconv.Atoi(pid); err == nil {
				if proc, err := os.FindProcess(p); err == nil {
					proc.Kill()
				}
			}
		}
	}
	project := testkit.NewProject(t)
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		try(t, b.Start(t, project, testkit.ServerEnv(), "--session", "bg-"+b.Name), true)
	})
	t.Run("unconfined", func(t *testing.T) {
		// bwrap asked for but absent, and --fallback warn: the command
		// runs unconfined; only the call must not stall.
		ts := testkit.StartServer(t, project, testkit.ServerEnv("PATH="+testkit.NoBwrapPath), "--session", "bg-unconfined", "--backend", "bwrap", "--fallback", "warn")
		if st := ts.Status(); st.Confined || st.Backend != "none" {
			t.Fatalf("not unconfined: backend %q confined %t", st.Backend, st.Confined)
		}
		try(t, ts, false)
	})
}

func TestSixteenCallsRunConcurrently(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		ts := b.Start(t, project, testkit.ServerEnv(), "--session", "many")
		const n = 16
		// Each call announces itself and waits until all n have: with fewer
		// than n running at once, none would finish before its timeout.
		script := fmt.Sprintf(`touch "$HOME/.tmp/started.$1"; i=0; while [ "$(ls "$HOME/.tmp" | grep -c started)" -lt %d ]; do i=$((i+1)); [ $i -gt 400 ] && exit 9; sleep 0.05; done`, n)
		var wg sync.WaitGroup
		results := make([]int, n)
		for i := range n {
			wg.Go(func() {
				res, raw := ts.Exec(map[string]any{"argv": []string{"/bin/sh", "-c", script, "sh", strconv.Itoa(i)}, "timeout_ms": 60000})
				results[i] = res.ExitCode
				if raw.IsError && res.ExitCode == 0 {
					t.Errorf("call %d did not run: %s", i, testkit.ResultText(raw))
				}
			})
		}
		wg.Wait()
		for i, code := range results {
			if code != 0 {
				t.Errorf("call %d exit %d: fewer than %d calls ran at once", i, code, n)
			}
		}
	})
}

func TestProgressNotifications(t *testing.T) {
	project := testkit.NewProject(t)
	ts := testkit.StartServer(t, project, testkit.ServerEnv(), "--session", "progress")
	req := mcp.CallToolRequest{}
	req.Params.Name = "jailed_exec"
	req.Params.Arguments = map[string]any{"command": "for i in 1 2 3 4 5; do echo line-$i; sleep 0.5; done"}
	req.Params.Meta = &mcp.Meta{ProgressToken: "tok-1"}
	res, err := ts.Client.CallTool(t.Context(), req)
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	returned := time.Now()
	time.Sleep(1500 * time.Millisecond)
	var progress []testkit.Note
	for _, n := range ts.Notifications() {
		if n.N.Method == "notifications/progress" {
			progress = append(progress, n)
		}
	}
	if len(progress) < 1 || len(progress) > 3 {
		t.Fatalf("%d progress notifications for a 2.5 s command, want 1 to 3", len(progress))
	}
	last := -1.0
	for i, n := range progress {
		f := n.N.Params.AdditionalFields
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
		if n.At.After(returned) {
			t.Errorf("notification %d arrived after the result", i)
		}
		if i > 0 && n.At.Sub(progress[i-1].At) < 900*time.Millisecond {
			t.Errorf("two notifications %v apart", n.At.Sub(progress[i-1].At))
		}
	}
}

func TestResetKillsAndNeverFollowsSymlinks(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		outside := t.TempDir()
		os.WriteFile(filepath.Join(outside, "precious"), []byte("keep"), 0o644)
		// The jail's skeleton without the view's layer (TestOverlayReset
		// resets one with it).
		ts := b.Start(t, project, testkit.ServerEnv(), "--session", "reset", "--overlay", "off")
		res, _ := ts.Exec(map[string]any{"command": fmt.Sprintf(`mkdir -p a/b && echo 12345 > a/b/f && ln -s %s link && ln -s %s/precious flink && echo x > top`, outside, outside), "cwd": ".agent-home/reset"})
		if res.ExitCode != 0 {
			t.Fatalf("%+v", res)
		}
		marker := "654321." + strconv.Itoa(os.Getpid()) + e2eMarkerDigits(b)
		done := make(chan struct{})
		go func() {
			defer close(done)
			ts.Call(t.Context(), "jailed_exec", map[string]any{"command": "sleep " + marker})
		}()
		if !testkit.WaitFor(10*time.Second, func() bool { return len(testkit.ProcessesWith(marker)) > 0 }) {
			t.Fatal("command did not start")
		}
		rr, err := ts.Call(t.Context(), "jail_reset", nil)
		if err != nil || rr.IsError {
			t.Fatalf("reset: %v %+v", err, rr)
		}
		var out struct {
			RemovedFiles int64 `json:"removed_files"`
			Killed       int   `json:"killed"`
		}
		testkit.DecodeResult(t, rr, &out)
		if out.Killed != 1 || out.RemovedFiles < 4 {
			t.Errorf("reset result %+v", out)
		}
		<-done
		if pids := testkit.ProcessesWith(marker); len(pids) > 0 {
			t.Errorf("reset left %v running", pids)
		}
		if got := testkit.MustRead(t, filepath.Join(outside, "precious")); got != "keep" {
			t.Errorf("symlink target changed: %q", got)
		}
		if entries, err := os.ReadDir(outside); err != nil || len(entries) != 1 {
			t.Errorf("symlinked directory changed: %v %v", entries, err)
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
		if st := ts.Status(); st.Usage.Files != 7 || st.Running != 0 { // the skeleton's directories
			t.Errorf("status after reset: %+v", st)
		}
		// The session keeps working after a reset.
		if res, _ := ts.Exec(map[string]any{"command": "echo again > $HOME/f && cat $HOME/f"}); res.Stdout != "again\n" || res.Backend != b.Name {
			t.Errorf("after reset: %+v", res)
		}
	})
}

func TestStatus(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		ts := b.Start(t, project, testkit.ServerEnv(), "--session", "st", "--network", "off", "--timeout", "30s")
		ts.Exec(map[string]any{"command": "true"})
		before := ts.Status().Usage
		ts.Exec(map[string]any{"command": "printf 12345 > $HOME/f"})
		st := ts.Status()
		if st.Session != "st" || st.Project != project || st.Jail != filepath.Join(project, ".agent-home", "st") ||
			st.Backend != b.Name || !st.Available || !st.Confined || st.Network || st.Usage.Files != before.Files+1 ||
			st.Usage.Bytes <= before.Bytes || st.Limits.MaxFiles != 500000 || st.Limits.TimeoutMS != 30000 || st.Version == "" || len(st.Guarantees.Kept) == 0 {
			t.Errorf("status: %+v", st)
		}
		var kept, notKept []int
		for _, p := range st.Guarantees.Kept {
			kept = append(kept, p.ID)
		}
		for _, p := range st.Guarantees.NotKept {
			notKept = append(notKept, p.ID)
			if p.Name == "" || p.Note == "" {
				t.Errorf("promise %d not kept without a name or a note: %+v", p.ID, p)
			}
		}
		switch {
		case b.Name == "bwrap" && len(st.Agents) > 0:
			// With a session agent, a Landlock layer inside the sandbox
			// closes what a read-only view cannot (host FIFOs): bubblewrap
			// keeps every promise.
			if !slices.Equal(kept, []int{1, 2, 3, 4, 5, 6, 7, 8, 9}) || len(notKept) != 0 {
				t.Errorf("bwrap guarantees with agents: kept %v, not kept %v", kept, notKept)
			}
		case b.Name == "bwrap":
			// Without Landlock (ABI 6) inside bubblewrap, each call is its
			// own sandbox and promise 2 is not kept in full: a FIFO in the
			// project or under HOME reaches its host reader through the
			// read-only view.
			if !slices.Equal(kept, []int{1, 3, 4, 5, 6, 7, 8, 9}) || !slices.Equal(notKept, []int{2}) {
				t.Errorf("bwrap guarantees: kept %v, not kept %v", kept, notKept)
			} else if note := st.Guarantees.NotKept[0].Note; !strings.Contains(note, "FIFO") {
				t.Errorf("bwrap's note on promise 2 does not name FIFOs: %q", note)
			}
		case b.Name == "landlock":
			if len(st.Agents) != 1 || st.Agents[0].Network != "off" || st.Agents[0].Running != 0 || st.Agents[0].Restarts != 0 {
				t.Errorf("landlock agents: %+v", st.Agents)
			}
			// Landlock does not cover chmod, chown and utime: promise 1 is
			// not kept, and the note says which changes get through; nor
			// can it hide names or other processes' command lines: 9 is
			// kept in part only.
			if !slices.Equal(kept, []int{2, 3, 4, 5, 6, 7, 8}) || !slices.Equal(notKept, []int{1, 9}) {
				t.Errorf("landlock guarantees: kept %v, not kept %v", kept, notKept)
			} else if note := st.Guarantees.NotKept[0].Note; !strings.Contains(note, "chmod") || !strings.Contains(note, "utime") {
				t.Errorf("landlock's note on promise 1 does not name chmod and utime: %q", note)
			}
		}
	})
}

// TestBwrapMissingRefusesEveryCall: with --backend bwrap and no working
// bubblewrap, every call is refused in one line that says why and what
// fixes it, and nothing runs; auto would have picked Landlock, but the
// operator asked for bwrap.
func TestBwrapMissingRefusesEveryCall(t *testing.T) {
	fake := t.TempDir()
	calls := filepath.Join(fake, "calls")
	script := "#!/bin/sh\necho \"$*\" >> " + calls + "\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(fake, "bwrap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		reason     []string // what the refusal and the status reason say
		hint       string
	}{
		{"absent", testkit.NoBwrapPath, []string{"bubblewrap", "not installed"}, "sudo apt-get install bubblewrap"},
		{"broken", fake + ":" + os.Getenv("PATH"), []string{"bubblewrap cannot create its sandbox", "setting up uid map: Permission denied"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			project := testkit.NewProject(t)
			ts := testkit.StartServer(t, project, testkit.ServerEnv("PATH="+tc.path), "--session", "nobwrap", "--backend", "bwrap")
			st := ts.Status()
			if st.Backend != "bwrap" || st.Available || st.Confined || st.Reason == "" {
				t.Errorf("status: %+v", st)
			}
			if tc.hint != "" && st.Hint != tc.hint {
				t.Errorf("status hint %q, want %q", st.Hint, tc.hint)
			}
			ran := filepath.Join(t.TempDir(), "ran")
			for i, args := range []map[string]any{
				{"argv": []string{"/bin/touch", ran}},
				{"command": "touch " + ran},
				{"command": "touch " + ran, "network": false, "cwd": ".agent-home/nobwrap"},
				{"argv": []string{"/bin/touch", ran}, "env": map[string]any{"A": "b"}, "stdin": "x"},
			} {
				_, res := ts.Exec(args)
				if !res.IsError || res.StructuredContent != nil {
					t.Fatalf("call %d ran without a jail: %+v", i, res)
				}
				line := testkit.OneLineText(t, res)
				if i == 0 {
					t.Logf("refusal: %s", line)
				}
				for _, w := range append(slices.Clone(tc.reason), tc.hint) {
					if !strings.Contains(line, w) {
						t.Errorf("refusal %q lacks %q", line, w)
					}
				}
			}
			if testkit.FileExists(ran) {
				t.Errorf("a refused command ran")
			}
			if b, err := os.ReadFile(calls); err == nil && strings.Contains(string(b), ran) {
				t.Errorf("the broken bwrap was asked to run a command:\n%s", b)
			}
			if _, err := os.Lstat(filepath.Join(project, ".agent-home", "nobwrap", "ran")); err == nil {
				t.Error("a refused command ran in the jail")
			}
		})
	}
	t.Run("fallback warn", func(t *testing.T) {
		project := testkit.NewProject(t)
		warn := testkit.StartServer(t, project, testkit.ServerEnv("PATH="+testkit.NoBwrapPath), "--session", "nobwrap", "--backend", "bwrap", "--fallback", "warn")
		r, raw := warn.Exec(map[string]any{"argv": []string{"/bin/echo", "hi"}})
		if r.Confined || r.Stdout != "hi\n" || r.Backend != "none" || !strings.Contains(testkit.ResultText(raw), "UNCONFINED") {
			t.Errorf("fallback warn: %+v %q", r, testkit.ResultText(raw))
		}
		if st := warn.Status(); st.Confined || !st.Available || st.Backend != "none" {
			t.Errorf("fallback warn status: %+v", st)
		}
	})
}

// TestAutoPicksLandlockWithoutBwrap: a host without bubblewrap gets
// Landlock by default, and it confines writes.
func TestAutoPicksLandlockWithoutBwrap(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"default", nil, nil},
		{"flag", nil, []string{"--backend", "auto"}},
		{"variable", []string{"JAIL_MCP_BACKEND=auto"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			project := testkit.NewProject(t)
			env := testkit.ServerEnv(append([]string{"PATH=" + testkit.NoBwrapPath}, tc.env...)...)
			ts := testkit.StartServer(t, project, env, append([]string{"--session", "auto"}, tc.args...)...)
			st := ts.Status()
			if st.Backend != "landlock" || !st.Available || !st.Confined {
				t.Fatalf("status: backend %q available %t confined %t reason %q", st.Backend, st.Available, st.Confined, st.Reason)
			}
			res, raw := ts.Exec(map[string]any{"command": "echo in > $HOME/f && cat $HOME/f"})
			if res.Stdout != "in\n" || res.ExitCode != 0 || res.Backend != "landlock" || !res.Confined || strings.Contains(testkit.ResultText(raw), "UNCONFINED") {
				t.Errorf("write in the jail: %+v", res)
			}
			for _, target := range []string{
				filepath.Join(project, "outside"),
				filepath.Join(t.TempDir(), "outside"),
			} {
				res, _ := ts.Exec(map[string]any{"argv": []string{"/bin/sh", "-c", `echo x > "$1"`, "sh", target}})
				if res.ExitCode == 0 || !strings.Contains(res.Stderr, "Permission denied") {
					t.Errorf("write to %s: %+v", target, res)
				}
				if testkit.FileExists(target) {
					t.Errorf("%s exists on the host", target)
				}
			}
		})
	}
}

// TestDoctorWithoutBwrap: doctor on a host without bubblewrap says that
// Landlock will be used, why bubblewrap cannot, and what installs it.
func TestDoctorWithoutBwrap(t *testing.T) {
	environ := cfgEnv("PATH=" + testkit.NoBwrapPath)
	res := runInProcess(t, []string{"doctor"}, environ)
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("doctor: exit %d, stderr %q; stdout:\n%s", res.code, res.stderr, res.stdout)
	}
	for _, re := range []string{
		`(?m)^bwrap +unavailable +bubblewrap \(bwrap\) is not installed or not in PATH; fix: sudo apt-get install bubblewrap$`,
		`(?m)^landlock +available`,
		`(?m)^auto: commands run confined by landlock$`,
		`(?m)^promises not kept:\n +1\. [^\n]*chmod[^\n]*utime`,
	} {
		if !regexp.MustCompile(re).MatchString(res.stdout) {
			t.Errorf("doctor output does not match %s:\n%s", re, res.stdout)
		}
	}

	res = runInProcess(t, []string{"doctor", "--json"}, environ)
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("doctor --json: exit %d, stderr %q; stdout:\n%s", res.code, res.stderr, res.stdout)
	}
	var r cli.DoctorReport
	if err := json.Unmarshal([]byte(res.stdout), &r); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, res.stdout)
	}
	if r.Selected != "landlock" || !r.Confined || r.Reason != "" || r.Guarantees == nil {
		t.Errorf("doctor --json: selected %q confined %t reason %q guarantees %v", r.Selected, r.Confined, r.Reason, r.Guarantees)
	} else if len(r.Guarantees.NotKept) != 2 || r.Guarantees.NotKept[0].ID != 1 || r.Guarantees.NotKept[1].ID != 9 {
		t.Errorf("doctor --json: promises not kept %+v", r.Guarantees.NotKept)
	}
	backends := map[string]jail.Report{}
	for _, b := range r.Backends {
		backends[b.Backend] = b
	}
	if b := backends["bwrap"]; b.Available || !strings.Contains(b.Reason, "not installed") || b.Hint != "sudo apt-get install bubblewrap" {
		t.Errorf("doctor --json bwrap: %+v", b)
	}
	if b := backends["landlock"]; !b.Available || b.ABI < jail.MinLandlockABI {
		t.Errorf("doctor --json landlock: %+v", b)
	}
}

// TestStdoutIsOnlyJSONRPC drives the server with raw lines and checks that
// every line it writes on stdout is a JSON-RPC message, whatever the
// command prints and whatever the server logs.
func TestStdoutIsOnlyJSONRPC(t *testing.T) {
	project := testkit.NewProject(t)
	cmd := exec.Command(os.Args[0], "serve", "--project", project, "--session", "raw", "--log-level", "debug")
	cmd.Env = testkit.ServerEnv()
	var stderr testkit.SyncBuffer
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
// TestServerDeathKillsCommands: whether the server is told to stop
// (SIGTERM, or EOF on stdin) or killed outright, nothing a command started
// outlives it, setsid and double-forked children included.
func TestServerDeathKillsCommands(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		for _, how := range []string{"SIGTERM", "SIGKILL", "EOF"} {
			t.Run(how, func(t *testing.T) {
				project := testkit.NewProject(t)
				ts := b.Start(t, project, testkit.ServerEnv(), "--session", "death")
				marker := fmt.Sprintf("543210.%d%d%s", os.Getpid(), len(how), e2eMarkerDigits(b))
				go ts.Call(context.WithoutCancel(t.Context()), "jailed_exec", map[string]any{
					"command": fmt.Sprintf("setsid sleep %s & (sleep %s &); sleep %s", marker, marker, marker),
				})
				if !testkit.WaitFor(10*time.Second, func() bool { return len(testkit.ProcessesWith("sleep "+marker)) >= 3 }) {
					t.Fatalf("command did not start: %v", testkit.ProcessesWith(marker))
				}
				ts.End(how)
				if !testkit.WaitFor(5*time.Second, func() bool { return len(testkit.ProcessesWith(marker)) == 0 }) {
					t.Errorf("left running after %s: %v", how, testkit.ProcessesWith(marker))
				}
				if how == "SIGTERM" {
					err := ts.Cmd.Wait()
					if err != nil && !strings.Contains(err.Error(), "already") {
						t.Errorf("exit after SIGTERM: %v", err)
					}
				}
			})
		}
	})
}

// TestCredentialsOverMCP: jail_status lists what is exposed (names, places
// and variable names, never values), and a call narrows it; what is shown
// can be read, never written through, and is gone from the jail once the
// call is over.
func TestCredentialsOverMCP(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		home := t.TempDir()
		files := map[string]string{}
		for _, f := range []string{".config/gh/hosts.yml", ".codex/auth.json"} {
			os.MkdirAll(filepath.Join(home, filepath.Dir(f)), 0o700)
			os.WriteFile(filepath.Join(home, f), []byte("secret-"+filepath.Base(f)), 0o600)
			files[f] = "secret-" + filepath.Base(f)
		}
		env := testkit.ServerEnv("GH_TOKEN=gh-secret-value", "OPENAI_API_KEY=sk-secret-value")
		env = append(slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "HOME=") }), "HOME="+home)
		ts := b.Start(t, project, env, "--session", "cred", "--auth", "gh,codex")
		st := ts.Status()
		raw, _ := json.Marshal(st.Auth)
		if strings.Contains(string(raw), "secret") {
			t.Errorf("status shows a secret: %s", raw)
		}
		jail := filepath.Join(project, ".agent-home", "cred")
		want := `[{"name":"codex","paths":["` + jail + `/.codex"],"env":["OPENAI_API_KEY"]},{"name":"gh","paths":["` + jail + `/.config/gh"],"env":["GH_TOKEN"]}]`
		if string(raw) != want {
			t.Errorf("status auth:\n got %s\nwant %s", raw, want)
		}
		res, _ := ts.Exec(map[string]any{"command": `cat ~/.config/gh/hosts.yml ~/.codex/auth.json; echo " $GH_TOKEN $OPENAI_API_KEY"`})
		if res.Stdout != "secret-hosts.ymlsecret-auth.json gh-secret-value sk-secret-value\n" {
			t.Errorf("all enabled: %q %q", res.Stdout, res.Stderr)
		}
		res, _ = ts.Exec(map[string]any{"command": `cat ~/.config/gh/hosts.yml ~/.codex/auth.json 2>/dev/null; echo " $GH_TOKEN $OPENAI_API_KEY"`, "auth": []string{"gh"}})
		if res.Stdout != "secret-hosts.yml gh-secret-value \n" {
			t.Errorf("narrowed to gh: %q", res.Stdout)
		}
		_, refused := ts.Exec(map[string]any{"command": "true", "auth": []string{"claude"}})
		if !refused.IsError || !strings.Contains(testkit.OneLineText(t, refused), "not enabled by the operator") {
			t.Errorf("widening not refused: %q", testkit.ResultText(refused))
		}
		// Two calls at once: the one that ends first leaves the other's
		// credentials in place.
		var wg sync.WaitGroup
		var slow tools.ExecResult
		wg.Go(func() {
			slow, _ = ts.Exec(map[string]any{"command": `sleep 1; cat ~/.codex/auth.json`})
		})
		time.Sleep(200 * time.Millisecond)
		if res, _ := ts.Exec(map[string]any{"command": `cat ~/.codex/auth.json`}); res.Stdout != "secret-auth.json" {
			t.Errorf("second call at once: %q %q", res.Stdout, res.Stderr)
		}
		wg.Wait()
		if slow.Stdout != "secret-auth.json" {
			t.Errorf("a call that outlived another lost its credentials: %q %q", slow.Stdout, slow.Stderr)
		}
		// Nothing writes through a credential path to the host.
		for rel := range files {
			res, _ := ts.Exec(map[string]any{"argv": []string{"/bin/sh", "-c", `echo x >> "$HOME/$1"; : > "$HOME/$1"; echo overwritten > "$HOME/$1"`, "sh", rel}})
			if res.ExitCode == 0 {
				t.Errorf("writing through %s succeeded: %+v", rel, res)
			}
		}
		// A call that shows no credential: under landlock the links
		// stay between calls and go when such a call starts.
		if res, _ := ts.Exec(map[string]any{"command": "true", "auth": []string{}}); res.ExitCode != 0 {
			t.Errorf("a call without credentials: %+v", res)
		}
		for rel, content := range files {
			if got := testkit.MustRead(t, filepath.Join(home, rel)); got != content {
				t.Errorf("host %s = %q, want %q", rel, got, content)
			}
			// After it the jail holds no way to the secret: at most an
			// empty mount point under bwrap.
			p := filepath.Join(jail, rel)
			if fi, err := os.Lstat(p); err == nil {
				if fi.Mode()&os.ModeSymlink != 0 || fi.Size() != 0 {
					t.Errorf("%s left in the jail after a call without credentials: %v", p, fi.Mode())
				}
			}
		}
		none := b.Start(t, project, env, "--session", "cred-none", "--auth", "none")
		if st := none.Status(); len(st.Auth) != 0 {
			t.Errorf("--auth none exposes %+v", st.Auth)
		}
		res, _ = none.Exec(map[string]any{"command": `cat ~/.config/gh/hosts.yml 2>/dev/null; echo "[$GH_TOKEN]"`})
		if res.Stdout != "[]\n" {
			t.Errorf("--auth none: %q", res.Stdout)
		}
	})
}

// TestWarningsReachTheClientLog: the server declares logging, and a bound
// a command went over is a warning log notification for a client that set
// that level, and none for one that did not.
func TestWarningsReachTheClientLog(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		ts := b.Start(t, testkit.NewProject(t), testkit.ServerEnv(), "--max-procs", "20")
		bomb := map[string]any{"command": "i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done; wait"}
		count := func() int {
			n := 0
			for _, note := range ts.Notifications() {
				if note.N.Method != "notifications/message" {
					continue
				}
				f := note.N.Params.AdditionalFields
				if f["level"] != "warning" || !strings.Contains(fmt.Sprint(f["data"]), "procs bound") {
					t.Errorf("log notification %+v", f)
				}
				n++
			}
			return n
		}
		if res, _ := ts.Exec(bomb); res.Limit != "procs" {
			t.Fatalf("the fork bomb: %+v", res)
		}
		time.Sleep(200 * time.Millisecond)
		if n := count(); n != 0 {
			t.Errorf("%d log notifications before the client set a level", n)
		}
		if err := ts.Client.SetLevel(t.Context(), mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelWarning}}); err != nil {
			t.Fatalf("logging/setLevel: %v", err)
		}
		if res, _ := ts.Exec(bomb); res.Limit != "procs" {
			t.Fatalf("the fork bomb: %+v", res)
		}
		if !testkit.WaitFor(2*time.Second, func() bool { return count() == 1 }) {
			t.Errorf("%d log notifications, want 1", count())
		}
	})
}

// TestRenamesAcrossJailDirs: renames and hard links between directories
// of the jail, of files and of directories, by mv, ln and rename(2),
// work on both backends (they failed with EXDEV when a call's Landlock
// layer handled no filesystem right and so granted no REFER); a host file
// still cannot be linked into the jail, nor moved out of the host project
// (under the project view mv copies it, the host keeps it).
func TestRenamesAcrossJailDirs(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		if err := os.WriteFile(filepath.Join(project, "README.md"), []byte("host\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ts := b.Start(t, project, testkit.ServerEnv(), "--network", "off", "--auth", "none")
		script := `set -e
cd "$HOME"
mkdir -p a/deep b c
echo one > a/f
mv a/f b/f
ln b/f c/g
mkdir a/deep/dir && echo two > a/deep/dir/x
mv a/deep/dir b/dir
python3 -c 'import os; os.rename("b/dir", "c/dir"); os.rename("c/g", "a/deep/g"); os.link("b/f", "a/h")'
cat b/f a/deep/g a/h c/dir/x
stat -c %h b/f
if ln "$PROJECT/README.md" "$HOME/stolen" 2>/dev/null; then echo linked-host; fi
if mv "$PROJECT/README.md" "$HOME/moved" 2>/dev/null; then echo moved-host; fi
echo done`
		want := "one\none\none\ntwo\n3\ndone\n"
		if ts.Status().Overlay {
			// The project view (the default under bubblewrap): mv copies
			// README.md into the jail and removes it from the view, never
			// from the host (below); ln still cannot cross.
			want = "one\none\none\ntwo\n3\nmoved-host\ndone\n"
		}
		res, raw := ts.Exec(map[string]any{"command": script, "env": map[string]any{"PROJECT": project}})
		if res.ExitCode != 0 || res.Stdout != want {
			t.Fatalf("renames and links across the jail's directories: %+v %s", res, testkit.ResultText(raw))
		}
		if _, err := os.Stat(filepath.Join(project, "README.md")); err != nil {
			t.Errorf("the host file moved: %v", err)
		}
	})
}

// TestRefusedWriteExplained: a write refused in the read-only project is
// named in the result (refused_write, and a line of its text), from what
// the kernel saw, not from the command's words: a command that prints the
// same line but writes only its jail gets none. A job's result names it
// too.
func TestRefusedWriteExplained(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		writeFiles(t, project, map[string]string{"README.md": "host\n", "src/main.c": "int main(){}\n"})
		// The read-only project: without the view (--overlay auto would
		// show it writable under bubblewrap).
		ts := b.Start(t, project, testkit.ServerEnv(), "--network", "off", "--auth", "none", "--overlay", "off")
		type refused struct {
			RefusedWrite  string `json:"refused_write"`
			RefusedWrites int    `json:"refused_writes"`
		}
		fields := func(raw *mcp.CallToolResult) refused {
			var r refused
			b, _ := json.Marshal(raw.StructuredContent)
			json.Unmarshal(b, &r)
			return r
		}
		// What npm, configure and git stash do: make a directory, write a
		// log, take a lock; each refused, and the tool says little.
		res, raw := ts.Exec(map[string]any{"command": `mkdir node_modules 2>/dev/null; (cd src && echo log > config.log) 2>/dev/null; true > "$PWD/.git-index.lock" 2>/dev/null; exit 1`})
		if got := fields(raw); got.RefusedWrite != filepath.Join(project, "node_modules") || got.RefusedWrites != 3 || res.ExitCode != 1 {
			t.Errorf("refused writes: %+v, exit %d", got, res.ExitCode)
		}
		if text := testkit.ResultText(raw); !strings.Contains(text, "write refused: "+filepath.Join(project, "node_modules")+" is in the project, which is read-only in the jail (and 2 more writes there)") || !strings.Contains(text, "$HOME") {
			t.Errorf("the text does not say which write was refused, and what to do:\n%s", text)
		}
		// The command's own words are not the kernel's.
		_, raw = ts.Exec(map[string]any{"command": `echo "write refused: $PWD/README.md" >&2; echo ok > "$HOME/f"; cat README.md >/dev/null; mkdir -p "$PWD/src"; rm -f "$PWD/absent"`})
		if got := fields(raw); got.RefusedWrite != "" || got.RefusedWrites != 0 || strings.Contains(strings.SplitN(testkit.ResultText(raw), "\n", 2)[0], "write refused") {
			t.Errorf("writes only in the jail (and a lie on stderr), yet: %+v\n%s", got, testkit.ResultText(raw))
		}
		// A job.
		_, raw = ts.Exec(map[string]any{"command": `sleep 0.2; echo x >> README.md`, "background": true})
		var job struct {
			JobID string `json:"job_id"`
		}
		jb, _ := json.Marshal(raw.StructuredContent)
		json.Unmarshal(jb, &job)
		// jail_job returns at the job's first output (its shell's error
		// line), which may come before its end: waited on until it ends.
		_, end := ts.ReadUntil(job.JobID, "never printed", time.Minute)
		if end.Running {
			t.Fatalf("the job runs on a minute later")
		}
		r, err := ts.Call(t.Context(), "jail_job", map[string]any{"job_id": job.JobID})
		if err != nil {
			t.Fatal(err)
		}
		if got := fields(r); got.RefusedWrite != filepath.Join(project, "README.md") || got.RefusedWrites != 1 || !strings.Contains(testkit.ResultText(r), "write refused: "+filepath.Join(project, "README.md")) {
			t.Errorf("job: %+v\n%s", got, testkit.ResultText(r))
		}
	})
}

// TestAgentWarmAtSessionOpen: the session agent of the default policy
// starts when the session opens (stdio: at start; HTTP: at initialize),
// before any call, and the first call runs on it: no second agent, no
// restart.
func TestAgentWarmAtSessionOpen(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		check := func(t *testing.T, status func() tools.StatusResult, exec func() tools.ExecResult) {
			var st tools.StatusResult
			if !testkit.WaitFor(time.Minute, func() bool { st = status(); return len(st.Agents) == 1 }) {
				t.Fatalf("no session agent started before the first call: %+v", st.Agents)
			}
			started := st.Agents[0].Started
			if res := exec(); res.Stdout != "ok\n" || res.Agent != "" {
				t.Errorf("first call: %+v", res)
			}
			if st = status(); len(st.Agents) != 1 || st.Agents[0].Started != started || st.Agents[0].Restarts != 0 {
				t.Errorf("after the first call: %+v, want the agent started at %s", st.Agents, started)
			}
		}
		t.Run("stdio", func(t *testing.T) {
			ts := b.Start(t, testkit.NewProject(t), testkit.ServerEnv(), "--auth", "none")
			check(t, ts.Status, func() tools.ExecResult { res, _ := ts.Exec(map[string]any{"command": "echo ok"}); return res })
		})
		t.Run("http", func(t *testing.T) {
			hs := testkit.StartHTTP(t, testkit.NewProject(t), append(testkit.ServerEnv(), b.Env...), append(slices.Clone(b.Args), "--auth", "none")...)
			s := hs.Connect(t, "")
			check(t, s.Status, func() tools.ExecResult { res, _ := s.Exec(map[string]any{"command": "echo ok"}); return res })
		})
	})
}

// TestHostChangesSeenByTheNextCall: what the host adds to or removes from
// the project between two calls, the second sees, however its session
// agent readied its threads ahead: a call whose read view lists a
// directory that changed since (the project's, which holds the other
// sessions' jails) runs on a thread that enters the view as it is now.
// Files are added and removed before each of more calls than an agent
// keeps threads ready, back to back and after a pause.
func TestHostChangesSeenByTheNextCall(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		ts := b.Start(t, project, testkit.ServerEnv(), "--network", "off", "--auth", "none")
		if res, _ := ts.Exec(map[string]any{"command": "true"}); res.ExitCode != 0 {
			t.Fatalf("warm-up: %+v", res)
		}
		for i := range 2 * jail.AgentSpares {
			name := fmt.Sprintf("new-%d.txt", i)
			writeFiles(t, project, map[string]string{name: "in " + name + "\n"})
			if i > 0 {
				os.Remove(filepath.Join(project, fmt.Sprintf("new-%d.txt", i-1)))
			}
			want := "in " + name + "\ngone\n"
			cmd := fmt.Sprintf(`cat %s; test -e new-%d.txt || echo gone`, name, i-1)
			res, raw := ts.Exec(map[string]any{"command": cmd})
			if res.ExitCode != 0 || res.Stdout != want {
				t.Fatalf("call %d after the host's change: %+v %s", i, res, testkit.ResultText(raw))
			}
			// Unchanged since: the same again, on a thread readied ahead.
			if res, _ := ts.Exec(map[string]any{"command": cmd}); res.Stdout != want {
				t.Fatalf("call %d again: %+v", i, res)
			}
			if i%3 == 2 {
				time.Sleep(50 * time.Millisecond) // the agent readies threads meanwhile
			}
		}
	})
}
