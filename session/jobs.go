package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/google/uuid"

	"github.com/jail-mcp/jail-mcp/session/output"
)

// Job bounds by default.
const (
	DefaultMaxJobTime = time.Hour
	DefaultMaxJobs    = 16
)

// keepEnded is how many ended jobs a session keeps for reading; the
// oldest, those whose end was read first, are forgotten beyond it.
const keepEnded = 16

// outputSettle is how long a wait that saw new output waits for more before it
// returns: a burst of lines comes back as one read, not one per line.
const outputSettle = 5 * time.Millisecond

// inputTimeout bounds a write to a job's input that the job does not read.
const inputTimeout = 2 * time.Second

// Terminal size of a job run on a terminal.
const ttyRows, ttyCols = 40, 120

// errNoJob is a job id the session does not have.
var errNoJob = errors.New("no such job in this session")

// Job is a command that runs past its call: started in the background, or
// still running when its call stopped waiting for it. It belongs to its
// session, whose end (and jail_reset) kills it.
type Job struct {
	ID      string
	Command string // the command line, for listings
	TTY     bool
	Started time.Time

	s      *Session
	cancel context.CancelCauseFunc
	out    *output.JobStream // stdout, or the terminal's output
	errs   *output.JobStream // nil on a terminal
	outDir string            // the whole output, relative to the jail

	started chan struct{} // closed once the command runs (or never will)

	inMu     sync.Mutex
	in       *os.File // the command's input: a pipe, or the terminal; nil once closed
	inClosed string   // why the input is closed, once it is

	mu      sync.Mutex
	signal  func(syscall.Signal) error
	res     *Result       // once ended
	err     error         // once ended, when it could not run
	done    chan struct{} // closed once ended
	endRead bool          // a read returned its end
	ended   time.Time
	why     string        // what killed it, when something did
	changed chan struct{} // closed and replaced on new output and at the end
}

// JobOptions says how a command runs as a job.
type JobOptions struct {
	// TTY runs it on a terminal the server holds: its input and output go
	// through the terminal, and stderr is part of its output.
	TTY bool
	// KeepInput leaves its standard input open after Request.Stdin, for
	// Input; otherwise the input ends there, as a call's does.
	KeepInput bool
}

// StartJob starts req as a job and returns once the command runs, or with
// the error that kept it from running. ctx bounds only this wait.
func (s *Session) StartJob(ctx context.Context, req Request, opt JobOptions) (*Job, error) {
	cfg := s.m.cfg
	j := &Job{
		ID: "job-" + uuid.NewString()[:8], TTY: opt.TTY, Started: time.Now(), s: s,
		started: make(chan struct{}), done: make(chan struct{}), changed: make(chan struct{}),
		Command: commandLine(req),
	}
	if err := s.addJob(j); err != nil {
		return nil, err
	}
	var err error
	defer func() {
		if err != nil {
			s.dropJob(j.ID)
		}
	}()
	if j.outDir, err = s.outputs().Make(output.ID(j.ID)); err != nil {
		return nil, fmt.Errorf("job output: %w", err)
	}
	keep := output.KeptMax(cfg.MaxDisk)
	if j.out, err = s.newJobStream(j, "stdout", keep); err != nil {
		return nil, err
	}
	var toClose []*os.File
	// The far ends (the pipe's read end, the terminal's): the command has
	// its own once it runs; whatever happens, they are closed once.
	closeFar := sync.OnceFunc(func() { closeAll(toClose) })
	initial := req.Stdin
	req.Stdin = nil
	if opt.TTY {
		var ptmx, tty *os.File
		if ptmx, tty, err = pty.Open(); err != nil {
			j.out.Close()
			return nil, fmt.Errorf("open a terminal: %w", err)
		}
		pty.Setsize(ptmx, &pty.Winsize{Rows: ttyRows, Cols: ttyCols})
		j.in, req.TTY = ptmx, tty
		toClose = append(toClose, tty)
	} else {
		if j.errs, err = s.newJobStream(j, "stderr", keep); err != nil {
			j.out.Close()
			return nil, err
		}
		req.Stdout, req.Stderr = j.out, j.errs
		if opt.KeepInput || initial != nil {
			var pr, pw *os.File
			if pr, pw, err = os.Pipe(); err != nil {
				j.out.Close()
				j.errs.Close()
				return nil, err
			}
			req.Stdin, j.in = pr, pw
			toClose = append(toClose, pr)
		} else {
			j.inClosed = "its standard input is empty (start it with background or tty to keep it open)"
		}
	}
	req.Progress = nil
	req.Started = func(sig func(syscall.Signal) error) {
		j.mu.Lock()
		j.signal = sig
		j.mu.Unlock()
		close(j.started)
	}
	jctx, cancel := context.WithCancelCause(context.Background())
	j.cancel = cancel
	go j.run(jctx, req, closeFar)

	select {
	case <-j.started:
	case <-j.done:
		// It never ran: the call's error, or (a retried start that failed
		// after all) its result.
		if j.err != nil {
			err = j.err
			return nil, err
		}
	case <-ctx.Done():
		cancel(context.Cause(ctx))
		<-j.done
		err = fmt.Errorf("cancelled before the job started: %w", context.Cause(ctx))
		return nil, err
	}
	closeFar()
	if initial != nil {
		// The input given with the call: whatever the job reads of it.
		go func() {
			b, _ := io.ReadAll(initial)
			j.write(b, inputTimeout)
			if !opt.KeepInput && !opt.TTY {
				j.closeInput("its standard input ended after the stdin given with the call")
			}
		}()
	}
	return j, nil
}

