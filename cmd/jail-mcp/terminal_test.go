//go:build linux

package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// runRestoresTerminal runs the real jail-mcp run on backend b in a session
// of its own whose controlling terminal, and standard input, output and
// error, is a pseudo-terminal, as from a shell; the command changes the
// terminal and ends in every way a command ends. Afterwards the terminal
// must be as it was before. It is the escape suite's run-terminal vector
// (TestEscape/<backend>/2/run-terminal).
func runRestoresTerminal(t *testing.T, b testkit.Backend) {
	py := testkit.Python3(t)
	// pyTTY runs Python code with fcntl, os, struct and termios imported.
	pyTTY := func(code string) string {
		return py + ` -c 'import fcntl, os, struct, termios; ` + code + `'`
	}
	const raw = "stty raw -echo || exit 99"
	tests := []struct {
		name   string
		args   []string       // flags of run
		script string         // run with /bin/sh -c
		signal syscall.Signal // sent to jail-mcp once the command changed the termios
		code   int
	}{
		{name: "exit 0", script: raw, code: 0},
		{name: "exit 3", script: raw + "; exit 3", code: 3},
		{name: "timeout", args: []string{"--timeout", "1s"}, script: raw + "; sleep 30", code: exitTimedOut},
		{name: "memory bound", args: []string{"--max-memory", "64MiB"}, script: raw + "; " + py + ` -c "b = bytearray(512 << 20)"`, code: 128 + int(syscall.SIGKILL)},
		{name: "SIGTERM", script: raw + "; sleep 30", signal: syscall.SIGTERM, code: 130},
		{name: "SIGHUP", script: raw + "; sleep 30", signal: syscall.SIGHUP, code: 130},
		{name: "non-blocking and resized", script: pyTTY(`fcntl.fcntl(0, fcntl.F_SETFL, fcntl.fcntl(0, fcntl.F_GETFL) | os.O_NONBLOCK); fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("4H", 7, 9, 0, 0))`), code: 0},
		{name: "exclusive", script: pyTTY(`fcntl.ioctl(0, termios.TIOCEXCL)`), code: 0},
		{name: "output stopped", script: pyTTY(`termios.tcflow(0, termios.TCOOFF)`), code: 0},
		// jail-mcp copies this line to the stopped terminal, and blocks.
		{name: "output stopped, then a line", script: pyTTY(`termios.tcflow(0, termios.TCOOFF); print("after the stop", flush=True)`), code: 0},
	}
	project := testkit.NewProject(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tty := newTestTerminal(t)
			before := tty.state(t)
			args := append(append(append([]string{"run", "--project", project}, b.Args...), tt.args...), "--", "/bin/sh", "-c", tt.script)
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env, cmd.Dir = testkit.ServerEnv(b.Env...), project
			cmd.Stdin, cmd.Stdout, cmd.Stderr = tty.slave, tty.slave, tty.slave
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if tt.signal != 0 {
				if !testkit.WaitFor(30*time.Second, func() bool { return tty.state(t).termios != before.termios }) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("the command did not change the terminal; output:\n%s", tty.out.String())
				}
				cmd.Process.Signal(tt.signal)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			var err error
			select {
			case err = <-exited:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-exited
				t.Fatalf("jail-mcp run still runs 30s on; output:\n%s", tty.out.String())
			}
			var ee *exec.ExitError
			if code := cmd.ProcessState.ExitCode(); code != tt.code || err != nil && !errors.As(err, &ee) {
				t.Fatalf("jail-mcp run exited %d (%v), want %d; output:\n%s", code, err, tt.code, tty.out.String())
			}
			after := tty.state(t)
			if after.termios != before.termios {
				t.Errorf("termios not restored:\nbefore %+v\nafter  %+v", before.termios, after.termios)
			}
			if after.winsize != before.winsize {
				t.Errorf("window size not restored: before %+v, after %+v", before.winsize, after.winsize)
			}
			if after.flags != before.flags {
				t.Errorf("file status flags not restored: before %#o, after %#o", before.flags, after.flags)
			}
			if after.exclusive != before.exclusive {
				t.Errorf("exclusive mode not restored: before %t, after %t", before.exclusive, after.exclusive)
			}
			tty.mustWrite(t)
			if t.Failed() {
				t.Logf("output:\n%s", tty.out.String())
			}
		})
	}
}

