package cli

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session"
	"github.com/jail-mcp/jail-mcp/session/egress"
	"github.com/jail-mcp/jail-mcp/session/jailfs"
)

// Config is the operator's configuration, validated: every field of the
// contract's configuration table.
type Config struct {
	Project  string
	Root     string
	Backend  string
	Fallback string
	Network  bool
	// Allow, when set, is the allowlist network is held to (--network
	// allow:LIST): every connection goes through the server's proxy.
	Allow    *egress.Policy
	Auth     []string
	Writable []string // directories of the project commands write in place (--writable)
	// DenyRead are the --deny-read entries besides "default", absolute
	// and clean (a relative one joined to the project; "~/" stays, for
	// the server user's home); DenyDefault: "default" is among them.
	DenyRead    []string
	DenyDefault bool
	// Mask are the credentials the jail gets as placeholders (--mask),
	// resolved against --auth and --pass-env.
	Mask        session.MaskConfig
	Session     string
	Listen      string
	Token       string
	TokenFile   string // the file Token was read from (--token-file), if any
	Timeout     time.Duration
	MaxTimeout  time.Duration
	MaxOutput   int64
	MaxJobTime  time.Duration
	MaxJobs     int
	PassEnv     []string
	MaxProcs    int64
	MaxMemory   int64
	MaxDisk     int64
	MaxFiles    int64
	MaxSessions int
	// MaxConns and MaxConnsPerAddr bound the open HTTP connections, in
	// all and of one remote address; MaxConnsSet: the operator set
	// MaxConns (otherwise the server may lower it to fit its descriptor
	// limit).
	MaxConns        int
	MaxConnsPerAddr int
	MaxConnsSet     bool
	LogLevel        slog.Level
	// Overlay is --overlay: "on" shows commands the project
	// copy-on-write or refuses to start, "auto" where the start probe
	// passes (else the project is read-only, and the server says why),
	// "off" never.
	Overlay string
	// Apply is --apply: who says yes to a jail_apply (ask, allow, never).
	Apply string
	// viewRefused is why the sandbox refused the view of a command of
	// jail-mcp run, which then runs without it (--overlay auto).
	viewRefused error
	// Warnings about the configuration, for the log once it exists.
	Warnings []string
}

// DefaultMaxSessions bounds the live HTTP sessions: each holds an open jail
// directory and mcp-go's state for it, and 256 is far above what one
// developer or a small team opens, while it bounds the descriptors and
// memory a client that never ends its sessions can take.
const DefaultMaxSessions = 256

// DefaultMaxConns bounds the open HTTP connections: a session holds one
// for its GET stream and one for each call in flight, so 1024 serves the
// default 256 sessions with calls running in each, while it keeps the
// descriptors a flood of connections can take far from the limit (the
// server lowers it to half the descriptor limit where that is lower).
const DefaultMaxConns = 1024

// DefaultMaxFiles bounds the inodes of a jail. Its blocks are bounded by
// --max-disk, but empty files, short symlinks, FIFOs and sockets take
// none: this is what bounds them. Half a million is above what a jail's
// caches reach (a Go module and build cache, npm's and pip's together are
// some 100,000 files for a large project) and far below what a host's file
// system holds.
const DefaultMaxFiles = 500000

// option is one row of the contract's configuration table: the flag, its
// variable, its default and usage, and parse, which sets the field of
// Config that it is from its text, or says what it wants instead.
type option struct {
	flag, env, def, usage string
	parse                 func(c *Config, v string) error
}

// secret reports whether o's value is never taken from the command line,
// where every process of the machine can read it (/proc/PID/cmdline),
// only from its variable, nor is the variable shown as the flag's default
// (-h). A jailed command under the landlock backend sees the host's /proc,
// and the server is its agent's parent.
func (o option) secret() bool { return o.flag == "token" }

// backendNames are the values of --backend.
var backendNames = append([]string{"auto"}, jail.Names...)

