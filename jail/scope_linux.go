package jail

import (
	"fmt"
	"os/exec"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// scopeABI is the first Landlock ABI that scopes abstract unix sockets and
// signals.
const scopeABI = 6

// scoper confines what bubblewrap cannot: with network on, the sandbox
// shares the host's network namespace and so its abstract unix sockets.
// A Landlock domain that scopes abstract sockets and signals, applied to
// the one OS thread that forks bubblewrap, is inherited by everything the
// command starts and by nothing else of the server.
type scoper struct {
	abi int // 0: Landlock scopes unavailable here
}

func newScoper() scoper {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < scopeABI {
		return scoper{}
	}
	return scoper{abi: abi}
}

func (s scoper) available() bool { return s.abi >= scopeABI }

// start starts cmd from a locked OS thread restricted by the domain, and
// waits for it on that thread, which dies with it: the thread is never
// handed back to the Go runtime, and a parent-death signal tied to the
// forking thread fires only when the command is gone.
func (s scoper) start(cmd *exec.Cmd, launch Launcher) (wait func() error, err error) {
	if launch == nil {
		launch = FreshThread
	}
	started := make(chan error, 1)
	done := make(chan error, 1)
	launch(func() {
		if s.available() {
			if err := restrictThread(); err != nil {
				started <- err
				return
			}
		}
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

// restrictThread applies the scoping domain to the calling thread only.
func restrictThread() error {
	cfg := landlock.Config{Scoped: ll.ScopeAbstractUnixSocket | ll.ScopeSignal}
	fd, flags, err := cfg.NewRulesetFD()
	if err != nil {
		return fmt.Errorf("landlock scope: %w", err)
	}
	if fd < 0 {
		return fmt.Errorf("landlock scope: nothing to enforce")
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock restrict: %w", err)
	}
	return nil
}