// run is the job's life: the command, then its output drained and its end
// recorded.
func (j *Job) run(ctx context.Context, req Request, closeFar func()) {
	var reading chan struct{}
	if j.TTY {
		reading = make(chan struct{})
		go func() {
			defer close(reading)
			io.Copy(j.out, j.in)
		}()
	}
	res, err := j.s.Exec(ctx, req)
	select {
	case <-j.started:
	default:
		close(j.started)
	}
	closeFar() // the terminal's reader ends once nothing else holds it
	if reading != nil {
		select {
		case <-reading:
		case <-time.After(grace):
		}
	}
	j.closeInput("the job has ended")
	j.out.Close()
	if j.errs != nil {
		j.errs.Close()
	}
	if res != nil {
		res.OutputPath = filepath.Join(j.s.Path, j.outDir)
	}
	why := ""
	if cause := context.Cause(ctx); cause != nil && res != nil && res.End == Cancelled {
		why = cause.Error()
	}
	j.mu.Lock()
	j.res, j.err, j.ended, j.why = res, err, time.Now(), why
	close(j.done)
	j.mu.Unlock()
	j.notify()
	j.s.pruneJobs()
}

// notify wakes whoever waits for the job.
func (j *Job) notify() {
	j.mu.Lock()
	close(j.changed)
	j.changed = make(chan struct{})
	j.mu.Unlock()
}

// write writes b to the job's input, waiting at most d for it to be read.
func (j *Job) write(b []byte, d time.Duration) (int, error) {
	j.inMu.Lock()
	defer j.inMu.Unlock()
	if j.in == nil {
		return 0, fmt.Errorf("input: %s", j.inClosed)
	}
	j.in.SetWriteDeadline(time.Now().Add(d))
	n, err := j.in.Write(b)
	j.in.SetWriteDeadline(time.Time{})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return n, fmt.Errorf("input: the job read %d of %d bytes in %v; it is not reading its input", n, len(b), d)
	}
	if err != nil {
		return n, fmt.Errorf("input: %w", err)
	}
	return n, nil
}

// closeInput ends the job's input (a pipe's write end; never the terminal,
// which is also its output, until the job ended).
func (j *Job) closeInput(why string) {
	j.inMu.Lock()
	defer j.inMu.Unlock()
	if j.in == nil || j.TTY && why != "the job has ended" {
		return
	}
	j.in.Close()
	j.in, j.inClosed = nil, why
}

// Input writes text to the job's standard input (its terminal, with
// tty); with end, it then ends the input: the pipe is closed, and a
// terminal gets an end-of-file character.
func (j *Job) Input(text string, end bool) error {
	if text != "" {
		if _, err := j.write([]byte(text), inputTimeout); err != nil {
			return err
		}
	}
	if !end {
		return nil
	}
	if j.TTY {
		_, err := j.write([]byte{4}, inputTimeout) // VEOF: ^D
		return err
	}
	j.inMu.Lock()
	closed := j.in == nil
	j.inMu.Unlock()
	if closed {
		return nil
	}
	j.closeInput("the caller closed it")
	return nil
}

// Signals a job may be sent, by name.
var jobSignals = map[string]syscall.Signal{
	"TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "KILL": syscall.SIGKILL,
	"HUP": syscall.SIGHUP, "QUIT": syscall.SIGQUIT,
}

// SignalNames lists the signals Signal takes.
func SignalNames() []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range jobSignals {
			if !yield(k) {
				return
			}
		}
	})
}

