package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session"
	"github.com/jail-mcp/jail-mcp/session/egress"
)

// BackendState is the outcome of choosing a backend at start-up.
type BackendState struct {
	Name         string // configured or probed, also when unavailable
	Reason, Hint string // why nothing confines, when nothing does
	// Agents: the backend runs session agents, whose read view hides
	// Config.TokenFile from commands.
	Agents bool
	// View is what --overlay came to here.
	View ViewChoice
}

// OpenJail chooses the backend and opens the jail base. When no backend
// confines, commands are refused (fallback fail) or run unconfined
// (fallback warn), and the server still starts so that jail_status and
// every refusal can say why.
// oneCall is for jail-mcp run: no trial run of the backend before the one
// command (see jail.Options.SkipTrialRun) and no spare launchers. obs, when
// set, is told of every command (metrics).
func OpenJail(ctx context.Context, cfg Config, environ []string, getenv func(string) string, oneCall bool, obs session.Observer, log *slog.Logger) (*session.Manager, BackendState, error) {
	var st BackendState
	if err := session.PrepareProcess(cfg.MaxDisk); err != nil {
		return nil, st, err
	}
	home := serverHome(getenv)
	scfg := session.Config{
		Project: cfg.Project, Root: cfg.Root, Writable: cfg.Writable, Network: cfg.Network, Allow: cfg.Allow, Auth: cfg.Auth, Home: home,
		Environ: environ, PassEnv: cfg.PassEnv, Timeout: cfg.Timeout, MaxTimeout: cfg.MaxTimeout,
		MaxOutput: int(cfg.MaxOutput), MaxProcs: cfg.MaxProcs, MaxMemory: cfg.MaxMemory,
		MaxJobTime: cfg.MaxJobTime, MaxJobs: cfg.MaxJobs,
		MaxDisk: cfg.MaxDisk, MaxFiles: cfg.MaxFiles, Logger: log, OneCall: oneCall, Observer: obs,
	}
	if cfg.TokenFile != "" {
		// The file the token was read from is no command's to read.
		if abs, err := filepath.Abs(cfg.TokenFile); err == nil {
			scfg.Unread = append(scfg.Unread, abs)
		}
	}
	deny, err := denyList(cfg, home, getenv)
	if err != nil {
		return nil, st, err
	}
	scfg.Deny = deny
	scfg.Mask = cfg.Mask
	if !scfg.Mask.Empty() && !cfg.Network {
		log.Warn("--mask with --network off: no command reaches a host, the placeholders stand for nothing a command can use")
	}
	b, err := jail.Open(ctx, cfg.Backend, jail.Options{Getenv: getenv, SkipTrialRun: oneCall})
	var unavailable *jail.UnavailableError
	switch {
	case err == nil:
		scfg.Backend = b
		st.Name, st.Agents = b.Name(), b.Agents()
	case errors.As(err, &unavailable):
		st.Name, st.Reason, st.Hint = unavailable.Backend, unavailable.Reason, unavailable.Hint
		if cfg.Fallback == "warn" {
			scfg.Backend = jail.Unconfined{}
			log.Warn("no backend can confine: commands run UNCONFINED (--fallback warn)", "reason", st.Reason, "hint", st.Hint)
		} else {
			scfg.Backend = jail.Refusing{Err: unavailable}
			log.Error("no backend can confine: every command will be refused", "reason", st.Reason, "hint", st.Hint)
		}
	default:
		return nil, st, err
	}
	view, err := chooseView(cfg.Overlay, st.Name, func() error {
		if cfg.viewRefused != nil {
			return cfg.viewRefused
		}
		if oneCall {
			// jail-mcp run, with no start probe (it would double the
			// time of a short command): under on its one call fails
			// closed with the reason, under auto a refused view makes
			// it run again without (runCommand).
			return jail.OverlayUsable(scfg.Backend)
		}
		// A backend that cannot show the project copy-on-write would
		// leave it read-only, or worse, writable: on refuses to start,
		// auto falls back to a read-only project and says why.
		return jail.ProbeOverlay(ctx, scfg.Backend)
	})
	if err != nil {
		return nil, st, err
	}
	st.View = view
	scfg.Overlay = view.On
	logView(log, view, st.Name == "bwrap" && scfg.Backend.Confined(), oneCall)
	m, err := session.New(scfg)
	if err != nil {
		return nil, st, err
	}
	return m, st, nil
}

