package jail

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The macOS backend: each command in sandbox-exec with the profile of
// sbpl.go; open_darwin.go picks it.

// probeSandboxExec runs /usr/bin/true once under the real profile.
func probeSandboxExec(ctx context.Context) Report {
	r := Report{Backend: "sandbox-exec"}
	if fi, err := os.Stat(SandboxExecPath); err != nil || !fi.Mode().IsRegular() {
		r.Reason = SandboxExecPath + " is missing"
		r.Hint = "sandbox-exec ships with macOS; reinstall or update macOS"
		return r
	}
	r.Path = SandboxExecPath
	if msg := probeRun(ctx, &sandboxExec{path: SandboxExecPath}, "/usr/bin/true"); msg != "" {
		r.Reason = "sandbox-exec cannot apply the profile here: " + firstLine(msg)
		return r
	}
	r.Available = true
	return r
}

// sandboxExec confines with macOS's sandbox-exec and the profile of
// SandboxProfile.
type sandboxExec struct{ path string }

func (s *sandboxExec) Name() string                { return "sandbox-exec" }
func (s *sandboxExec) Confined() bool              { return true }
func (s *sandboxExec) Credentials() CredentialMode { return CopyCredentials }

func (s *sandboxExec) Agents() bool { return false }

func (s *sandboxExec) Runner(spec Spec, launch Launcher) (Runner, error) {
	if spec.Overlay != nil {
		return nil, ErrNoOverlay
	}
	if len(spec.Mounts) > 0 || len(spec.Hide) > 0 {
		return nil, fmt.Errorf("sandbox-exec cannot mount: credentials must be copied into the jail")
	}
	return &directRunner{spec: spec, start: s.start}, nil
}

// start starts the command in a session of its own (no controlling
// terminal) and, once it exits, kills what is left of its tree: its
// process group, its session's group, and every descendant still found.
func (s *sandboxExec) start(spec Spec, c Call) (Process, error) {
	cmd := exec.Command(s.path, SandboxExecArgs(spec)...)
	cmd.Env, cmd.Dir = spec.Env, spec.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: c.TTY}
	if err := cmd.Start(); err != nil {
		return Process{}, err
	}
	pid := cmd.Process.Pid
	// Descendants are remembered while the command runs: one that later
	// leaves the tree (double fork) is still known by its pid.
	seen := map[int]bool{}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				for _, p := range treeOf(pid, seen) {
					seen[p] = true
				}
			}
		}
	}()
	return Process{
		Wait: func() (Exit, error) {
			err := cmd.Wait()
			close(stop)
			<-stopped
			for range 3 {
				unix.Kill(-pid, unix.SIGKILL)
				left := treeOf(pid, seen)
				if len(left) == 0 {
					break
				}
				for _, p := range left {
					unix.Kill(p, unix.SIGKILL)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if cmd.ProcessState == nil {
				return Exit{Code: -1}, err
			}
			return exitOf(cmd.ProcessState), nil
		},
		Kill:   func() { unix.Kill(-pid, unix.SIGKILL) },
		Signal: func(sig syscall.Signal) error { return signalGroup(pid, sig) },
		Pid:    pid,
	}, nil
}

// groupAttr puts a command in a process group of its own, killed as one.
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// openDir gives no descriptor: no backend here binds by one.
func openDir(dir string) (*os.File, error) { return nil, nil }

// treeOf lists the live processes below root (by parent), in its process
// group, or among known.
func treeOf(root int, known map[int]bool) []int {
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	for _, p := range procs {
		parent[int(p.Proc.P_pid)] = int(p.Eproc.Ppid)
	}
	var out []int
	for _, p := range procs {
		pid := int(p.Proc.P_pid)
		if pid == root {
			continue
		}
		in := known[pid] || int(p.Eproc.Pgid) == root
		for q, i := parent[pid], 0; !in && q > 1 && i < 64; q, i = parent[q], i+1 {
			in = q == root
		}
		if in {
			out = append(out, pid)
		}
	}
	return out
}

func (s *sandboxExec) Guarantees() Guarantees {
	notKept := map[int]string{
		3: "no pid namespace on macOS: the command's process group and every descendant seen (looked for every 100 ms) are killed, but a process that leaves the tree and its group within 100 ms of starting can survive",
		7: "timeout, output, per-file size and core dumps only: the process, memory and disk watchdog is not implemented on macOS yet",
	}
	how := map[int]string{
		1: "writes of any kind (contents, modes, owners, times, extended attributes) only in the jail and a few devices",
		2: "unix sockets only inside the jail; mach services limited to a short list without LaunchServices, AppleEvents or launchd; signals and process information only within the sandbox; POSIX and SysV IPC denied",
	}
	return guarantees(notKept, how)
}

// unreadHow: the profile's rules, by path, made later included.
func (s *sandboxExec) unreadHow() (string, []string) {
	return "denied by the profile's file-read* rules (reads fail with EPERM), paths made later included; other sessions' jails denied but the session's own; process information only within the sandbox", []string{}
}

// Egress: not on macOS yet.
func (s *sandboxExec) Egress() error {
	return fmt.Errorf("%w: sandbox-exec does not yet", ErrNoEgress)
}
