package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session"
)

// Exit statuses of jail-mcp run when the command's own status is not it,
// following timeout(1) and env(1).
const (
	exitTimedOut = 124
	exitRefused  = 125
)

// runCommand is "jail-mcp run": one command in the jail, from a terminal,
// under the same policy as jailed_exec. Its output streams through, its
// standard input is jail-mcp's, and jail-mcp exits with its status.
func runCommand(ctx context.Context, args, environ []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := NewFlagSet("run")
	rc := BindConfig(fs, getenv, "listen", "token", "token-file", "max-sessions", "max-conns", "max-conns-per-addr", "max-job-time", "max-jobs")
	cwd := fs.String("cwd", "", "working `DIR` (default: the current directory when inside the project, else the project)")
	if err := ParseFlags(fs, args, "jail-mcp run [flags] -- CMD [ARGS...]", stdout); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return UsageError("run: no command given (usage: jail-mcp run [flags] -- CMD [ARGS...])")
	}
	cfg, err := rc.Parse(fs)
	if err != nil {
		return UsageError("%v", err)
	}
	log := NewLogger(stderr, cfg.LogLevel)

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	// One command: no trial run before it. A jail that cannot be set up
	// never starts the command either; bwrap's refusal is recognised and
	// explained below.
	// One name for the session, also when it opens again without the
	// view.
	cfg.Session = SessionName(cfg)
	m, s, st, err := openRun(ctx, cfg, environ, getenv, log)
	if err != nil {
		return err
	}
	defer func() {
		if m != nil {
			m.Close()
		}
	}()

	dir := *cwd
	if dir == "" {
		dir = defaultCwd(cfg.Project)
	}
	// A terminal on stdin is the command's own fd 0, so it can leave it
	// raw, without echo, resized or non-blocking for the shell jail-mcp
	// returns to. However the command ends, this puts it back (except when
	// jail-mcp itself is killed with SIGKILL); a pty of the command's own
	// would change what the command sees.
	term, err := saveTerminal(stdin)
	if err != nil {
		return &exitError{code: exitRefused, msg: err.Error()}
	}
	// Exec calls restore as soon as the command is gone, before copying the
	// rest of its output, which would block on output the command stopped;
	// the defer covers every way out of Exec that does not get so far.
	restorer := func() func() {
		return sync.OnceFunc(func() {
			if err := term.restore(); err != nil {
				log.Warn("restore the terminal", "err", err)
			}
		})
	}
	restore := restorer()
	defer func() { restore() }()
	errLine := &firstLineWriter{w: stderr}
	req := session.Request{Argv: argv, Cwd: dir, Stdin: stdin, Stdout: stdout, Stderr: errLine, Ended: restore}
	res, err := s.Exec(ctx, req)
	if nested := jail.AsNestedUserns(err); nested != nil && st.View.On && cfg.Overlay == "auto" {
		// The sandbox refused the view its user namespace, before the
		// command started (run skips the server's start probe of the
		// view): the command runs on the read-only project instead, as
		// a server started here would.
		m.Close()
		cfg.viewRefused = nested
		if m, s, st, err = openRun(ctx, cfg, environ, getenv, log); err != nil {
			return err
		}
		restore = restorer()
		errLine = &firstLineWriter{w: stderr}
		req.Ended, req.Stderr = restore, errLine
		res, err = s.Exec(ctx, req)
	}
	if refused := explainRunRefusal(ctx, cfg, st, res, err, errLine.line(), getenv); refused != nil {
		return refused
	}
	if err != nil {
		return &exitError{code: exitRefused, msg: session.Refusal(err)}
	}
	return runOutcome(res, stderr)
}

