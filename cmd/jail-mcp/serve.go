package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session"
	"github.com/jail-mcp/jail-mcp/tools"
)

// workers is how many tool calls the stdio server runs at once (mcp-go's
// default is 5); calls beyond it wait in the queue, not on the read loop.
const (
	workers   = 64
	queueSize = 1024
)

// backendState is the outcome of choosing a backend at start-up.
type backendState struct {
	name         string // configured or probed, also when unavailable
	reason, hint string // why nothing confines, when nothing does
}

// openJail chooses the backend and opens the jail base. When no backend
// confines, commands are refused (fallback fail) or run unconfined
// (fallback warn), and the server still starts so that jail_status and
// every refusal can say why.
// oneCall is for jail-mcp run: no trial run of the backend before the one
// command (see jail.Options.SkipTrialRun) and no spare launchers.
func openJail(ctx context.Context, cfg config, environ []string, getenv func(string) string, oneCall bool, log *slog.Logger) (*session.Manager, backendState, error) {
	var st backendState
	if err := jail.ProtectServer(); err != nil {
		return nil, st, err
	}
	// Every command inherits the server's per-file bound and no core dumps.
	if err := session.LimitProcess(cfg.MaxDisk); err != nil {
		return nil, st, fmt.Errorf("set resource limits: %w", err)
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	scfg := session.Config{
		Project: cfg.Project, Root: cfg.Root, Network: cfg.Network, Auth: cfg.Auth, Home: home,
		Environ: environ, PassEnv: cfg.PassEnv, Timeout: cfg.Timeout, MaxTimeout: cfg.MaxTimeout,
		MaxOutput: int(cfg.MaxOutput), MaxProcs: cfg.MaxProcs, MaxMemory: cfg.MaxMemory,
		MaxDisk: cfg.MaxDisk, Logger: log, OneCall: oneCall,
	}
	b, err := jail.Open(ctx, cfg.Backend, jail.Options{Getenv: getenv, SkipTrialRun: oneCall})
	var unavailable *jail.UnavailableError
	switch {
	case err == nil:
		scfg.Backend = b
		st.name = b.Name()
	case errors.As(err, &unavailable):
		st.name, st.reason, st.hint = unavailable.Backend, unavailable.Reason, unavailable.Hint
		if cfg.Fallback == "warn" {
			scfg.Backend = jail.Unconfined{}
			log.Warn("no backend can confine: commands run UNCONFINED (--fallback warn)", "reason", st.reason, "hint", st.hint)
		} else {
			scfg.Backend = jail.Refusing{Err: unavailable}
			log.Error("no backend can confine: every command will be refused", "reason", st.reason, "hint", st.hint)
		}
	default:
		return nil, st, err
	}
	m, err := session.New(scfg)
	if err != nil {
		return nil, st, err
	}
	return m, st, nil
}

func serve(ctx context.Context, args, environ []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve")
	rc := bindConfig(fs, getenv)
	if err := parseFlags(fs, args, "jail-mcp [serve] [flags]", stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("serve: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := rc.parse(fs)
	if err != nil {
		return usageError("%v", err)
	}
	log := newLogger(stderr, cfg.LogLevel)

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	m, st, err := openJail(ctx, cfg, environ, getenv, false, log)
	if err != nil {
		return err
	}
	defer m.Close()
	h := &tools.Handler{
		Manager: m, Version: versionString(),
		BackendName: st.name, Reason: st.reason, Hint: st.hint,
	}
	srv := server.NewMCPServer("jail-mcp", versionString(),
		server.WithToolCapabilities(false),
		server.WithRecovery(),
		server.WithInstructions("Run shell commands with jailed_exec: they can read the host but write only "+
			"inside this session's jail, which is their HOME and persists between calls."),
	)
	h.Register(srv)

	if cfg.Listen != "" {
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
		}
		sessions := newHTTPSessions(m, log, cfg.MaxSessions)
		h.Session = sessions.session
		logStart(log, cfg, st, m, "", "", "listen", "http://"+ln.Addr().String()+"/mcp", "token", cfg.Token != "", "max_sessions", cfg.MaxSessions)
		err = serveHTTP(ctx, ln, srv, sessions, cfg, log)
		log.Info("stopping")
		return err
	}

	s, err := m.Open(sessionName(cfg))
	if err != nil {
		return err
	}
	h.Session = func(context.Context) (*session.Session, error) { return s, nil }
	logStart(log, cfg, st, m, s.Name, s.Path)
	stdio := server.NewStdioServer(srv)
	stdio.SetErrorLogger(slog.NewLogLogger(log.Handler(), slog.LevelError))
	server.WithWorkerPoolSize(workers)(stdio)
	server.WithQueueSize(queueSize)(stdio)
	err = stdio.Listen(ctx, stdin, stdout)
	log.Info("stopping", "session", s.Name)
	if ctx.Err() != nil {
		return nil // SIGTERM or SIGINT: a clean stop
	}
	return err
}

// exposedNames lists the CLIs whose credentials are present on this host
// among those enabled.
func exposedNames(m *session.Manager) string {
	var names []string
	for _, e := range m.Exposed() {
		names = append(names, e.Name)
	}
	return strings.Join(names, ",")
}

// sessionName is --session, or a new UUID.
func sessionName(cfg config) string {
	if cfg.Session != "" {
		return cfg.Session
	}
	return uuid.NewString()
}

// logStart logs the effective configuration once; name and jail are the
// stdio session's (empty over HTTP, where each MCP session has its own).
func logStart(log *slog.Logger, cfg config, st backendState, m *session.Manager, name, jail string, extra ...any) {
	mc := m.Config()
	confined := mc.Backend.Confined()
	attrs := []any{"version", versionString()}
	if name != "" {
		attrs = append(attrs, "session", name, "jail", jail)
	} else {
		attrs = append(attrs, "idle_timeout", idleTimeout(cfg.MaxTimeout))
	}
	attrs = append(attrs,
		"project", cfg.Project,
		"root", cfg.Root,
		"backend", st.name,
		"confined", confined,
		"fallback", cfg.Fallback,
		"network", onOff(cfg.Network),
		"auth", strings.Join(cfg.Auth, ","),
		"auth_exposed", exposedNames(m),
		"pass_env", strings.Join(cfg.PassEnv, ","),
		"timeout", cfg.Timeout,
		"max_timeout", cfg.MaxTimeout,
		"max_output", cfg.MaxOutput,
		"log_level", cfg.LogLevel,
	)
	log.Info("starting", append(attrs, extra...)...)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
