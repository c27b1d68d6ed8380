package jail

import "os/exec"

// Unconfined runs commands with no confinement at all. It exists only for
// --fallback warn; every result of a command it ran says confined: false.
type Unconfined struct{}

func (Unconfined) Name() string                { return "none" }
func (Unconfined) Confined() bool              { return false }
func (Unconfined) Credentials() CredentialMode { return CopyCredentials }

func (Unconfined) Command(spec Spec) (*exec.Cmd, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env = spec.Env
	cmd.Dir = spec.Dir
	return cmd, nil
}

func (Unconfined) Start(cmd *exec.Cmd, launch Launcher) (Process, error) {
	wait, err := scoper{}.start(cmd, launch)
	return Process{Wait: wait}, err
}

func (Unconfined) Guarantees() Guarantees {
	none := "no confinement: --fallback warn is in effect"
	return guarantees(map[int]string{1: none, 2: none, 3: none, 5: none, 7: "only timeout and output are bounded", 8: "the operator chose --fallback warn"})
}
