package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/egress"
	"github.com/jail-mcp/jail-mcp/session/jailfs"
	"github.com/jail-mcp/jail-mcp/session/limits"
	"github.com/jail-mcp/jail-mcp/session/output"
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

// Stream is the outcome of one captured output stream (session/output).
type Stream = output.Stream

// Result is the outcome of a command that ran.
type Result struct {
	// End is how it ended; Limit the bound it went over (End OverBound
	// or TimedOut), else a bound it met on its own way out:
	// limits.BoundFileSize (a write refused), limits.BoundDisk (the jail
	// found full once it ended).
	End          End
	Limit        limits.Bound
	ExitCode     int // -1 when killed by a signal
	Signal       string
	SignalNumber int
	// SharedMemory is, for a command the watchdog killed over
	// --max-memory, how many bytes of the memory it counted the session's
	// shared memory held (its /dev/shm and System V segments), which
	// outlives the call.
	SharedMemory int64
	// AgentRestarted says why the session agent of the call's policy had
	// ended, when this call started a new one.
	AgentRestarted string
	// AgentLost says why the session agent ended during the call, which
	// took the command with it.
	AgentLost string
	// RefusedWrite is the first path of the project the jail refused the
	// command a write to (the project is read-only), RefusedWrites how
	// many it refused; seen by the session agent's write watch, so empty
	// on a backend without agents.
	RefusedWrite  string
	RefusedWrites int
	// Stopped, when set, says why the session agent ended the command:
	// the host moved what its read view granted into a denied path while
	// it ran (a rule of the view would have let it read there), or it held
	// more inotify watches than its share of the user's.
	Stopped string
	// Refusals are the connections the proxy of an allowlist refused
	// while the command ran (in its session agent, all of its calls').
	Refusals   []egress.Refusal
	Stdout     Stream
	Stderr     Stream
	OutputPath string // host path of the directory holding the whole output, when cut
	Duration   time.Duration
	Timeout    time.Duration // the timeout that applied
	Session    string
	Jail       string
	Backend    string
	Confined   bool
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

// stdinFile is the command's standard input as a file: the caller's own
// file (jail-mcp run), /dev/null, or a pipe fed from r. release closes
// what the server holds of it once the command has it; stop, once the
// command is gone, ends the feeding that a command which never read would
// otherwise hold up; feed starts the feeding, once the command started, so
// that a call run again on a new agent reads r whole. All are idempotent.
func stdinFile(r io.Reader) (f *os.File, release, stop, feed func(), err error) {
	nothing := func() {}
	switch in := r.(type) {
	case *os.File:
		return in, nothing, nothing, nothing, nil
	case nil:
		f, err := os.Open(os.DevNull)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		return f, sync.OnceFunc(func() { f.Close() }), nothing, nothing, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	feed = sync.OnceFunc(func() {
		go func() {
			io.Copy(pw, r)
			pw.Close()
		}()
	})
	return pr, sync.OnceFunc(func() { pr.Close() }), sync.OnceFunc(func() { pw.Close() }), feed, nil
}

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
	var slot *agentSlot
	var restarted string
	if cfg.Backend.Agents() {
		// The session agent of this call's policy: under bwrap its sandbox
		// binds the policy's credentials.
		if slot, restarted, err = s.agent(p, exps); err != nil {
			return nil, err
		}
		defer func() { s.agentDone(slot) }()
		runner = slot.runner
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
		if slot != nil {
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
	res, err := s.run(ctx, runner, slot, call, req, p)
	if slot != nil && errors.Is(err, jail.ErrAgentLost) && ctx.Err() == nil {
		// The agent was lost before it started the command (killed from
		// the host, say): the call runs once on a new one, which says why.
		next, why, aerr := s.agent(p, exps)
		if aerr != nil {
			return nil, aerr
		}
		s.agentDone(slot)
		slot, restarted = next, why
		res, err = s.run(ctx, slot.runner, slot, call, req, p)
	}
	if res != nil {
		res.AgentRestarted = restarted
	}
	return res, err
}

// callPlan is a request checked against the operator's configuration:
// what runs, where, for how long, and under which policy.
type callPlan struct {
	argv    []string
	dir     string
	timeout time.Duration
	network bool
	allow   *egress.Policy // with network: the allowlist it is held to
	auth    []string       // the CLIs whose credentials it sees
}

// plan checks req against the configuration; every refusal is an
// *InputError but that of a backend that refuses every call.
func (s *Session) plan(req Request) (callPlan, error) {
	cfg := s.m.cfg
	var p callPlan
	var err error
	if p.argv, err = req.argv(); err != nil {
		return p, err
	}
	if p.dir, err = s.resolveCwd(req.Cwd); err != nil {
		return p, err
	}
	if err := view.CheckEnv(req.Env); err != nil {
		return p, &InputError{msg: err.Error()}
	}
	if req.Timeout < 0 {
		return p, inputErrorf("timeout must be positive")
	}
	p.timeout = min(cmp.Or(req.Timeout, cfg.Timeout), cfg.MaxTimeout)
	if req.Job {
		p.timeout = min(cmp.Or(req.Timeout, cfg.MaxJobTime), cfg.MaxJobTime)
	}
	if err := p.networkOf(cfg, req); err != nil {
		return p, err
	}
	if p.auth, err = auth.Narrow(cfg.Auth, req.Auth); err != nil {
		return p, &InputError{msg: "auth: " + err.Error()}
	}
	if jail.IsRefusing(cfg.Backend) {
		_, err := cfg.Backend.Runner(jail.Spec{}, nil)
		return p, err
	}
	if p.allow != nil && (cfg.Backend.Egress() != nil || !cfg.Backend.Agents()) {
		// Never the whole network for an allowlist (fail closed).
		err := cmp.Or(cfg.Backend.Egress(), jail.ErrNoEgress)
		return p, &InputError{msg: "network: " + err.Error()}
	}
	return p, nil
}

// networkOf sets the call's network: the operator's, turned off or
// narrowed to an allowlist by the request, never widened.
func (p *callPlan) networkOf(cfg Config, req Request) error {
	p.network, p.allow = cfg.Network, cfg.Allow
	if req.Network != nil {
		if *req.Network && !cfg.Network {
			return inputErrorf("network: the operator turned network off (--network off); a call can turn it off, never on")
		}
		p.network = *req.Network
		if !p.network {
			p.allow = nil
		}
	}
	if req.Allow == nil {
		return nil
	}
	switch {
	case !p.network:
		return inputErrorf("allow: network is off for this call; an allowlist narrows network that is on")
	case len(req.Allow) == 0:
		return inputErrorf("allow: an empty list; give network: false to cut network")
	}
	sub, err := egress.Parse(strings.Join(req.Allow, ","))
	if err != nil {
		return inputErrorf("allow: %v", err)
	}
	if p.allow != nil {
		if sub, err = p.allow.Narrow(sub); err != nil {
			return inputErrorf("allow: %v", err)
		}
	}
	p.allow = &sub
	return nil
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

// ownRunner is the runner of a command on its own (a backend without
// session agents), its credentials bound for it; done releases it.
func (s *Session) ownRunner(call jail.Call, p callPlan, exps []auth.Exposure) (r jail.Runner, done func(), err error) {
	spec := s.sandboxSpec(call.Dir, p.network, exps)
	spec.Argv, spec.Env = call.Argv, call.Env
	opened, err := s.sandboxFiles(&spec, exps)
	if err == nil {
		if r, err = s.m.cfg.Backend.Runner(spec, nil); err != nil {
			err = fmt.Errorf("prepare %s: %w", spec, err)
		}
	}
	if err != nil {
		closeAll(opened)
		return nil, nil, err
	}
	return r, func() { r.Close(); closeAll(opened) }, nil
}

// sandboxSpec is what every sandbox of the session holds, a command's
// own or a session agent's, running in dir with the network or not: the
// jail, what it sees of the host and what it never reads (the deny list,
// credentials not exposed in exps, other jails), the bound on its memory.
func (s *Session) sandboxSpec(dir string, network bool, exps []auth.Exposure) jail.Spec {
	cfg := s.m.cfg
	spec := jail.Spec{Dir: dir, Jail: s.Path, Network: network, Visible: []string{cfg.Project, cfg.Home}, Siblings: filepath.Dir(s.Path), Project: cfg.Project, MaxMemory: cfg.MaxMemory}
	spec.Unread, spec.Visible = s.unread(exps, spec.Visible)
	spec.Jails = s.m.registry
	return spec
}

// sandboxFiles gives spec the descriptors of a sandbox: the jail's, the
// project's writable directories', and under a backend that binds them
// the credentials of exps; the caller closes what it returns once the
// sandbox has them, also on an error.
func (s *Session) sandboxFiles(spec *jail.Spec, exps []auth.Exposure) ([]*os.File, error) {
	var opened []*os.File
	jf, err := s.openJail()
	if err != nil {
		return nil, err
	}
	if jf != nil {
		opened = append(opened, jf)
		spec.JailFile = jf
	}
	if err := s.viewFiles(spec, &opened); err != nil {
		return opened, err
	}
	// Each sandbox opens them anew, without following a link: one the
	// host removed since is made again.
	for _, w := range s.m.cfg.Writable {
		f, err := jailfs.OpenWritable(s.m.cfg.Project, w, true)
		if err != nil {
			return opened, fmt.Errorf("open writable directory %s: %w", w, err)
		}
		opened = append(opened, f)
		spec.Writable = append(spec.Writable, jail.WritableDir{Path: w, File: f})
	}
	if s.m.cfg.Backend.Credentials() == jail.BindCredentials {
		if err := s.creds.Bind(spec, exps, &opened); err != nil {
			return opened, fmt.Errorf("expose credentials: %w", err)
		}
	}
	return opened, nil
}

func (r Request) argv() ([]string, error) {
	switch {
	case r.Command != "" && len(r.Argv) > 0:
		return nil, ErrCommandAndArgv
	case r.Command != "":
		if strings.IndexByte(r.Command, 0) >= 0 {
			return nil, inputErrorf("command contains a NUL byte")
		}
		return []string{"/bin/sh", "-c", r.Command}, nil
	case len(r.Argv) > 0:
		if r.Argv[0] == "" {
			return nil, inputErrorf("argv[0] is empty")
		}
		for i, a := range r.Argv {
			if strings.IndexByte(a, 0) >= 0 {
				return nil, inputErrorf("argv[%d] contains a NUL byte", i)
			}
		}
		return r.Argv, nil
	}
	return nil, inputErrorf("give one of command (a shell line) or argv (a program and its arguments)")
}

// resolveCwd resolves cwd against the project, follows symlinks, and
// accepts it only inside this session's jail or inside the project outside
// every jail.
func (s *Session) resolveCwd(cwd string) (string, error) {
	project := s.m.cfg.Project
	if cwd == "" {
		return project, nil
	}
	if strings.IndexByte(cwd, 0) >= 0 {
		return "", inputErrorf("cwd contains a NUL byte")
	}
	p := cwd
	if !filepath.IsAbs(p) {
		p = filepath.Join(project, p)
	}
	canon, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", inputErrorf("cwd %q: no such directory", cwd)
	}
	fi, err := os.Stat(canon)
	if err != nil || !fi.IsDir() {
		return "", inputErrorf("cwd %q: not a directory", cwd)
	}
	switch {
	case jail.Within(canon, s.Path):
		return canon, nil
	case jail.Within(canon, s.m.cfg.Root) || jail.Within(canon, filepath.Join(project, BaseName)):
		return "", inputErrorf("cwd %q: inside the jail base but not this session's jail %s", cwd, s.Path)
	case jail.Within(canon, project):
		return canon, nil
	}
	return "", inputErrorf("cwd %q: outside the project %s and the session's jail", cwd, project)
}

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

// finishOutput puts the call's output in res: what the captures hold, or
// (jail-mcp run, whose output went to its own writers) the byte counts.
func (s *Session) finishOutput(res *Result, out *output.Call, req Request, counted [2]*counter) {
	var where string
	res.Stdout, res.Stderr, where = out.Finish(s.Path)
	if req.Stdout != nil {
		res.Stdout = Stream{Bytes: counted[0].n}
	}
	if req.Stderr != nil {
		res.Stderr = Stream{Bytes: counted[1].n}
	}
	if where != "" {
		res.OutputPath = where
	}
}

// callStreams are a call's standard streams as the server holds them:
// pipes of the command's own, never the server's stdin or stdout (or the
// caller's terminal), and only fds 0-2.
type callStreams struct {
	readers []*os.File
	copies  sync.WaitGroup
	counted [2]*counter
	// started closes the server's copies of what the command now holds;
	// stopStdin ends the feeding of a command that never read, once it is
	// gone; feed starts the feeding once it started; closeStdin is both.
	started, stopStdin, feed func()
}

func (c *callStreams) closeStdin() { c.started(); c.stopStdin() }

// drain waits for the output copies to end; when something outside the
// jail's control still holds a pipe open, the pipes are closed after grace.
func (c *callStreams) drain() { drain(&c.copies, c.readers) }

// attachStreams gives call its standard streams, per req: the terminal's
// far end, or pipes whose output goes to out (or req's own writers) and
// the input req gives.
func attachStreams(call *jail.Call, req Request, out *output.Call) (*callStreams, error) {
	nothing := func() {}
	c := &callStreams{started: nothing, stopStdin: nothing, feed: nothing}
	outW, errW := out.Writers()
	if req.Stdout != nil {
		outW = req.Stdout
	}
	if req.Stderr != nil {
		errW = req.Stderr
	}
	c.counted = [2]*counter{{w: outW}, {w: errW}}
	if req.TTY != nil {
		// The caller reads the terminal: the output goes through it.
		call.Stdin, call.Stdout, call.Stderr, call.TTY = req.TTY, req.TTY, req.TTY, true
		return c, nil
	}
	var ws []*os.File
	fail := func(err error) (*callStreams, error) {
		closeAll(ws)
		closeAll(c.readers)
		return nil, err
	}
	for _, dst := range c.counted {
		r, w, err := os.Pipe()
		if err != nil {
			return fail(fmt.Errorf("create pipe: %w", err))
		}
		c.readers, ws = append(c.readers, r), append(ws, w)
		c.copies.Go(func() { io.Copy(dst, r) })
	}
	stdin, release, stop, feed, err := stdinFile(req.Stdin)
	if err != nil {
		return fail(err)
	}
	c.started = sync.OnceFunc(func() { closeAll(ws); release() })
	c.stopStdin, c.feed = stop, feed
	call.Stdin, call.Stdout, call.Stderr = stdin, ws[0], ws[1]
	return c, nil
}

// checkDiskAfter tells the call during which the jail crossed its disk
// bound, when the watchdog has not caught it (a fast writer can fill a
// jail between two of its looks): the usage after the call, its kept
// output included. Where the usage watch keeps it, the look costs what
// the call changed; elsewhere it is the walk of the last second.
func (s *Session) checkDiskAfter(res *Result) {
	cfg := &s.m.cfg
	if cfg.MaxDisk <= 0 && cfg.MaxFiles <= 0 || res.Limit != "" {
		return
	}
	if u, err := s.diskUsage(limits.DiskAge); err == nil {
		if b := cfg.diskOver(u); b != "" {
			res.Limit = b
		}
	}
}

// drain waits for the output copies to end; when something outside the
// jail's control still holds a pipe open, the pipes are closed after grace.
func drain(copies *sync.WaitGroup, readers []*os.File) {
	done := make(chan struct{})
	go func() { copies.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		closeAll(readers)
		<-done
	}
	closeAll(readers)
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
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

// counter counts the bytes passed to w.
type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	// A failed write is dropped: the pipe keeps draining, so that the
	// command never blocks on output nobody reads.
	c.w.Write(p)
	return len(p), nil
}