var options = []option{
	{"project", "JAIL_MCP_PROJECT", "", "the project `DIR` (default: current directory)", parseProject},
	{"root", "JAIL_MCP_ROOT", "", "base `DIR` of all session jails (default: <project>/.agent-home)", parseRoot},
	// A backend this OS lacks is not a bad value: the server starts and
	// refuses every call saying why (fail closed), as doctor does.
	{"backend", "JAIL_MCP_BACKEND", "auto", "`NAME`: " + strings.Join(backendNames, ", "), oneOf(func(c *Config) *string { return &c.Backend }, backendNames...)},
	{"fallback", "JAIL_MCP_FALLBACK", "fail", "`MODE` when no backend can confine: fail, or warn (run unconfined)", oneOf(func(c *Config) *string { return &c.Fallback }, "fail", "warn")},
	{"network", "JAIL_MCP_NETWORK", "on", "`MODE`: on, off, or allow:HOST,*.DOMAIN,HOST:PORT (only those, through the server's proxy)", parseNetwork},
	{"auth", "JAIL_MCP_AUTH", "all", "`LIST` of CLIs whose credentials are visible read-only: all, none, or names", parseAuth},
	{"writable", "JAIL_MCP_WRITABLE", "", "`PATHS` of the project (comma list, like node_modules,build) that commands write in place: the host project changes there", parseWritable},
	{"deny-read", "JAIL_MCP_DENY_READ", "default", "`LIST` of host paths no command reads (absolute, ~/ for the server user's home, or of the project; the last element may be a pattern); default stands for the built-in list of secret files (see docs/configuration.md); '' denies nothing", parseDenyRead},
	{"mask", "JAIL_MCP_MASK", "", "`LIST` of credentials the jail gets as placeholders, the real values sent by the server's proxy only over TLS to their hosts: all, CLI names, env:NAME; @HOST,HOST adds hosts (env:GH_TOKEN@api.github.com,github.com); '' masks nothing", parseMask},
	{"session", "JAIL_MCP_SESSION", "", "session `NAME` (default: a new UUID); a fixed name keeps the jail across restarts", parseSession},
	{"listen", "JAIL_MCP_LISTEN", "", "serve streamable HTTP at /mcp on `ADDR` (host:port), one jail per MCP session", func(c *Config, v string) error { c.Listen = v; return nil }},
	{"token", "JAIL_MCP_TOKEN", "", "refused: a `TOKEN` on the command line is readable by every local process; set $JAIL_MCP_TOKEN or --token-file instead", func(c *Config, v string) error { c.Token = v; return nil }},
	{"token-file", "JAIL_MCP_TOKEN_FILE", "", "`PATH` of a file holding the HTTP bearer token (mode 0600 or stricter; a trailing newline is trimmed)", func(c *Config, v string) error { c.TokenFile = v; return nil }},
	{"timeout", "JAIL_MCP_TIMEOUT", "60s", "default per-command timeout `DUR`", durationOf(func(c *Config) *time.Duration { return &c.Timeout })},
	{"max-timeout", "JAIL_MCP_MAX_TIMEOUT", "10m", "upper clamp `DUR` for a request's timeout_ms", durationOf(func(c *Config) *time.Duration { return &c.MaxTimeout })},
	{"max-job-time", "JAIL_MCP_MAX_JOB_TIME", "1h", "upper bound `DUR` of a job (a command run in the background or kept running past its call)", durationOf(func(c *Config) *time.Duration { return &c.MaxJobTime })},
	{"max-jobs", "JAIL_MCP_MAX_JOBS", "16", "jobs one session may run at once (`N`)", countOf(func(c *Config) *int { return &c.MaxJobs }, 1024)},
	{"max-output", "JAIL_MCP_MAX_OUTPUT", "65536", "`BYTES` of each stream returned inline", parseMaxOutput},
	{"pass-env", "JAIL_MCP_PASS_ENV", "", "`LIST` of host variables passed into the jail: names or PREFIX_*", parsePassEnv},
	{"max-procs", "JAIL_MCP_MAX_PROCS", "512", "processes a command may have at once (`N`), each thread counted", countOf(func(c *Config) *int64 { return &c.MaxProcs }, math.MaxInt64)},
	{"max-memory", "JAIL_MCP_MAX_MEMORY", "4GiB", "memory `BYTES` of a command's processes together", bytesOf(func(c *Config) *int64 { return &c.MaxMemory })},
	{"max-disk", "JAIL_MCP_MAX_DISK", "10GiB", "disk usage `BYTES` of one session's jail (the blocks of its files of every kind)", bytesOf(func(c *Config) *int64 { return &c.MaxDisk })},
	{"max-files", "JAIL_MCP_MAX_FILES", strconv.Itoa(DefaultMaxFiles), "files of every kind (inodes: directories and symlinks too) one session's jail may hold (`N`)", countOf(func(c *Config) *int64 { return &c.MaxFiles }, math.MaxInt64)},
	{"max-sessions", "JAIL_MCP_MAX_SESSIONS", strconv.Itoa(DefaultMaxSessions), "live MCP sessions served at once over HTTP (`N`)", countOf(func(c *Config) *int { return &c.MaxSessions }, math.MaxInt32)},
	{"max-conns", "JAIL_MCP_MAX_CONNS", strconv.Itoa(DefaultMaxConns), "open HTTP connections at once (`N`); beyond them the least needed are closed (at most half the descriptor limit)", countOf(func(c *Config) *int { return &c.MaxConns }, math.MaxInt32)},
	{"max-conns-per-addr", "JAIL_MCP_MAX_CONNS_PER_ADDR", "", "open HTTP connections of one remote address (`N`; default: --max-conns)", parseMaxConnsPerAddr},
	{"overlay", "JAIL_MCP_OVERLAY", "auto", "`MODE`: on shows commands the project writable, copy-on-write: every change stays in the session's layer until jail_apply (bubblewrap only; the server refuses to start where it cannot); auto: on where the start probe passes, else off, saying why; off: the project is read-only to commands", parseOverlay},
	{"apply", "JAIL_MCP_APPLY", "ask", "`MODE` of jail_apply: ask (the user accepts or declines each apply in the client, through MCP elicitation; where the client cannot ask, as allow), allow (the assistant applies alone), never (the tool writes nothing: the user applies with jail-mcp apply)", oneOf(func(c *Config) *string { return &c.Apply }, "ask", "allow", "never")},
	{"log-level", "JAIL_MCP_LOG_LEVEL", "info", "`LEVEL`: debug, info, warn, error", parseLogLevel},
}

