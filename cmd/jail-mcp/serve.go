package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/mark3labs/mcp-go/server"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/cli"
	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/metrics"
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

func serve(ctx context.Context, args, environ []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("serve")
	rc := cli.BindConfig(fs, getenv)
	err := cli.ParseFlags(fs, args, "jail-mcp [serve] [flags]", stdout)
	if err == nil && fs.NArg() > 0 {
		err = cli.UsageError("serve: unexpected argument %q", fs.Arg(0))
	}
	var cfg cli.Config
	if err == nil {
		if cfg, err = rc.Parse(fs); err != nil {
			err = cli.UsageError("%v", err)
		}
	}
	if err != nil {
		if cli.IsUsage(err) && !cli.IsTerminal(stdin) && !rc.HTTP() {
			// A client started this server: tell it through MCP.
			return serveBadConfig(ctx, err, stdin, stdout, stderr)
		}
		return err
	}
	environ, getenv = withoutToken(environ, getenv)
	log := cli.NewLogger(stderr, cfg.LogLevel)
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	if cfg.Listen != "" {
		if err := fitConns(&cfg, log); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// Over HTTP, metrics (/metrics) of the sessions and agents made below.
	var m *session.Manager
	var sessions *httpSessions
	var met *metrics.Metrics
	var obs session.Observer
	opts := []server.ServerOption{
		server.WithToolCapabilities(false),
		server.WithLogging(),
		server.WithRecovery(),
		server.WithInstructions("Run shell commands with jailed_exec: they can read the host but write only " +
			"inside this session's jail, which is their HOME and persists between calls."),
	}
	if cfg.Listen != "" {
		met = metrics.New(func() int { return sessions.count() }, func() int { return m.Agents() })
		obs = met
		opts = append(opts, server.WithToolHandlerMiddleware(met.Tools))
	}
	m, st, err := cli.OpenJail(ctx, cfg, environ, getenv, false, obs, log)
	if err != nil {
		return err
	}
	defer m.Close()
	if b := m.Config().Backend; cfg.TokenFile != "" && !b.Confined() && !jail.IsRefusing(b) {
		// Every confining backend hides the file (Spec.Unread); commands
		// run unconfined read it as any file of this user.
		log.Warn("unconfined commands can read the token file: remove it now that the server has read it, or pass the token in JAIL_MCP_TOKEN", "token_file", cfg.TokenFile, "backend", st.Name)
	}
	h := &tools.Handler{
		Manager: m, Version: cli.Version(),
		BackendName: st.Name, Reason: st.Reason, Hint: st.Hint,
		OverlayMode: st.View.Mode, OverlayReason: st.View.Reason, OverlayHint: st.View.Hint,
		ApplyMode: cfg.Apply,
	}
	srv := server.NewMCPServer("jail-mcp", cli.Version(), opts...)
	h.Register(srv)

	if cfg.Listen != "" {
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
		}
		sessions = newHTTPSessions(m, log, cfg.MaxSessions)
		h.Session = sessions.session
		cli.LogStart(log, cfg, st, m, "", "", "listen", "http://"+ln.Addr().String()+"/mcp", "token", cfg.Token != "", "token_file", cfg.TokenFile, "max_sessions", cfg.MaxSessions,
			"max_conns", cfg.MaxConns, "max_conns_per_addr", cfg.MaxConnsPerAddr)
		err = serveHTTP(ctx, ln, srv, sessions, met, cfg, newHTTPLimits(cfg), log)
		log.Info("stopping")
		return err
	}

	s, err := m.Open(cli.SessionName(cfg))
	if err != nil {
		return err
	}
	h.Session = func(context.Context) (*session.Session, error) { return s, nil }
	// The first call finds its session agent started (or waits for that
	// start, never for a second).
	go s.Warm()
	cli.LogStart(log, cfg, st, m, s.Name, s.Path)
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

// fitConns keeps --max-conns within half of the server's descriptor
// limit, so that a flood of connections leaves the other half to the
// sessions (jails, agents, pipes, output files). The default is lowered,
// with a warning; a value the operator set is refused.
func fitConns(cfg *cli.Config, log *slog.Logger) error {
	n, ok := descriptorLimit()
	if !ok || cfg.MaxConns <= n/2 {
		return nil
	}
	fit := max(n/2, 1)
	if cfg.MaxConnsSet {
		return cli.UsageError("invalid --max-conns %d: more than half of this process's descriptor limit %d (ulimit -n): lower it to %d or raise the limit", cfg.MaxConns, n, fit)
	}
	log.Warn("--max-conns lowered to half the descriptor limit", "max_conns", fit, "descriptor_limit", n)
	cfg.MaxConns = fit
	cfg.MaxConnsPerAddr = min(cfg.MaxConnsPerAddr, fit)
	return nil
}

// withoutToken takes the bearer token's variable out of the server's
// environment once the configuration has read it, before anything starts:
// out of the process's own (which a child started with it would inherit)
// and out of environ and getenv, from which the commands' environment is
// made. The commands' allowlist never passes it either (session/view/env.go).
// The server's /proc/PID/environ still holds it, but the server is not
// dumpable (session.PrepareProcess), so no process of its user can read
// that file.
func withoutToken(environ []string, getenv func(string) string) ([]string, func(string) string) {
	const name = "JAIL_MCP_TOKEN"
	os.Unsetenv(name)
	environ = slices.DeleteFunc(slices.Clone(environ), func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	return environ, func(k string) string {
		if k == name {
			return ""
		}
		return getenv(k)
	}
}

// serveBadConfig is a stdio server whose configuration is bad, started by
// an MCP client: it completes the handshake and answers every tool call
// with the reason and the fix, so that the user sees them in the client,
// which shows little of a server that exits ("Connection closed"). The
// reason is on stderr too, and the exit status is 2 as for any bad
// configuration.
func serveBadConfig(ctx context.Context, bad error, stdin io.Reader, stdout, stderr io.Writer) error {
	msg := strings.ReplaceAll(strings.TrimSpace(bad.Error()), "\n", "; ")
	fmt.Fprintf(stderr, "jail-mcp: %s (serving MCP only to report it)\n", msg)
	srv := server.NewMCPServer("jail-mcp", cli.Version(),
		server.WithToolCapabilities(false),
		server.WithLogging(),
		server.WithRecovery(),
		server.WithInstructions("This jail-mcp server's configuration is bad and it runs nothing: "+msg),
	)
	tools.RegisterRefusing(srv, "refused: this jail-mcp server's configuration is bad: "+msg+
		". Fix it in the MCP client's entry for the server (its args or env) and restart the server.")
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	stdio := server.NewStdioServer(srv)
	stdio.SetErrorLogger(log.New(io.Discard, "", 0))
	stdio.Listen(ctx, stdin, stdout)
	return cli.ExitStatus(2)
}
