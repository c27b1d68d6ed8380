package jail

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
)

// directRunner starts each command on its own, with start: for the
// backends without session agents.
type directRunner struct {
	spec   Spec
	start  func(Spec, Call) (Process, error)
	closed atomic.Bool
}

func (r *directRunner) Run(c Call) (Process, error) {
	if r.closed.Load() {
		return Process{}, errRunnerClosed
	}
	s := r.spec
	s.Argv, s.Env, s.Dir = c.Argv, c.Env, c.Dir
	if err := s.validate(); err != nil {
		return Process{}, err
	}
	return r.start(s, c)
}

// Close makes it refuse new commands; those it started are the caller's
// to kill.
func (r *directRunner) Close() { r.closed.Store(true) }

func (r *directRunner) Err() error {
	if r.closed.Load() {
		return errRunnerClosed
	}
	return nil
}

// exitOf is how a process the server waited for ended.
func exitOf(st *os.ProcessState) Exit {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return Exit{Code: -1, Signal: ws.Signal()}
	}
	return Exit{Code: st.ExitCode()}
}

// isNotFound reports a start that failed for want of the program.
func isNotFound(err error) bool {
	return errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist)
}

func notFound(name string, err error) error {
	return fmt.Errorf("%s: %w (%v)", name, ErrNotFound, err)
}