// RawConfig holds each option's text and whether the operator set it.
type RawConfig struct {
	values map[string]*string
	set    map[string]string // flag name -> "--flag" or "VAR" that set it
	env    map[string]string // secret options' values, from their variables
}

// HTTP reports whether the operator asked for HTTP (--listen or its
// variable), whatever its value.
func (rc *RawConfig) HTTP() bool {
	p := rc.values["listen"]
	return p != nil && strings.TrimSpace(*p) != ""
}

// BindConfig registers the options on fs, with defaults from the
// environment; the options in skip are not flags of fs and keep their
// defaults.
func BindConfig(fs *flag.FlagSet, getenv func(string) string, skip ...string) *RawConfig {
	rc := &RawConfig{values: map[string]*string{}, set: map[string]string{}, env: map[string]string{}}
	for _, o := range options {
		if slices.Contains(skip, o.flag) {
			continue
		}
		def := o.def
		if v := getenv(o.env); v != "" {
			rc.set[o.flag] = o.env
			if o.secret() {
				rc.env[o.flag] = v
			} else {
				def = v
			}
		}
		usage := o.usage + " [$" + o.env + "]"
		rc.values[o.flag] = fs.String(o.flag, def, usage)
	}
	return rc
}

// Parse validates every option, in the table's order, then the options
// that go together; the first bad one is the error.
func (rc *RawConfig) Parse(fs *flag.FlagSet) (Config, error) {
	fs.Visit(func(f *flag.Flag) { rc.set[f.Name] = "--" + f.Name })
	for _, o := range options {
		if o.secret() && rc.set[o.flag] == "--"+o.flag {
			// Refused before anything else runs, so no process started
			// with it: the value itself is never repeated.
			return Config{}, fmt.Errorf("--%s takes no value on the command line, where every local process can read it (/proc/PID/cmdline): set %s, or --%s-file PATH", o.flag, o.env, o.flag)
		}
	}
	var c Config
	for _, o := range options {
		v := rc.value(o)
		if err := o.parse(&c, v); err != nil {
			var whole *wholeError
			if errors.As(err, &whole) {
				return c, fmt.Errorf("invalid %s: %w", rc.by(o.flag), whole.err)
			}
			return c, fmt.Errorf("invalid %s %q: %w", rc.by(o.flag), v, err)
		}
	}
	if c.Session == "" && rc.set["session"] != "" {
		return c, fmt.Errorf("invalid %s \"\": %w", rc.by("session"), errSessionName)
	}
	if err := checkListen(&c, rc); err != nil {
		return c, err
	}
	// What --mask names must be shown (--auth) or passed (--pass-env).
	mask, err := auth.ParseMask(rc.text("mask"))
	if err == nil {
		c.Mask, err = session.ResolveMask(mask, c.Auth, c.PassEnv)
	}
	if err != nil {
		return c, fmt.Errorf("invalid %s: %w", rc.by("mask"), err)
	}
	if c.Timeout > c.MaxTimeout {
		return c, fmt.Errorf("invalid %s %q: longer than the max timeout %v", rc.by("timeout"), rc.text("timeout"), c.MaxTimeout)
	}
	return c, nil
}

// value is the text of o: as the operator gave it, or its default.
func (rc *RawConfig) value(o option) string {
	if o.secret() {
		return strings.TrimSpace(rc.env[o.flag])
	}
	if p := rc.values[o.flag]; p != nil {
		return strings.TrimSpace(*p)
	}
	return o.def
}