// Signal sends the named signal to every process of the job; KILL also
// ends the job at once, as a cancelled call ends.
func (j *Job) Signal(name string) error {
	sig, ok := jobSignals[strings.TrimPrefix(strings.ToUpper(name), "SIG")]
	if !ok {
		return &InputError{msg: fmt.Sprintf("signal %q: want one of %s", name, strings.Join(SignalNames(), ", "))}
	}
	select {
	case <-j.done:
		return &InputError{msg: fmt.Sprintf("job %s has already ended: nothing to signal", j.ID)}
	default:
	}
	if sig == syscall.SIGKILL {
		j.cancel(errors.New("killed by jail_job (signal KILL)"))
		return nil
	}
	j.mu.Lock()
	send := j.signal
	j.mu.Unlock()
	if send == nil {
		return errors.New("the job has not started")
	}
	if err := send(sig); err != nil {
		return fmt.Errorf("signal %s: %w", name, err)
	}
	return nil
}

// Wait waits up to d for output that was not read yet or for the end,
// whichever comes first; ctx ends the wait early. It reports whether the
// job has ended.
func (j *Job) Wait(ctx context.Context, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		j.mu.Lock()
		changed, done := j.changed, j.done
		j.mu.Unlock()
		select {
		case <-done:
			return true
		default:
		}
		if j.outputUnread() {
			// Let a burst finish, then return it whole.
			select {
			case <-done:
				return true
			case <-time.After(outputSettle):
			case <-ctx.Done():
			}
			return j.isDone()
		}
		select {
		case <-changed:
		case <-done:
			return true
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return j.isDone()
		}
	}
}

// WaitEnd waits up to d for the job to end; ctx ends the wait early.
func (j *Job) WaitEnd(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-j.done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return j.isDone()
}

// LastLine is the latest line the job printed since the last read.
func (j *Job) LastLine() string {
	line := j.out.LastLine()
	if j.errs != nil {
		if l := j.errs.LastLine(); l != "" {
			line = l
		}
	}
	return line
}

func (j *Job) isDone() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// outputUnread reports whether the job printed what no read has taken yet.
func (j *Job) outputUnread() bool {
	return j.out.Unread() || j.errs != nil && j.errs.Unread()
}

// JobRead is what a read of a job returns: its output since the last read
// and its state.
type JobRead struct {
	ID, Command string
	TTY         bool
	Running     bool
	InputOpen   bool
	Stdout      Stream // since the last read; Bytes is the total so far
	Stderr      Stream
	OutputPath  string // the whole output, on the host
	Duration    time.Duration
	// Result, once the job ended: how (its streams are those of this read).
	Result *Result
	// Err, once the job ended without running (its agent could not start).
	Err error
	// Killed says what killed it (jail_job, jail_reset, the session's
	// end), when something did.
	Killed string
}

// Read returns the output the job printed since the last read and its
// state; an ended job's last read reports how it ended.
func (j *Job) Read() JobRead {
	where := filepath.Join(j.s.Path, j.outDir)
	r := JobRead{ID: j.ID, Command: j.Command, TTY: j.TTY, OutputPath: where}
	j.mu.Lock()
	ended := j.res != nil || j.err != nil
	res, err := j.res, j.err
	j.mu.Unlock()
	// Read after the end is known: the streams are complete by then.
	r.Stdout = j.out.Read(where)
	if j.errs != nil {
		r.Stderr = j.errs.Read(where)
	}
	j.inMu.Lock()
	r.InputOpen = j.in != nil && !ended
	j.inMu.Unlock()
	if !ended {
		r.Running = true
		r.Duration = time.Since(j.Started)
		return r
	}
	j.mu.Lock()
	j.endRead = true
	j.mu.Unlock()
	r.Duration = j.ended.Sub(j.Started)
	r.Killed = j.why
	if res != nil {
		out := *res
		out.Stdout, out.Stderr, out.Duration = r.Stdout, r.Stderr, r.Duration
		r.Result = &out
	}
	r.Err = err
	return r
}

// Kill ends the job and waits for it to be over.
func (j *Job) Kill(cause error) {
	j.cancel(cause)
	<-j.done
}

// JobInfo is a job as jail_status lists it.
type JobInfo struct {
	ID          string    `json:"job_id"`
	Command     string    `json:"command"`
	TTY         bool      `json:"tty"`
	Started     time.Time `json:"started"`
	Running     bool      `json:"running"`
	ExitCode    int       `json:"exit_code"`
	Signal      string    `json:"signal"`
	StdoutBytes int64     `json:"stdout_bytes"`
	StderrBytes int64     `json:"stderr_bytes"`
}

