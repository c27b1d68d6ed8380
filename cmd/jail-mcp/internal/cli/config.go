package cli

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/session"
)

// Config is the operator's configuration, validated: every field of the
// contract's configuration table.
type Config struct {
	Project     string
	Root        string
	Backend     string
	Fallback    string
	Network     bool
	Auth        []string
	Session     string
	Listen      string
	Token       string
	Timeout     time.Duration
	MaxTimeout  time.Duration
	MaxOutput   int64
	MaxJobTime  time.Duration
	MaxJobs     int
	PassEnv     []string
	MaxProcs    int64
	MaxMemory   int64
	MaxDisk     int64
	MaxSessions int
	LogLevel    slog.Level
	// Warnings about the configuration, for the log once it exists.
	Warnings []string
}

// DefaultMaxSessions bounds the live HTTP sessions: each holds an open jail
// directory and mcp-go's state for it, and 256 is far above what one
// developer or a small team opens, while it bounds the descriptors and
// memory a client that never ends its sessions can take.
const DefaultMaxSessions = 256

// option is one row of the contract's configuration table.
type option struct {
	flag, env, def, usage string
}

var options = []option{
	{flag: "project", env: "JAIL_MCP_PROJECT", usage: "the project `DIR` (default: current directory)"},
	{flag: "root", env: "JAIL_MCP_ROOT", usage: "base `DIR` of all session jails (default: <project>/.agent-home)"},
	{flag: "backend", env: "JAIL_MCP_BACKEND", def: "auto", usage: "`NAME`: auto, bwrap, landlock, sandbox-exec"},
	{flag: "fallback", env: "JAIL_MCP_FALLBACK", def: "fail", usage: "`MODE` when no backend can confine: fail, or warn (run unconfined)"},
	{flag: "network", env: "JAIL_MCP_NETWORK", def: "on", usage: "`MODE`: on or off"},
	{flag: "auth", env: "JAIL_MCP_AUTH", def: "all", usage: "`LIST` of CLIs whose credentials are visible read-only: all, none, or names"},
	{flag: "session", env: "JAIL_MCP_SESSION", usage: "session `NAME` (default: a new UUID); a fixed name keeps the jail across restarts"},
	{flag: "listen", env: "JAIL_MCP_LISTEN", usage: "serve streamable HTTP at /mcp on `ADDR` (host:port), one jail per MCP session"},
	{flag: "token", env: "JAIL_MCP_TOKEN", usage: "HTTP bearer `TOKEN` (at least 16 characters); required when --listen is not loopback"},
	{flag: "timeout", env: "JAIL_MCP_TIMEOUT", def: "60s", usage: "default per-command timeout `DUR`"},
	{flag: "max-timeout", env: "JAIL_MCP_MAX_TIMEOUT", def: "10m", usage: "upper clamp `DUR` for a request's timeout_ms"},
	{flag: "max-job-time", env: "JAIL_MCP_MAX_JOB_TIME", def: "1h", usage: "upper bound `DUR` of a job (a command run in the background or kept running past its call)"},
	{flag: "max-jobs", env: "JAIL_MCP_MAX_JOBS", def: "16", usage: "jobs one session may run at once (`N`)"},
	{flag: "max-output", env: "JAIL_MCP_MAX_OUTPUT", def: "65536", usage: "`BYTES` of each stream returned inline"},
	{flag: "pass-env", env: "JAIL_MCP_PASS_ENV", usage: "`LIST` of host variables passed into the jail: names or PREFIX_*"},
	{flag: "max-procs", env: "JAIL_MCP_MAX_PROCS", def: "512", usage: "processes a command may have at once (`N`)"},
	{flag: "max-memory", env: "JAIL_MCP_MAX_MEMORY", def: "4GiB", usage: "memory `BYTES` of a command's processes together"},
	{flag: "max-disk", env: "JAIL_MCP_MAX_DISK", def: "10GiB", usage: "disk usage `BYTES` of one session's jail"},
	{flag: "max-sessions", env: "JAIL_MCP_MAX_SESSIONS", def: strconv.Itoa(DefaultMaxSessions), usage: "live MCP sessions served at once over HTTP (`N`)"},
	{flag: "log-level", env: "JAIL_MCP_LOG_LEVEL", def: "info", usage: "`LEVEL`: debug, info, warn, error"},
}