// logView says once whether commands see the project view and why: a
// warning where auto fell back on bubblewrap (the host refuses what the
// view needs), at debug level for jail-mcp run.
func logView(log *slog.Logger, v ViewChoice, bwrap, oneCall bool) {
	level := slog.LevelInfo
	switch {
	case !v.On && v.Mode == "auto" && bwrap:
		level = slog.LevelWarn
	case oneCall:
		level = slog.LevelDebug
	}
	attrs := []any{"overlay", v.Mode, "reason", v.Reason}
	if v.Hint != "" {
		attrs = append(attrs, "enable", v.Hint)
	}
	msg := "project view off"
	if v.On {
		msg = "project view on"
	}
	log.Log(context.Background(), level, msg, attrs...)
}

// denyList resolves --deny-read for the server user's home and the host
// as it is now.
func denyList(cfg Config, home string, getenv func(string) string) (auth.Deny, error) {
	entries := make([]string, 0, len(cfg.DenyRead))
	for _, e := range cfg.DenyRead {
		if rest, ok := strings.CutPrefix(e, "~"); ok {
			if !filepath.IsAbs(home) {
				return auth.Deny{}, fmt.Errorf("invalid --deny-read %s: the server user has no home directory ($HOME)", e)
			}
			e = filepath.Join(home, rest)
		}
		entries = append(entries, e)
	}
	d, err := session.ResolveDeny(entries, cfg.DenyDefault, home, cfg.Project, cfg.Root, cfg.Writable, os.Geteuid() == 0, getenv)
	if err != nil {
		return d, fmt.Errorf("invalid --deny-read: %w", err)
	}
	return d, nil
}

// serverHome is the server user's home: $HOME, else the system's record.
func serverHome(getenv func(string) string) string {
	if home := getenv("HOME"); home != "" {
		return home
	}
	home, _ := os.UserHomeDir()
	return home
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

// SessionName is --session, or a new UUID.
func SessionName(cfg Config) string {
	if cfg.Session != "" {
		return cfg.Session
	}
	return uuid.NewString()
}

// LogStart logs the effective configuration once; name and jail are the
// stdio session's (empty over HTTP, where each MCP session has its own).
func LogStart(log *slog.Logger, cfg Config, st BackendState, m *session.Manager, name, jail string, extra ...any) {
	mc := m.Config()
	confined := mc.Backend.Confined()
	attrs := []any{"version", Version()}
	if name != "" {
		attrs = append(attrs, "session", name, "jail", jail)
	} else {
		attrs = append(attrs, "idle_timeout", IdleTimeout(cfg.MaxTimeout))
	}
	attrs = append(attrs,
		"project", cfg.Project,
		"root", cfg.Root,
		"backend", st.Name,
		"confined", confined,
		"fallback", cfg.Fallback,
		"network", networkMode(cfg),
		"auth", strings.Join(cfg.Auth, ","),
		"auth_exposed", exposedNames(m),
		"writable", strings.Join(cfg.Writable, ","),
		"pass_env", strings.Join(cfg.PassEnv, ","),
		"timeout", cfg.Timeout,
		"max_timeout", cfg.MaxTimeout,
		"max_output", cfg.MaxOutput,
		"max_job_time", mc.MaxJobTime,
		"max_jobs", mc.MaxJobs,
		"apply", cfg.Apply,
		"log_level", cfg.LogLevel,
	)
	log.Info("starting", append(attrs, extra...)...)
}

// IdleTimeout is how long an HTTP session may go without a request before
// it ends: well above the longest call, so a call in flight never loses
// its session.
func IdleTimeout(maxTimeout time.Duration) time.Duration {
	return max(3*maxTimeout, 30*time.Minute)
}

// networkMode is --network as the operator gave it, canonical.
func networkMode(cfg Config) string {
	switch {
	case cfg.Allow != nil:
		return egress.Prefix + cfg.Allow.String()
	case cfg.Network:
		return "on"
	}
	return "off"
}