// runOutcome says on stderr what the server knows of how res's command
// went (unconfined, a refused write, the project's changes and
// conflicts, a bound), and gives jail-mcp run's exit status.
func runOutcome(res *session.Result, stderr io.Writer) error {
	if !res.Confined {
		fmt.Fprintln(stderr, "jail-mcp: the command ran UNCONFINED (--fallback warn)")
	}
	if note := res.RefusedWriteNote(); note != "" {
		fmt.Fprintln(stderr, "jail-mcp: "+note)
	}
	if note := res.ProjectNote("jail-mcp diff --session " + res.Session + ", jail-mcp apply --session " + res.Session); note != "" {
		fmt.Fprintln(stderr, "jail-mcp: "+note)
	}
	if note := res.ConflictsLine("jail-mcp diff --session " + res.Session + " --patch, jail-mcp discard --session " + res.Session + " PATH"); note != "" {
		fmt.Fprintln(stderr, "jail-mcp: "+note)
	}
	// The command's own status, as a shell gives it, but for an end of
	// the server's making, which says so on stderr: timeout(1)'s 124 for
	// a timeout, a shell's 130 for an interrupt.
	switch res.End {
	case session.TimedOut:
		return &exitError{code: exitTimedOut, msg: res.Status()}
	case session.Cancelled:
		return &exitError{code: 130, msg: "interrupted; the command and everything it started were killed"}
	case session.OverBound, session.AgentLost:
		return &exitError{code: res.ExitStatus(), msg: res.Status()}
	}
	if res.LimitAfterExit() {
		// The command ran to its end: its own status, and why the next
		// one will be refused.
		fmt.Fprintf(stderr, "jail-mcp: the jail went over its %s bound during the command: no command runs in it until files are removed\n", res.Limit)
	}
	return &exitError{code: res.ExitStatus()}
}

// openRun opens the jail and the session of jail-mcp run.
func openRun(ctx context.Context, cfg Config, environ []string, getenv func(string) string, log *slog.Logger) (*session.Manager, *session.Session, BackendState, error) {
	m, st, err := OpenJail(ctx, cfg, environ, getenv, true, nil, log)
	if err != nil {
		return nil, nil, st, &exitError{code: exitRefused, msg: err.Error()}
	}
	s, err := m.Open(SessionName(cfg))
	if err != nil {
		m.Close()
		return nil, nil, st, &exitError{code: exitRefused, msg: err.Error()}
	}
	log.Debug("starting", "session", s.Name, "jail", s.Path, "backend", st.Name, "overlay", st.View.On)
	return m, s, st, nil
}

// explainRunRefusal is the refusal of a command bubblewrap could not set
// up a jail for, with why and the fix, or nil. firstLine is the first
// line of the command's stderr.
func explainRunRefusal(ctx context.Context, cfg Config, st BackendState, res *session.Result, err error, firstLine string, getenv func(string) string) error {
	var inputErr *session.InputError
	if st.Name != "bwrap" || errors.As(err, &inputErr) ||
		err == nil && (res.ExitCode != 1 || !strings.HasPrefix(firstLine, "bwrap: ")) {
		return nil
	}
	// The session agent did not start, or (bwrap's direct mode) exit 1
	// after a first line from bubblewrap: either bwrap could not set up
	// the jail (and the command never started) or the command said so
	// itself. The probe tells them apart.
	r := jail.Probe(ctx, "bwrap", jail.Options{Getenv: getenv})
	if r.Available {
		return nil
	}
	ue := &jail.UnavailableError{Backend: r.Backend, Reason: r.Reason, Hint: r.Hint}
	msg := "refused: no jail can confine commands here: " + ue.Error()
	if cfg.Backend == "auto" && jail.Probe(ctx, "landlock", jail.Options{Getenv: getenv}).Available {
		msg += "; --backend landlock confines here"
	}
	return &exitError{code: exitRefused, msg: msg}
}

// defaultCwd is the current directory when it lies in the project, else
// the project.
func defaultCwd(project string) string {
	wd, err := os.Getwd()
	if err != nil {
		return project
	}
	if c, err := filepath.EvalSymlinks(wd); err == nil {
		wd = c
	}
	if wd == project || strings.HasPrefix(wd, project+string(filepath.Separator)) {
		return wd
	}
	return project
}

// firstLineWriter passes everything to w and keeps the start of the first
// line written.
type firstLineWriter struct {
	w     io.Writer
	first []byte
	done  bool
}

// firstLineMax is how much of the first line firstLineWriter keeps.
const firstLineMax = 256

func (f *firstLineWriter) Write(p []byte) (int, error) {
	if !f.done {
		end := len(p)
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			end, f.done = i, true
		}
		f.first = append(f.first, p[:min(end, firstLineMax-len(f.first))]...)
		f.done = f.done || len(f.first) >= firstLineMax
	}
	return f.w.Write(p)
}

func (f *firstLineWriter) line() string { return string(f.first) }