// text is the value of the option named flag.
func (rc *RawConfig) text(flag string) string {
	i := slices.IndexFunc(options, func(o option) bool { return o.flag == flag })
	return rc.value(options[i])
}

// by is what set an option: "--flag", or its variable.
func (rc *RawConfig) by(name string) string { return cmp.Or(rc.set[name], "--"+name) }

// wholeError is a parse error that says all itself, not only what the
// option wants (the value is not repeated).
type wholeError struct{ err error }

func (e *wholeError) Error() string { return e.err.Error() }

func parseProject(c *Config, v string) error {
	project := v
	if project == "" {
		wd, err := os.Getwd()
		if err != nil {
			return &wholeError{fmt.Errorf("find current directory: %w", err)}
		}
		project = wd
	}
	p, err := session.ResolveProject(project)
	if err != nil {
		return unwrapPath(err)
	}
	c.Project = p
	return nil
}

func parseRoot(c *Config, v string) (err error) {
	if c.Root, err = session.ResolveRoot(c.Project, v); err != nil {
		return &wholeError{err}
	}
	return nil
}

// oneOf is the parse of an option with a fixed set of values.
func oneOf(field func(*Config) *string, values ...string) func(*Config, string) error {
	return func(c *Config, v string) error {
		if !slices.Contains(values, v) {
			return errors.New("want " + alternatives(values))
		}
		*field(c) = v
		return nil
	}
}

// alternatives is "a, b or c".
func alternatives(values []string) string {
	if len(values) < 2 {
		return strings.Join(values, "")
	}
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}

func parseNetwork(c *Config, v string) error {
	switch {
	case v == "on":
		c.Network = true
	case v == "off":
	case strings.HasPrefix(v, egress.Prefix):
		p, err := egress.Parse(strings.TrimPrefix(v, egress.Prefix))
		if err != nil {
			return err
		}
		c.Network, c.Allow = true, &p
	default:
		return errors.New("want on, off, or allow:HOST,*.DOMAIN,HOST:PORT")
	}
	return nil
}

func parseAuth(c *Config, v string) (err error) {
	c.Auth, err = auth.ParseList(v)
	return err
}

// parseWritable checks each path of --writable against the project and
// the jail base, parsed before it.
func parseWritable(c *Config, v string) error {
	if v == "" {
		return nil
	}
	var rels []string
	for _, e := range strings.Split(v, ",") {
		rels = append(rels, strings.TrimSpace(e))
	}
	w, err := session.ResolveWritable(c.Project, c.Root, rels)
	if err != nil {
		return &wholeError{err}
	}
	c.Writable = w
	return nil
}

// errSessionName is what --session wants.
var errSessionName = errors.New("want 1 to 64 of A-Z a-z 0-9 . _ - and not . or ..")

func parseSession(c *Config, v string) error {
	if v != "" && jailfs.ValidName(v) != nil {
		return errSessionName
	}
	c.Session = v
	return nil
}

func durationOf(field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) (err error) {
		*field(c), err = duration(v)
		return err
	}
}

func bytesOf(field func(*Config) *int64) func(*Config, string) error {
	return func(c *Config, v string) (err error) {
		*field(c), err = bytesize(v)
		return err
	}
}

// countOf is the parse of a positive integer up to max.
func countOf[T int | int64](field func(*Config) *T, max T) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > int64(max) {
			if max < math.MaxInt32 {
				return fmt.Errorf("want an integer from 1 to %d", max)
			}
			return errors.New("want a positive integer")
		}
		*field(c) = T(n)
		return nil
	}
}

func parseMaxOutput(c *Config, v string) (err error) {
	if c.MaxOutput, err = bytesize(v); err != nil {
		return err
	}
	if c.MaxOutput < 256 || c.MaxOutput > 16<<20 {
		return errors.New("want between 256 bytes and 16MiB")
	}
	return nil
}

func parsePassEnv(c *Config, v string) error {
	if v == "" {
		return nil
	}
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if err := session.ValidPassEnv(e); err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), fmt.Sprintf("invalid --pass-env entry %q: ", e)))
		}
		c.PassEnv = append(c.PassEnv, e)
	}
	return nil
}

func parseMaxConnsPerAddr(c *Config, v string) error {
	if v == "" {
		c.MaxConnsPerAddr = c.MaxConns
		return nil
	}
	return countOf(func(c *Config) *int { return &c.MaxConnsPerAddr }, math.MaxInt32)(c, v)
}