// RawConfig holds each option's text and whether the operator set it.
type RawConfig struct {
	values map[string]*string
	set    map[string]string // flag name -> "--flag" or "VAR" that set it
}

// HTTP reports whether the operator asked for HTTP (--listen or its
// variable), whatever its value.
func (rc *RawConfig) HTTP() bool {
	p := rc.values["listen"]
	return p != nil && strings.TrimSpace(*p) != ""
}

// BindConfig registers the options on fs, with defaults from the environment.
func BindConfig(fs *flag.FlagSet, getenv func(string) string, skip ...string) *RawConfig {
	rc := &RawConfig{values: map[string]*string{}, set: map[string]string{}}
	for _, o := range options {
		if slices.Contains(skip, o.flag) {
			continue
		}
		def := o.def
		if v := getenv(o.env); v != "" {
			def = v
			rc.set[o.flag] = o.env
		}
		usage := o.usage + " [$" + o.env + "]"
		rc.values[o.flag] = fs.String(o.flag, def, usage)
	}
	return rc
}

// Parse validates every option; the first bad one is the error.
func (rc *RawConfig) Parse(fs *flag.FlagSet) (Config, error) {
	fs.Visit(func(f *flag.Flag) { rc.set[f.Name] = "--" + f.Name })
	var c Config
	get := func(name string) string {
		if p := rc.values[name]; p != nil {
			return strings.TrimSpace(*p)
		}
		for _, o := range options {
			if o.flag == name {
				return o.def
			}
		}
		return ""
	}
	bad := func(name, format string, a ...any) error {
		by := rc.set[name]
		if by == "" {
			by = "--" + name
		}
		return fmt.Errorf("invalid %s %q: %s", by, get(name), fmt.Sprintf(format, a...))
	}

	var err error
	project := get("project")
	if project == "" {
		if project, err = os.Getwd(); err != nil {
			return c, fmt.Errorf("find current directory: %w", err)
		}
	}
	if c.Project, err = session.ResolveProject(project); err != nil {
		return c, bad("project", "%v", unwrapPath(err))
	}
	if c.Root, err = session.ResolveRoot(c.Project, get("root")); err != nil {
		return c, fmt.Errorf("invalid %s: %w", cmp.Or(rc.set["root"], "--root"), err)
	}

	switch c.Backend = get("backend"); c.Backend {
	case "auto", "bwrap", "landlock", "sandbox-exec":
		// A backend this OS lacks is not a bad value: the server starts
		// and refuses every call saying why (fail closed), as doctor does.
	default:
		return c, bad("backend", "want auto, bwrap, landlock or sandbox-exec")
	}
	switch c.Fallback = get("fallback"); c.Fallback {
	case "fail", "warn":
	default:
		return c, bad("fallback", "want fail or warn")
	}
	switch get("network") {
	case "on":
		c.Network = true
	case "off":
	default:
		return c, bad("network", "want on or off")
	}
	if c.Auth, err = auth.ParseList(get("auth")); err != nil {
		return c, bad("auth", "%v", err)
	}
	if c.Session = get("session"); c.Session != "" || rc.set["session"] != "" {
		if err := session.ValidName(c.Session); err != nil {
			return c, bad("session", "want 1 to 64 of A-Z a-z 0-9 . _ - and not . or ..")
		}
	}
	c.Listen, c.Token = get("listen"), get("token")
	if c.MaxSessions, err = strconv.Atoi(get("max-sessions")); err != nil || c.MaxSessions < 1 {
		return c, bad("max-sessions", "want a positive integer")
	}
	if err := checkListen(&c, rc); err != nil {
		return c, err
	}
	if c.Timeout, err = duration(get("timeout")); err != nil {
		return c, bad("timeout", "%v", err)
	}
	if c.MaxTimeout, err = duration(get("max-timeout")); err != nil {
		return c, bad("max-timeout", "%v", err)
	}
	if c.Timeout > c.MaxTimeout {
		return c, bad("timeout", "longer than the max timeout %v", c.MaxTimeout)
	}
	if rc.values["max-job-time"] != nil {
		if c.MaxJobTime, err = duration(get("max-job-time")); err != nil {
			return c, bad("max-job-time", "%v", err)
		}
		if c.MaxJobs, err = strconv.Atoi(get("max-jobs")); err != nil || c.MaxJobs < 1 || c.MaxJobs > 1024 {
			return c, bad("max-jobs", "want an integer from 1 to 1024")
		}
	}
	if c.MaxOutput, err = bytesize(get("max-output")); err != nil {
		return c, bad("max-output", "%v", err)
	}
	if c.MaxOutput < 256 || c.MaxOutput > 16<<20 {
		return c, bad("max-output", "want between 256 bytes and 16MiB")
	}
	if pe := get("pass-env"); pe != "" {
		for _, e := range strings.Split(pe, ",") {
			e = strings.TrimSpace(e)
			if err := session.ValidPassEnv(e); err != nil {
				return c, bad("pass-env", "%v", strings.TrimPrefix(err.Error(), fmt.Sprintf("invalid --pass-env entry %q: ", e)))
			}
			c.PassEnv = append(c.PassEnv, e)
		}
	}
	if c.MaxProcs, err = strconv.ParseInt(get("max-procs"), 10, 64); err != nil || c.MaxProcs < 1 {
		return c, bad("max-procs", "want a positive integer")
	}
	if c.MaxMemory, err = bytesize(get("max-memory")); err != nil {
		return c, bad("max-memory", "%v", err)
	}
	if c.MaxDisk, err = bytesize(get("max-disk")); err != nil {
		return c, bad("max-disk", "%v", err)
	}
	if err := c.LogLevel.UnmarshalText([]byte(get("log-level"))); err != nil || !slices.Contains([]string{"debug", "info", "warn", "error"}, strings.ToLower(get("log-level"))) {
		return c, bad("log-level", "want debug, info, warn or error")
	}
	return c, nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func duration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("want a duration like 90s or 10m")
	}
	if d <= 0 {
		return 0, errors.New("want a positive duration")
	}
	return d, nil
}

