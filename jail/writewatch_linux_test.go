package jail

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// watchRun runs script under a write watch of project (jail inside it),
// unconfined: the watch reports what the jail would refuse, before the
// syscall goes on.
func watchRun(t *testing.T, project, jail, script string) (string, int) {
	t.Helper()
	type out struct {
		first string
		n     int
		err   error
	}
	done := make(chan out, 1)
	FreshThread(func() {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			done <- out{err: err}
			return
		}
		w, err := startWriteWatch(project, jail)
		if err != nil {
			done <- out{err: err}
			return
		}
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Dir = project
		cmd.Env = []string{"P=" + project, "J=" + jail, "PATH=/usr/bin:/bin"}
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		if err := cmd.Start(); err != nil {
			w.end()
			done <- out{err: err}
			return
		}
		// As the agent's call thread does: this thread serves the watch
		// while the command runs.
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		for {
			fds := []unix.PollFd{{Fd: int32(w.listener), Events: unix.POLLIN}}
			unix.Poll(fds, 10)
			w.pending(0)
			select {
			case err := <-exited:
				first, n := w.end()
				if err != nil {
					t.Logf("script: %v: %s", err, b.String())
				}
				done <- out{first, n, nil}
				return
			default:
			}
		}
	})
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.first, o.n
}

func TestWriteWatch(t *testing.T) {
	project := t.TempDir()
	jail := filepath.Join(project, ".agent-home", "s")
	if err := os.MkdirAll(jail, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(project, "README"), []byte("x"), 0o644)
	for _, tt := range []struct {
		name, script, first string
		n                   int
	}{
		{"reads", `cat README >/dev/null; ls >/dev/null; cat /etc/passwd >/dev/null`, "", 0},
		{"jail", `echo x > "$J/f"; mkdir "$J/d"; mv "$J/f" "$J/d/g"; rm -r "$J/d"`, "", 0},
		{"outside", `echo x > /dev/null`, "", 0},
		{"relative", `echo x > new.txt`, "new.txt", 1},
		{"absolute", `echo x >> "$P/README"`, "README", 1},
		{"mkdir", `mkdir node_modules; mkdir -p "$P/.agent-home"`, "node_modules", 1},
		{"several", `touch a; ln -s x l; mv README R2; rm R2`, "a", 4},
		{"absent", `rm -f nothing; cat missing 2>/dev/null; true`, "", 0},
		{"siblings", `mkdir "$P/.agent-home/other"`, ".agent-home/other", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			first, n := watchRun(t, project, jail, tt.script)
			want := ""
			if tt.first != "" {
				want = filepath.Join(project, tt.first)
			}
			if first != want || n != tt.n {
				t.Errorf("watch saw %q (%d), want %q (%d)", first, n, want, tt.n)
			}
		})
	}
}