// parseDenyRead checks --deny-read's entries; OpenJail resolves them
// against the server user's home and the host as it is.
func parseDenyRead(c *Config, v string) error {
	// "~" is resolved later: here it only has to parse.
	entries, def, err := auth.ParseDeny(v, "/~", c.Project)
	if err != nil {
		return &wholeError{err}
	}
	for i, e := range entries {
		if rest, ok := strings.CutPrefix(e, "/~"); ok && (rest == "" || rest[0] == '/') {
			entries[i] = "~" + rest
		}
	}
	c.DenyRead, c.DenyDefault = entries, def
	return nil
}

// parseMask checks that --mask parses; Parse resolves it once --auth and
// --pass-env are known.
func parseMask(c *Config, v string) error {
	if _, err := auth.ParseMask(v); err != nil {
		return &wholeError{err}
	}
	return nil
}

func parseOverlay(c *Config, v string) error {
	switch v {
	case "auto", "on", "off":
		c.Overlay = v
	default:
		return fmt.Errorf("want auto, on or off, not %q", v)
	}
	return nil
}

func parseLogLevel(c *Config, v string) error {
	levels := []string{"debug", "info", "warn", "error"}
	if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil || !slices.Contains(levels, strings.ToLower(v)) {
		return errors.New("want " + alternatives(levels))
	}
	return nil
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
// is for stdio, where one server is one session. --max-sessions and
// --max-conns given without --listen are refused as a mistake; their
// variables are not, as a variable exported for HTTP servers must not
// break the stdio servers of the same shell.
func checkListen(c *Config, rc *RawConfig) error {
	by := rc.by
	for _, f := range []string{"max-sessions", "max-conns", "max-conns-per-addr"} {
		if c.Listen == "" && rc.set[f] == "--"+f {
			return fmt.Errorf("--%s is for HTTP; set --listen too", f)
		}
	}
	c.MaxConnsSet = rc.set["max-conns"] != ""
	tokenBy := by("token")
	if c.TokenFile != "" {
		tokenBy = by("token-file")
	}
	if c.Listen == "" && (c.Token != "" || c.TokenFile != "") {
		// A client that passes its whole environment to a stdio server
		// passes a token exported for an HTTP one too: not an error.
		if rc.set["token-file"] == "--token-file" {
			return errors.New("--token-file: a token is for HTTP; set --listen too")
		}
		c.Warnings = append(c.Warnings, tokenBy+" is set but this server serves stdio (no --listen): the token is ignored")
		c.Token, c.TokenFile = "", ""
	}
	if c.TokenFile != "" {
		if c.Token != "" {
			return fmt.Errorf("%s and %s both set: set one", by("token"), tokenBy)
		}
		t, err := readTokenFile(c.TokenFile)
		if err != nil {
			return fmt.Errorf("invalid %s %q: %w", tokenBy, c.TokenFile, err)
		}
		c.Token = t
	}
	if c.Token != "" {
		if len(c.Token) < 16 || strings.ContainsFunc(c.Token, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return fmt.Errorf("invalid %s: want a token of at least 16 printable characters, no spaces", tokenBy)
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
	if c.MaxConnsPerAddr > c.MaxConns {
		return fmt.Errorf("invalid %s %d: more than %s %d", by("max-conns-per-addr"), c.MaxConnsPerAddr, by("max-conns"), c.MaxConns)
	}
	if !loopback(host) && c.Token == "" {
		return fmt.Errorf("%s %s is not a loopback address: set a token (JAIL_MCP_TOKEN or --token-file) so that only your clients can run commands", by("listen"), c.Listen)
	}
	return nil
}

// maxTokenFile bounds what is read of a token file: a token is tens of
// bytes, and a path given by mistake (a log, a device) must not be read
// whole.
const maxTokenFile = 4096

// readTokenFile reads the token in path, without its trailing newline.
// The file must be a regular file (after symlinks, as Kubernetes mounts
// secrets) that no one but its owner may read or write: a token others can
// read is no secret, and one others can write is theirs to choose.
func readTokenFile(path string) (string, error) {
	// Not blocking: a FIFO given by mistake is refused, not waited on; a
	// terminal is never made the server's controlling one.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return "", unwrapPath(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", unwrapPath(err)
	}
	if !fi.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("group or others may access it (mode %04o): chmod 600 it", perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", unwrapPath(err)
	}
	if len(b) > maxTokenFile {
		return "", fmt.Errorf("longer than %d bytes: not a token", maxTokenFile)
	}
	s := strings.TrimSuffix(string(b), "\n")
	s = strings.TrimSuffix(s, "\r")
	if s == "" {
		return "", errors.New("empty")
	}
	return s, nil
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
