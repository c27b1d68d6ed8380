package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"syscall"
	"time"

	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/limits"
	"github.com/jail-mcp/jail-mcp/session/view"
)

// Request is one command to run in a session's jail. Exactly one of Command
// and Argv is set.
type Request struct {
	Command string            // run with /bin/sh -c
	Argv    []string          // run directly
	Cwd     string            // relative to the project; empty: the project
	Stdin   io.Reader         // nil: empty standard input
	Env     map[string]string // added to the allowlisted environment
	Timeout time.Duration     // 0: the operator's default; clamped to MaxTimeout
	Network *bool             // nil: the operator's setting
	// Allow narrows the network to these destinations (HOST, *.DOMAIN,
	// HOST:PORT), within the operator's network: an allowlist held by
	// the server's proxy.
	Allow []string
	Auth  []string // nil: every CLI the operator enabled

	// Stdout and Stderr, when set, receive the output directly instead of
	// it being captured (jail-mcp run).
	Stdout, Stderr io.Writer

	// Progress, when set, is called at most once a second while the
	// command runs, with the time it has run and its latest output line;
	// never after the command has exited.
	Progress func(elapsed time.Duration, line string)

	// TTY, when set, is a terminal's far end: the command's standard
	// streams and controlling terminal (Stdin, Stdout and Stderr are then
	// not used; the caller reads and writes the terminal's near end).
	TTY *os.File

	// Job: the command is bounded by MaxJobTime, not by Timeout and
	// MaxTimeout (Timeout, when set, bounds it below MaxJobTime).
	Job bool

	// Started, when set, is called once the command runs, with what
	// signals every process of it.
	Started func(signal func(syscall.Signal) error)

	// Ended, when set, is called once the command has exited and what is
	// left of its process group has been killed, before the rest of their
	// output is copied: jail-mcp run puts its terminal back there, as a
	// copy to a terminal whose output the command stopped blocks for ever.
	Ended func()
}

// Millis is n milliseconds, or the longest Duration where n is longer.
func Millis(n int64) time.Duration {
	if n > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(n) * time.Millisecond
}

// InputError is a request the caller must fix; nothing ran.
type InputError struct{ msg string }

func (e *InputError) Error() string { return e.msg }

// ErrCommandAndArgv refuses a request that gives both.
var ErrCommandAndArgv error = &InputError{msg: "give exactly one of command and argv, not both"}

func inputErrorf(format string, a ...any) error {
	return &InputError{msg: fmt.Sprintf(format, a...)}
}

// grace is how long output pipes may stay open after the command is gone
// before they are closed under whoever holds them.
const grace = 500 * time.Millisecond

// Exec runs req in the session's jail. It returns an *InputError for a
// request that cannot run as given, an error wrapping jail.ErrUnavailable
// when no backend confines here, and otherwise a Result, also when the
// command failed, timed out or was cancelled.
func (s *Session) Exec(ctx context.Context, req Request) (*Result, error) {
	res, err := s.exec(ctx, req)
	if o := s.m.cfg.Observer; o != nil {
		if err != nil {
			o.Refused(err)
		} else {
			o.Ran(res)
		}
	}
	return res, err
}

func (s *Session) exec(ctx context.Context, req Request) (*Result, error) {
	p, err := s.plan(req)
	if err != nil {
		return nil, err
	}
	var refreshed []string
	if s.m.cfg.Overlay {
		refreshed = s.refreshIdle()
	}
	s.resetMu.RLock()
	defer s.resetMu.RUnlock()
	if err := s.admit(); err != nil {
		return nil, err
	}
	s.ensureSkeleton()
	exps := s.m.creds.Exposures(p.auth)
	var credEnv []string
	for _, e := range exps {
		credEnv = append(credEnv, e.Env...)
	}
	cfg := s.m.cfg
	// Masked variables reach the jail as placeholders, whether a CLI's or
	// passed (--pass-env); the request's own are its own.
	credEnv, host := s.creds.Env(credEnv, s.m.hostEnv())
	if cfg.Overlay {
		// Begun before the call learns its view, ended after everything
		// it ran is gone (deferred first, run last).
		defer s.views.Begin()()
	}
	call := jail.Call{Argv: p.argv, Dir: p.dir, Env: view.CallEnv(host, s.Path, credEnv, req.Env), ViewGen: s.m.view.Gen()}

	var runner jail.Runner
	var use agentUse
	// moved: the call changed the session's layer (agentDone).
	var moved bool
	if cfg.Backend.Agents() {
		// The session agent of this call's policy: under bwrap its sandbox
		// binds the policy's credentials.
		if use, err = s.agent(p, exps); err != nil {
			return nil, err
		}
		defer func() { s.agentDone(use.slot, moved) }()
		runner = use.slot.runner
		call.ViewGen = use.gen
	} else {
		r, done, err := s.ownRunner(call, p, exps)
		if err != nil {
			return nil, err
		}
		defer done()
		runner = r
	}
	switch mode := cfg.Backend.Credentials(); {
	case mode == jail.BindCredentials:
		if use.slot != nil {
			// Bound in a sandbox that runs on: its masked copies follow
			// the host's files.
			s.creds.Refresh(exps)
		}
	default:
		undo, err := s.creds.Place(exps, mode == jail.LinkCredentials)
		if err != nil {
			return nil, fmt.Errorf("place credentials in %s: %w", s.Path, err)
		}
		defer func() {
			if err := undo(); err != nil {
				s.m.log.Warn("remove credentials placed in the jail", "session", s.Name, "err", err)
			}
		}()
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer s.track(cancel)()
	res, err := s.run(ctx, runner, use.slot, call, req, p)
	if use.slot != nil && errors.Is(err, jail.ErrAgentLost) && ctx.Err() == nil {
		// The agent was lost before it started the command (killed from
		// the host, say): the call runs once on a new one, which says why.
		next, aerr := s.agent(p, exps)
		if aerr != nil {
			return nil, aerr
		}
		s.agentDone(use.slot, false)
		use = next
		call.ViewGen = use.gen
		res, err = s.run(ctx, use.slot.runner, use.slot, call, req, p)
	}
	if res != nil {
		res.AgentRestarted = use.restarted
		if !use.behind.IsZero() {
			res.ViewBehind = use.behind
		}
		s.noteLayer(res, refreshed)
		moved = res.Project != nil && res.Project.Total() > 0
	}
	return res, err
}

// admit refuses a call in a closed session, or in a jail over its disk
// or file bound.
func (s *Session) admit() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("session %s: %w", s.Name, errClosed)
	}
	cfg := &s.m.cfg
	if cfg.MaxDisk <= 0 && cfg.MaxFiles <= 0 {
		return nil
	}
	// No call starts in a jail over its bound; one whose usage cannot be
	// told is not run either (fail closed).
	u, err := s.diskUsage(limits.DiskAge)
	if err != nil {
		return fmt.Errorf("count the jail's usage for --max-disk and --max-files: %w", err)
	}
	switch cfg.diskOver(u) {
	case limits.BoundDisk:
		return inputErrorf("the jail holds %d bytes on disk, over --max-disk %d: remove files or call jail_reset", u.Bytes, cfg.MaxDisk)
	case limits.BoundFiles:
		return inputErrorf("the jail holds %d files, over --max-files %d: remove files or call jail_reset", u.Files, cfg.MaxFiles)
	}
	return nil
}
