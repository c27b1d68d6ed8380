package jail

import "os/exec"

// startOn starts cmd from a thread of launch (nil: a fresh one), which
// waits for it and then dies with it: the thread is never handed back to
// the Go runtime, and a parent-death signal tied to the forking thread
// fires only when the command is gone.
func startOn(cmd *exec.Cmd, launch Launcher) (wait func() error, err error) {
	if launch == nil {
		launch = FreshThread
	}
	started := make(chan error, 1)
	done := make(chan error, 1)
	launch(func() {
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		done <- cmd.Wait()
	})
	if err := <-started; err != nil {
		return nil, err
	}
	return func() error { return <-done }, nil
}