// Jobs lists the session's jobs, oldest first.
func (s *Session) Jobs() []JobInfo {
	s.jobMu.Lock()
	jobs := slices.Clone(s.jobOrder)
	s.jobMu.Unlock()
	out := make([]JobInfo, 0, len(jobs))
	for _, j := range jobs {
		ji := JobInfo{ID: j.ID, Command: j.Command, TTY: j.TTY, Started: j.Started, StdoutBytes: j.out.Bytes()}
		if j.errs != nil {
			ji.StderrBytes = j.errs.Bytes()
		}
		j.mu.Lock()
		switch {
		case j.res != nil:
			ji.ExitCode, ji.Signal = j.res.ExitCode, j.res.Signal
		case j.err != nil:
			ji.ExitCode = -1
		default:
			ji.Running = true
		}
		j.mu.Unlock()
		out = append(out, ji)
	}
	return out
}

// Job is the session's job called id.
func (s *Session) Job(id string) (*Job, error) {
	s.jobMu.Lock()
	defer s.jobMu.Unlock()
	if j := s.jobs[id]; j != nil {
		return j, nil
	}
	return nil, &InputError{msg: fmt.Sprintf("job_id %q: %v (jail_status lists the session's jobs; an ended job is forgotten once %d newer ones ended, and at jail_reset)", id, errNoJob, keepEnded)}
}

// ForgetJob drops a job whose end was returned with its call.
func (s *Session) ForgetJob(id string) { s.dropJob(id) }

// addJob registers j unless the session runs MaxJobs already.
func (s *Session) addJob(j *Job) error {
	s.jobMu.Lock()
	defer s.jobMu.Unlock()
	running := 0
	for _, o := range s.jobOrder {
		if !o.isDone() {
			running++
		}
	}
	if running >= s.m.cfg.MaxJobs {
		return &InputError{msg: fmt.Sprintf("the session runs %d jobs, its limit (--max-jobs): end one (jail_job with signal KILL) or wait for one", running)}
	}
	if s.jobs == nil {
		s.jobs = map[string]*Job{}
	}
	s.jobs[j.ID] = j
	s.jobOrder = append(s.jobOrder, j)
	return nil
}

func (s *Session) dropJob(id string) {
	s.jobMu.Lock()
	defer s.jobMu.Unlock()
	delete(s.jobs, id)
	s.jobOrder = slices.DeleteFunc(s.jobOrder, func(j *Job) bool { return j.ID == id })
}

// pruneJobs forgets the oldest ended jobs beyond keepEnded, those whose
// end was read first.
func (s *Session) pruneJobs() {
	s.jobMu.Lock()
	defer s.jobMu.Unlock()
	for _, readFirst := range []bool{true, false} {
		ended := 0
		for _, j := range s.jobOrder {
			if j.isDone() {
				ended++
			}
		}
		for i := 0; ended > keepEnded && i < len(s.jobOrder); {
			j := s.jobOrder[i]
			j.mu.Lock()
			drop := j.isDone() && (j.endRead || !readFirst)
			j.mu.Unlock()
			if drop {
				delete(s.jobs, j.ID)
				s.jobOrder = slices.Delete(s.jobOrder, i, i+1)
				ended--
				continue
			}
			i++
		}
	}
}

// clearJobs forgets every job: at jail_reset, once they are over.
func (s *Session) clearJobs() {
	s.jobMu.Lock()
	defer s.jobMu.Unlock()
	s.jobs, s.jobOrder = nil, nil
}

// liveOutputDirs are the output directories of running jobs, which the
// pruning of old outputs keeps.
func (s *Session) liveOutputDirs() map[string]bool {
	s.jobMu.Lock()
	defer s.jobMu.Unlock()
	dirs := map[string]bool{}
	for _, j := range s.jobOrder {
		if j.outDir != "" && !j.isDone() {
			dirs[path.Base(j.outDir)] = true
		}
	}
	return dirs
}

// commandLine is req's command as one line, for listings.
func commandLine(req Request) string {
	if req.Command != "" {
		return oneLineMax(req.Command, 200)
	}
	return oneLineMax(strings.Join(req.Argv, " "), 200)
}

func oneLineMax(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

// newJobStream keeps the job's stream name in its output directory, up
// to keep bytes, and --max-output bytes of each read inline.
func (s *Session) newJobStream(j *Job, name string, keep int64) (*output.JobStream, error) {
	st, err := output.NewJobStream(s.outputs(), j.outDir, name, s.m.cfg.MaxOutput, keep, j.notify)
	if err != nil {
		return nil, fmt.Errorf("job output: %w", err)
	}
	return st, nil
}
