package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
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
	Auth    []string          // nil: every CLI the operator enabled

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

// Result is the outcome of a command that ran.
type Result struct {
	ExitCode     int
	Signal       string
	SignalNumber int
	TimedOut     bool
	Cancelled    bool
	Limit        string
	// LimitAfterExit: Limit ("disk") was found crossed once the command
	// had exited, between two looks of the watchdog; it was not killed
	// for it, and no call runs until the jail is back under the bound.
	LimitAfterExit bool
	// AgentRestarted says why the session agent of the call's policy had
	// ended, when this call started a new one.
	AgentRestarted string
	// AgentLost says why the session agent ended during the call, which
	// took the command with it.
	AgentLost  string
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

// InputError is a request the caller must fix; nothing ran.
type InputError struct{ msg string }

func (e *InputError) Error() string { return e.msg }

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
	cfg := s.m.cfg
	argv, err := req.argv()
	if err != nil {
		return nil, err
	}
	dir, err := s.resolveCwd(req.Cwd)
	if err != nil {
		return nil, err
	}
	if err := checkEnv(req.Env); err != nil {
		return nil, &InputError{msg: err.Error()}
	}
	if req.Timeout < 0 {
		return nil, inputErrorf("timeout must be positive")
	}
	timeout := min(cmp.Or(req.Timeout, cfg.Timeout), cfg.MaxTimeout)
	if req.Job {
		timeout = min(cmp.Or(req.Timeout, cfg.MaxJobTime), cfg.MaxJobTime)
	}
	network := cfg.Network
	if req.Network != nil {
		if *req.Network && !cfg.Network {
			return nil, inputErrorf("network: the operator turned network off (--network off); a call can turn it off, never on")
		}
		network = *req.Network
	}
	names, err := auth.Narrow(cfg.Auth, req.Auth)
	if err != nil {
		return nil, &InputError{msg: "auth: " + err.Error()}
	}
	backend := cfg.Backend
	if jail.IsRefusing(backend) {
		_, err := backend.Runner(jail.Spec{}, nil)
		return nil, err
	}

	s.resetMu.RLock()
	defer s.resetMu.RUnlock()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("session %s: %w", s.Name, errClosed)
	}
	if cfg.MaxDisk > 0 {
		// No call starts in a jail over its bound; one whose usage
		// cannot be told is not run either (fail closed).
		u, err := s.diskUsage(diskEvery * watchInterval)
		if err != nil {
			return nil, fmt.Errorf("count the jail's usage for --max-disk: %w", err)
		}
		if u.Bytes > cfg.MaxDisk {
			return nil, inputErrorf("the jail holds %d bytes, over --max-disk %d: remove files or call jail_reset", u.Bytes, cfg.MaxDisk)
		}
	}
	s.ensureSkeleton()
	exps := s.m.exposures(names)
	var credEnv []string
	for _, e := range exps {
		credEnv = append(credEnv, e.Env...)
	}
	call := jail.Call{Argv: argv, Dir: dir, Env: buildEnv(cfg.Environ, cfg.PassEnv, s.Path, credEnv, req.Env)}

	var runner jail.Runner
	var slot *agentSlot
	var restarted string
	var opened []*os.File
	defer func() { closeAll(opened) }()
	if backend.Agents() {
		// The session agent of this call's policy: under bwrap its sandbox
		// binds the policy's credentials.
		if slot, restarted, err = s.agent(network, names, exps); err != nil {
			return nil, err
		}
		defer func() { s.agentDone(slot) }()
		runner = slot.runner
	} else {
		// A command on its own, its credentials bound for it.
		spec := jail.Spec{Argv: argv, Dir: dir, Env: call.Env, Jail: s.Path, Network: network, Visible: []string{cfg.Project}}
		jf, err := s.openJail()
		if err != nil {
			return nil, err
		}
		if jf != nil {
			opened = append(opened, jf)
			spec.JailFile = jf
		}
		if backend.Credentials() == jail.BindCredentials {
			if err := s.bindCredentials(&spec, exps, &opened); err != nil {
				return nil, fmt.Errorf("expose credentials: %w", err)
			}
		}
		if runner, err = backend.Runner(spec, nil); err != nil {
			return nil, fmt.Errorf("prepare %s: %w", spec, err)
		}
		defer runner.Close()
	}
	if mode := backend.Credentials(); mode != jail.BindCredentials {
		undo, err := s.placeCredentials(exps, mode == jail.LinkCredentials)
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
	res, err := s.run(ctx, runner, slot, call, req, timeout)
	if slot != nil && errors.Is(err, jail.ErrAgentLost) && ctx.Err() == nil {
		// The agent was lost before it started the command (killed from
		// the host, say): the call runs once on a new one, which says why.
		next, why, aerr := s.agent(network, names, exps)
		if aerr != nil {
			return nil, aerr
		}
		s.agentDone(slot)
		slot, restarted = next, why
		res, err = s.run(ctx, slot.runner, slot, call, req, timeout)
	}
	if res != nil {
		res.AgentRestarted = restarted
	}
	return res, err
}