// bytesize parses a byte count like 65536, 64KiB or 4GiB.
func bytesize(s string) (int64, error) {
	n, err := humanize.ParseBytes(s)
	if err != nil || strings.HasPrefix(s, "-") {
		return 0, errors.New("want a byte count like 65536, 64KiB or 4GiB")
	}
	if n == 0 {
		return 0, errors.New("want a positive byte count")
	}
	if n > math.MaxInt64 {
		return 0, errors.New("too large")
	}
	return int64(n), nil
}

// checkListen validates --listen and --token together: HTTP on a
// non-loopback address needs a token, a token needs HTTP, and --session
// is for stdio, where one server is one session. --max-sessions given
// without --listen is refused as a mistake; JAIL_MCP_MAX_SESSIONS is
// not, as a variable exported for HTTP servers must not break the stdio
// servers of the same shell.
func checkListen(c *Config, rc *RawConfig) error {
	by := func(name string) string { return cmp.Or(rc.set[name], "--"+name) }
	if c.Listen == "" && rc.set["max-sessions"] == "--max-sessions" {
		return errors.New("--max-sessions is for HTTP; set --listen too")
	}
	if c.Token != "" && c.Listen == "" && rc.set["token"] == "JAIL_MCP_TOKEN" {
		// A client that passes its whole environment to a stdio server
		// passes a token exported for an HTTP one too: not an error.
		c.Token = ""
		c.Warnings = append(c.Warnings, "JAIL_MCP_TOKEN is set but this server serves stdio (no --listen): the token is ignored")
	}
	if c.Token != "" {
		if c.Listen == "" {
			return fmt.Errorf("%s: a token is for HTTP; set --listen too", by("token"))
		}
		if len(c.Token) < 16 || strings.ContainsFunc(c.Token, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return fmt.Errorf("invalid %s: want at least 16 printable characters, no spaces", by("token"))
		}
	}
	if c.Listen == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(c.Listen)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
		return fmt.Errorf("invalid %s %q: want HOST:PORT, like 127.0.0.1:8765", by("listen"), c.Listen)
	}
	if rc.set["session"] != "" {
		return fmt.Errorf("%s is for stdio: over HTTP each MCP session gets its own jail", rc.set["session"])
	}
	if !loopback(host) && c.Token == "" {
		return fmt.Errorf("%s %s is not a loopback address: set --token (or JAIL_MCP_TOKEN) so that only your clients can run commands", by("listen"), c.Listen)
	}
	return nil
}

// loopback reports whether host names only this machine: localhost or a
// loopback IP. An empty host is every interface.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