// TestRunInBackground: jail-mcp run in a background job of a shell with
// job control, its command leaving the terminal alone, touches nothing
// that would stop it with SIGTTOU.
func TestRunInBackground(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		tty := newTestTerminal(t)
		args := append(append([]string{"-c", `set -m; "$0" "$@" & wait $!; echo "jail-mcp exited $?"`, os.Args[0], "run", "--project", project}, b.Args...), "--", "/bin/true")
		sh := exec.Command("/bin/sh", args...)
		sh.Env, sh.Dir = testkit.ServerEnv(b.Env...), project
		sh.Stdin, sh.Stdout, sh.Stderr = tty.slave, tty.slave, tty.slave
		sh.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		if err := sh.Run(); err != nil {
			t.Fatal(err)
		}
		// A job stopped by SIGTTOU is reported as 128+22.
		const want = "jail-mcp exited 0"
		if !testkit.WaitFor(5*time.Second, func() bool { return strings.Contains(tty.out.String(), want) }) {
			t.Errorf("want %q; output:\n%s", want, tty.out.String())
		}
	})
}

// TestRunStdinNotATerminal: a pipe or /dev/null on standard input passes
// through, with nothing said about terminals.
func TestRunStdinNotATerminal(t *testing.T) {
	tests := []struct {
		name  string
		stdin func(t *testing.T) *os.File
		want  string
	}{
		{name: "pipe", stdin: func(t *testing.T) *os.File {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			go func() {
				io.WriteString(w, "through the pipe\n")
				w.Close()
			}()
			return r
		}, want: "through the pipe\n"},
		{name: "/dev/null", stdin: func(t *testing.T) *os.File {
			f, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}, want: ""},
	}
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				args := append(append([]string{"run", "--project", project}, b.Args...), "--", "/bin/sh", "-c", "cat; exit 3")
				cmd := exec.Command(os.Args[0], args...)
				cmd.Env, cmd.Dir = testkit.ServerEnv(b.Env...), project
				cmd.Stdin = tt.stdin(t)
				var stdout, stderr testkit.SyncBuffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				cmd.Run()
				if code := cmd.ProcessState.ExitCode(); code != 3 || stdout.String() != tt.want || stderr.String() != "" {
					t.Errorf("exit %d, stdout %q, stderr %q; want exit 3, stdout %q, no stderr", code, stdout.String(), stderr.String(), tt.want)
				}
			})
		}
	})
}

// testTerminal is a pseudo-terminal in a shell's usual modes, with what is
// written to it collected from the master side.
type testTerminal struct {
	slave *os.File
	fd    int // slave's: slave.Fd() would clear O_NONBLOCK each call
	out   *testkit.SyncBuffer
}

func newTestTerminal(t *testing.T) *testTerminal {
	t.Helper()
	master, slave := testkit.OpenPTY(t)
	fd := int(slave.Fd())
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	// Cooked, as a shell leaves it for the commands it runs, so that raw
	// mode is a change.
	tio.Iflag |= unix.ICRNL | unix.IXON
	tio.Oflag |= unix.OPOST | unix.ONLCR
	tio.Lflag |= unix.ICANON | unix.ECHO | unix.ISIG | unix.IEXTEN
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80}); err != nil {
		t.Fatal(err)
	}
	out := &testkit.SyncBuffer{}
	go io.Copy(out, master)
	return &testTerminal{slave: slave, fd: fd, out: out}
}

type ttyState struct {
	termios   unix.Termios
	winsize   unix.Winsize
	flags     int
	exclusive bool
}

func (tty *testTerminal) state(t *testing.T) ttyState {
	t.Helper()
	fd := tty.fd
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
	if err != nil {
		t.Fatal(err)
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	excl, err := unix.IoctlGetUint32(fd, unix.TIOCGEXCL)
	if err != nil {
		t.Fatal(err)
	}
	return ttyState{termios: *tio, winsize: *ws, flags: flags, exclusive: excl != 0}
}

// mustWrite fails the test unless a line written to the terminal comes
// out: output the command stopped stays stopped, and a write blocks.
func (tty *testTerminal) mustWrite(t *testing.T) {
	t.Helper()
	const marker = "terminal-still-writes"
	go io.WriteString(tty.slave, marker+"\n")
	if !testkit.WaitFor(5*time.Second, func() bool { return strings.Contains(tty.out.String(), marker) }) {
		t.Error("a line written to the terminal after jail-mcp run never came out: output stays stopped")
	}
}
