package session

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/limits"
)

// kernelBound is the bound the kernel enforced by itself on a call (a
// refused fork, an OOM kill), often before the watchdog looks. Cgroups a
// session agent's calls share (shared: no cgroups of the call's own)
// tell of all of them: an OOM kill is this call's only when it was
// killed, and a refused fork may be another's (the watchdog holds each
// to its own count).
func kernelBound(cc *limits.Group, mark limits.Mark, shared bool, exit jail.Exit) limits.Bound {
	lim := cc.ExceededSince(mark)
	// (137: a shell's report of its child killed by SIGKILL.)
	if !shared || lim == limits.BoundMemory && (exit.Signal == syscall.SIGKILL || exit.Code == 128+int(syscall.SIGKILL)) {
		return lim
	}
	return ""
}

// wait waits for proc to exit, its timeout, the call's cancellation or a
// bound the watchdog finds crossed, whichever comes first, and kills it
// for any but the first. It returns what stopped it (Exited: nothing),
// the bound, its exit, and the loss of its session agent, if that ended it.
func (s *Session) wait(ctx context.Context, proc jail.Process, cc *limits.Group, mark limits.Mark, shared bool, timeout time.Duration) (stopped End, bound limits.Bound, exit jail.Exit, lost error) {
	type ended struct {
		exit jail.Exit
		err  error
	}
	exited := make(chan ended, 1)
	go func() { e, err := proc.Wait(); exited <- ended{e, err} }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	hit := make(chan limits.Bound, 1)
	stopWatch := s.m.watchBounds(s, proc.Pid, proc.Tree, cc, mark, shared, hit)
	defer stopWatch()

	var end ended
	select {
	case end = <-exited:
		return Exited, "", end.exit, end.err
	case <-timer.C:
		stopped = TimedOut
	case <-ctx.Done():
		stopped = Cancelled
	case bound = <-hit:
		stopped = OverBound
	}
	proc.Kill()
	end = <-exited
	return stopped, bound, end.exit, end.err
}

// progress reports the latest output line once a second until stopped. The
// returned stop function returns only once no report is in flight, and no
// report starts after it.
func progress(report func(time.Duration, string), start time.Time, lastLine func() string) func() {
	var mu sync.Mutex
	stopped := false
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last := ""
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			line := lastLine()
			if line == "" {
				line = last
			}
			last = line
			mu.Lock()
			if !stopped {
				report(time.Since(start), line)
			}
			mu.Unlock()
		}
	}()
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		close(done)
	}
}