func (r Request) argv() ([]string, error) {
	switch {
	case r.Command != "" && len(r.Argv) > 0:
		return nil, inputErrorf("give exactly one of command and argv, not both")
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
	case within(canon, s.Path):
		return canon, nil
	case within(canon, s.m.cfg.Root) || within(canon, filepath.Join(project, BaseName)):
		return "", inputErrorf("cwd %q: inside the jail base but not this session's jail %s", cwd, s.Path)
	case within(canon, project):
		return canon, nil
	}
	return "", inputErrorf("cwd %q: outside the project %s and the session's jail", cwd, project)
}

// run starts call with runner (slot: the session agent it is, or nil)
// and waits for it, its output and its deadline.
func (s *Session) run(ctx context.Context, runner jail.Runner, slot *agentSlot, call jail.Call, req Request, timeout time.Duration) (*Result, error) {
	cfg := s.m.cfg
	res := &Result{
		Session: s.Name, Jail: s.Path, Backend: cfg.Backend.Name(),
		Confined: cfg.Backend.Confined(), Timeout: timeout,
	}

	// Whole output is spilled to one directory per call, made on demand.
	var (
		outOnce sync.Once
		outDir  string
		outErr  error
	)
	id := time.Now().UTC().Format("20060102-150405") + "-" + uuid.NewString()[:8]
	spill := func(name string) func() (io.WriteCloser, error) {
		return func() (io.WriteCloser, error) {
			outOnce.Do(func() { outDir, outErr = s.newOutputDir(id) })
			if outErr != nil {
				return nil, outErr
			}
			return s.createOutput(outDir, name)
		}
	}
	stdout := newCapture(cfg.MaxOutput, spill("stdout"))
	stderr := newCapture(cfg.MaxOutput, spill("stderr"))
	if cfg.MaxDisk > 0 {
		// The kept output counts against the jail's disk bound and must
		// stay under the per-file bound the server itself is held to.
		stdout.keepMax = min(MaxKept, cfg.MaxDisk/4)
		stderr.keepMax = stdout.keepMax
	}

	// The command gets pipes of its own, never the server's stdin or
	// stdout, and only fds 0-2.
	var readers []*os.File
	var copies sync.WaitGroup
	attach := func(dst io.Writer) (*os.File, error) {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		readers = append(readers, r)
		copies.Go(func() { io.Copy(dst, r) })
		return w, nil
	}
	var outW, errW io.Writer = stdout, stderr
	if req.Stdout != nil {
		outW = req.Stdout
	}
	if req.Stderr != nil {
		errW = req.Stderr
	}
	counted := [2]*counter{{w: outW}, {w: errW}}
	nothing := func() {}
	wout, werr := nothing, nothing
	releaseStdin, stopStdin, feedStdin := nothing, nothing, nothing
	if req.TTY != nil {
		// The caller reads the terminal: the output goes through it.
		call.Stdin, call.Stdout, call.Stderr, call.TTY = req.TTY, req.TTY, req.TTY, true
	} else {
		wo, err := attach(counted[0])
		if err != nil {
			return nil, fmt.Errorf("create pipe: %w", err)
		}
		we, err := attach(counted[1])
		if err != nil {
			wo.Close()
			closeAll(readers)
			return nil, fmt.Errorf("create pipe: %w", err)
		}
		stdin, release, stop, feed, err := stdinFile(req.Stdin)
		if err != nil {
			wo.Close()
			we.Close()
			closeAll(readers)
			return nil, err
		}
		wout, werr = func() { wo.Close() }, func() { we.Close() }
		releaseStdin, stopStdin, feedStdin = release, stop, feed
		call.Stdin, call.Stdout, call.Stderr = stdin, wo, we
	}
	defer releaseStdin()
	defer stopStdin()

	// Where the server can make cgroups, the kernel bounds processes and
	// memory exactly: a command on its own in cgroups of its own, a
	// session agent's commands in the agent's, each call held to the
	// bounds by the watchdog besides.
	var cc *callCgroup
	var mark cgroupMark
	if slot != nil {
		cc = slot.cc
		mark = cc.mark()
	} else if l := s.m.takeLauncher(); l != nil {
		cc, call.Launch = l.cc, l.launch
		// Removing a cgroup waits for its last process to be reaped by the
		// kernel; the result need not wait for that.
		defer s.m.removeCgroups(cc)
	}
	start := time.Now()
	proc, err := runner.Run(call)
	wout()
	werr()
	releaseStdin()
	if err != nil {
		closeAll(readers)
		copies.Wait()
		if errors.Is(err, jail.ErrNotFound) {
			return nil, inputErrorf("argv[0] %q: not found in the jail's PATH", call.Argv[0])
		}
		return nil, fmt.Errorf("start %s: %w", call.Argv[0], err)
	}
	feedStdin()
	if req.Started != nil {
		sig := proc.Signal
		if sig == nil {
			sig = func(syscall.Signal) error { return errors.New("this backend cannot signal a command") }
		}
		req.Started(sig)
	}

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	type ended struct {
		exit jail.Exit
		err  error
	}
	exited := make(chan ended, 1)
	go func() { e, err := proc.Wait(); exited <- ended{e, err} }()

	stopProgress := func() {}
	if req.Progress != nil {
		stopProgress = progress(req.Progress, start, stdout, stderr)
	}

	hit := make(chan string, 1)
	stopWatch := s.m.watch(s, proc.Pid, proc.Tree, cc, mark, hit)

	var end ended
	select {
	case end = <-exited:
	case <-timer.C:
		res.TimedOut, res.Limit = true, "timeout"
		proc.Kill()
		end = <-exited
	case <-ctx.Done():
		res.Cancelled = true
		proc.Kill()
		end = <-exited
	case res.Limit = <-hit:
		proc.Kill()
		end = <-exited
	}
	stopWatch()
	if res.Limit == "" && cc != nil {
		// The kernel enforces cgroup bounds by itself (a refused fork, an
		// OOM kill), often before the watchdog looks: ask it. Cgroups a
		// session agent's calls share tell of all of them: an OOM kill is
		// this call's only when it was killed, and a refused fork may be
		// another's (the watchdog holds each to its own count).
		lim := cc.exceededSince(mark)
		// (137: a shell's report of its child killed by SIGKILL.)
		if slot == nil || lim == "memory" && (end.exit.Signal == syscall.SIGKILL || end.exit.Code == 128+int(syscall.SIGKILL)) {
			res.Limit = lim
		}
	}
	stopProgress()
	res.Duration = time.Since(start)
	stopStdin()
	// Whatever is left of the command (a background child of one that ran
	// on its own) goes with it.
	proc.Kill()
	if req.Ended != nil {
		req.Ended()
	}
	drain(&copies, readers)

	if end.err != nil {
		// The session agent ended under the call: the command is gone
		// with it, and the next call starts a new agent.
		res.AgentLost = end.err.Error()
	}
	res.ExitCode = end.exit.Code
	if end.exit.Signal != 0 {
		res.ExitCode = -1
		res.Signal, res.SignalNumber = signalName(end.exit.Signal), int(end.exit.Signal)
	}
	// The kernel sends SIGXFSZ only for the per-file bound (bubblewrap
	// reports a command a signal killed as 128+N). A file stopped there
	// can also fill the jail (the two bounds are one size): what killed
	// the command is what the result names.
	if (res.Limit == "" || res.Limit == "disk") && (res.SignalNumber == fileSizeSignal || res.Signal == "" && res.ExitCode == 128+fileSizeSignal) {
		res.Limit = "file_size"
	}

	where := filepath.Join(s.Path, outDir)
	res.Stdout, _ = stdout.finish(filepath.Join(where, "stdout"))
	res.Stderr, _ = stderr.finish(filepath.Join(where, "stderr"))
	if req.Stdout != nil {
		res.Stdout = Stream{Bytes: counted[0].n}
	}
	if req.Stderr != nil {
		res.Stderr = Stream{Bytes: counted[1].n}
	}
	if outDir != "" && outErr == nil {
		res.OutputPath = where
		s.completeOutput(outDir, stdout, stderr)
	}
	s.checkDiskAfter(res)
	return res, nil
}

// checkDiskAfter tells the call during which the jail crossed its disk
// bound, when the watchdog has not caught it (a fast writer can fill a
// jail between two of its looks): the usage after the call, its kept
// output included. Where the usage watch keeps it, the look costs what
// the call changed; elsewhere it is the walk of the last second.
func (s *Session) checkDiskAfter(res *Result) {
	max := s.m.cfg.MaxDisk
	if max <= 0 || res.Limit != "" {
		return
	}
	if u, err := s.diskUsage(diskEvery * watchInterval); err == nil && u.Bytes > max {
		res.Limit, res.LimitAfterExit = "disk", true
	}
}

// completeOutput writes the stream that was not cut into the output
// directory too, so it holds the whole output of the call.
func (s *Session) completeOutput(dir string, streams ...*capture) {
	for i, c := range streams {
		all, whole := c.inline()
		if !whole {
			continue
		}
		name := [2]string{"stdout", "stderr"}[i]
		if f, err := s.createOutput(dir, name); err == nil {
			f.Write(all)
			f.Close()
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
func progress(report func(time.Duration, string), start time.Time, caps ...*capture) func() {
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
			line := ""
			for _, c := range caps {
				if l := c.LastLine(); l != "" {
					line = l
				}
			}
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
