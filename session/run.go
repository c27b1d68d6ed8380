package session

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/limits"
	"github.com/jail-mcp/jail-mcp/session/output"
)

// run starts call with runner (slot: the session agent it is, or nil)
// and waits for it, its output and its deadline (p's).
func (s *Session) run(ctx context.Context, runner jail.Runner, slot *agentSlot, call jail.Call, req Request, p callPlan) (*Result, error) {
	cfg := s.m.cfg
	timeout := p.timeout
	res := &Result{
		Session: s.Name, Jail: s.Path, Backend: cfg.Backend.Name(),
		Confined: cfg.Backend.Confined(), Timeout: timeout,
	}
	eg, refusals, err := s.callEgress(slot, &call, p)
	if err != nil {
		return nil, err
	}
	out := output.NewCall(s.outputs(), cfg.MaxOutput, output.KeptMax(cfg.MaxDisk))
	sio, err := attachStreams(&call, req, out)
	if err != nil {
		return nil, err
	}
	defer sio.closeStdin()

	cc, mark, release := s.callGroup(slot, &call)
	defer release()
	start := time.Now()
	proc, err := runner.Run(call)
	sio.started()
	if err != nil {
		sio.drain()
		return nil, s.startError(call.Argv[0], err)
	}
	sio.feed()
	if req.Started != nil {
		sig := proc.Signal
		if sig == nil {
			sig = func(syscall.Signal) error { return errors.New("this backend cannot signal a command") }
		}
		req.Started(sig)
	}
	stopProgress := func() {}
	if req.Progress != nil {
		stopProgress = progress(req.Progress, start, out.LastLine)
	}

	// A session agent's call that runs in cgroups of its own, nested in
	// the agent's (where the server makes cgroups), is held to its bounds
	// by the kernel, which counts there every fork it refused and every
	// process its OOM killer took: the call's alone.
	shared := slot != nil
	if pl, ok := proc.Placement.(*limits.CallPlacement); ok && pl.Group() != nil {
		cc, mark, shared = pl.Group(), pl.Mark(), false
		defer pl.Remove()
	} else if proc.Placement != nil {
		defer proc.Placement.Remove()
	}
	stopped, bound, exit, lost := s.wait(ctx, proc, cc, mark, shared, timeout)
	var kernel limits.Bound
	if stopped != OverBound && cc != nil {
		kernel = kernelBound(cc, mark, shared, exit)
	}
	stopProgress()
	res.Duration = time.Since(start)
	sio.stopStdin()
	// Whatever is left of the command (a background child of one that ran
	// on its own) goes with it.
	proc.Kill()
	if req.Ended != nil {
		req.Ended()
	}
	sio.drain()
	res.settle(stopped, bound, kernel, exit, lost)
	if stopped == OverBound && bound == limits.BoundMemory && proc.Tree != nil {
		res.SharedMemory = proc.Tree().Shared
	}
	if eg != nil {
		res.Refusals = eg.since(refusals)
	}
	s.finishOutput(res, out, req, sio.counted)
	s.checkDiskAfter(res)
	return res, nil
}

// callEgress is the proxy a call goes through (its session agent's, or
// the masking proxy's), with the call's environment pointed at it, and
// where its refusals of this call begin; nil when there is none.
func (s *Session) callEgress(slot *agentSlot, call *jail.Call, p callPlan) (eg *agentEgress, refusals egressMark, err error) {
	if slot != nil {
		eg = slot.egress
	}
	if p.network {
		// Masked credentials put the proxy in the path whenever the
		// network is on, and the jail trusts its authority; the
		// session's credentials say whether they are.
		if call.Env, eg, err = s.maskCall(call.Env, eg); err != nil {
			return nil, 0, err
		}
	}
	if eg != nil {
		// The proxy: the variables every client reads, and what it
		// refuses from now on.
		call.Env = proxyEnv(call.Env, eg.port)
		refusals = eg.mark()
	}
	return eg, refusals, nil
}

// callGroup is where the kernel bounds a call's processes and memory
// exactly, where the server can make cgroups: a command on its own in
// cgroups of its own (taken from the pool, with its launcher set in
// call), a session agent's commands in the agent's, each call held to
// the bounds by the watchdog besides. mark is where the call's count
// begins in cgroups it shares; release gives back what was taken.
func (s *Session) callGroup(slot *agentSlot, call *jail.Call) (cc *limits.Group, mark limits.Mark, release func()) {
	release = func() {}
	if slot != nil {
		cc = slot.cc
		if !slot.perCall {
			mark = cc.Mark()
		}
	} else if l := s.m.pool.Take(); l != nil {
		cc, call.Launch = l.Group(), l.Launch
		// Removing a cgroup waits for its last process to be reaped by the
		// kernel; the result need not wait for that.
		release = func() { s.m.pool.Remove(cc) }
	}
	return cc, mark, release
}

// startError is what a caller is told of a command that could not start:
// a name not on the jail's PATH, no memory left under --max-memory (and
// what the session's shared memory holds of it) are input errors.
func (s *Session) startError(argv0 string, err error) error {
	maxMem := s.m.cfg.MaxMemory
	if errors.Is(err, jail.ErrNotFound) {
		return inputErrorf("argv[0] %q: not found in the jail's PATH", argv0)
	}
	if nm := (*jail.NoMemoryError)(nil); errors.As(err, &nm) && maxMem > 0 {
		held := ""
		if nm.Shared > 0 {
			held = fmt.Sprintf("; the session's shared memory (its /dev/shm and System V segments, which outlive calls: remove their files, or jail_reset frees them) holds %d bytes", nm.Shared)
		}
		return inputErrorf("%s could not start: no memory left under --max-memory %d, which the session's calls share%s (%s)", argv0, maxMem, held, nm.Err)
	}
	if held := (*jail.SharedMemoryError)(nil); errors.As(err, &held) {
		return inputErrorf("the session's shared memory (its /dev/shm and System V segments, which outlive calls) holds %d bytes, over --max-memory %d: only jail_reset frees it (it ends the session's agents, and empties the jail)", held.Bytes, maxMem)
	}
	return fmt.Errorf("start %s: %w", argv0, err)
}
