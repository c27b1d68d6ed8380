package jail

import (
	"fmt"
	"os/exec"
	"syscall"
)

// Unconfined runs commands with no confinement at all. It exists only for
// --fallback warn; every result of a command it ran says confined: false.
type Unconfined struct{}

func (Unconfined) Name() string                { return "none" }
func (Unconfined) Confined() bool              { return false }
func (Unconfined) Credentials() CredentialMode { return CopyCredentials }
func (Unconfined) Agents() bool                { return false }

func (Unconfined) Runner(spec Spec, launch Launcher) (Runner, error) {
	if spec.Overlay != nil {
		return nil, ErrNoOverlay
	}
	return &directRunner{spec: spec, start: startUnconfined}, nil
}

func startUnconfined(spec Spec, c Call) (Process, error) {
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env, cmd.Dir = spec.Env, spec.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	cmd.SysProcAttr = groupAttr()
	wait, err := startOn(cmd, c.Launch)
	if err != nil {
		if cmd.Err != nil || isNotFound(err) {
			return Process{}, notFound(spec.Argv[0], err)
		}
		return Process{}, err
	}
	pid := cmd.Process.Pid
	return Process{
		Wait: func() (Exit, error) {
			err := wait()
			if cmd.ProcessState == nil {
				return Exit{Code: -1}, err
			}
			return exitOf(cmd.ProcessState), nil
		},
		Kill:   func() { killGroup(pid) },
		Signal: func(sig syscall.Signal) error { return signalGroup(pid, sig) },
		Pid:    pid,
	}, nil
}

func (Unconfined) Guarantees() Guarantees {
	none := "no confinement: --fallback warn is in effect"
	return guarantees(map[int]string{1: none, 2: none, 3: none, 5: none, 6: "only the environment is an allowlist: every file the server's user reads is readable", 7: "only timeout and output are bounded", 8: "the operator chose --fallback warn", 9: "another session's jail and processes are readable"}, nil)
}

var _ = syscall.SIGKILL

// Egress: nothing holds an unconfined command to anything.
func (Unconfined) Egress() error {
	return fmt.Errorf("%w: commands run unconfined (--fallback warn)", ErrNoEgress)
}
