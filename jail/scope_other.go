//go:build !linux

package jail

import "os/exec"

// scoper has nothing to scope with off Linux.
type scoper struct{}

func (scoper) start(cmd *exec.Cmd, launch Launcher) (func() error, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd.Wait, nil
}
