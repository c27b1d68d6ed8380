// Package session owns the mapping from session names to jails and their
// lifecycle: creating a jail and its skeleton under the project's
// .agent-home, running commands in it through a jail.Backend, counting and
// resetting its files. All host-side file work inside a jail goes through
// os.Root, so nothing a command plants there can steer the server outside.
package session

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/creds"
	"github.com/jail-mcp/jail-mcp/session/egress"
	"github.com/jail-mcp/jail-mcp/session/jailfs"
	"github.com/jail-mcp/jail-mcp/session/limits"
	"github.com/jail-mcp/jail-mcp/session/view"
)

// ErrNotFound reports a session name the manager does not know.
var ErrNotFound = errors.New("session not found")

// Config is the operator's policy, validated by the caller.
type Config struct {
	Project string // canonical project directory
	Root    string // canonical jail base, from ResolveRoot

	// Backend confines commands; jail.Refusing refuses every one, saying
	// why (fail closed).
	Backend jail.Backend

	// Writable are directories of the project commands write in place
	// (--writable), from ResolveWritable; New makes those missing.
	Writable []string

	Network bool
	// Allow, when set (with Network), is the allowlist every connection
	// of a command is held to, through a proxy the server runs.
	Allow *egress.Policy
	Auth  []string // canonical CLI names the operator enabled
	Home  string   // the operator's home, where credentials live
	// Unread are host paths no command reads (the HTTP token file),
	// where the backend runs session agents.
	Unread []string
	// Deny is the --deny-read list: host paths no command reads, and the
	// paths below them that stay readable.
	Deny       auth.Deny
	Environ    []string // the server's environment, KEY=VALUE
	PassEnv    []string // names or PREFIX_* passed beyond the base set
	Timeout    time.Duration
	MaxTimeout time.Duration
	MaxOutput  int
	// MaxJobTime bounds a job (a command run in the background, or kept
	// running past its call); MaxJobs bounds a session's running jobs.
	MaxJobTime time.Duration
	MaxJobs    int
	// MaxProcs and MaxMemory bound a command, MaxDisk (bytes on disk)
	// and MaxFiles (inodes) a session's jail; 0 is no bound.
	MaxProcs, MaxMemory, MaxDisk, MaxFiles int64
	Logger                                 *slog.Logger // nil discards
	// OneCall is for a manager that runs one command and ends (jail-mcp
	// run): it prepares one launcher at once instead of keeping spares.
	OneCall bool
	// Observer, when set, is told how every command ended, and why a call
	// ran none (metrics).
	Observer Observer
	// Overlay shows every command the project copy-on-write (--overlay),
	// its changes in the session's layer (session/view).
	Overlay bool
	// Review is a manager that runs no command: it reviews, applies and
	// discards what existing sessions' layers hold (jail-mcp diff, apply,
	// discard), without watching the project (every look at the host is
	// a fresh one) or naming its jails to other servers.
	Review bool
	// Mask are the credentials the jail gets as placeholders (--mask,
	// session/creds), from ResolveMask.
	Mask MaskConfig
}

// The masking of credentials, as session/creds has it.
type (
	MaskConfig       = creds.MaskConfig
	MaskHosts        = creds.MaskHosts
	MaskInfo         = creds.MaskInfo
	MaskedCredential = creds.MaskedCredential
)

// CABundleRel is where the jail's bundle of roots is, in the jail.
const CABundleRel = creds.CABundleRel

// ResolveMask resolves the operator's --mask (creds.ResolveMask).
func ResolveMask(m auth.Mask, enabled, pass []string) (MaskConfig, error) {
	return creds.ResolveMask(m, enabled, pass)
}

// Observer is told what the sessions' commands did: each call's (and
// job's) result once it ended, or the error that kept it from running.
// Its methods must not block.
type Observer interface {
	Ran(res *Result)
	Refused(err error)
}

// Manager maps session names to jails.
type Manager struct {
	cfg    Config
	log    *slog.Logger
	base   *os.Root
	getenv func(string) string // over cfg.Environ
	// registry is where this user's servers name their projects' jails
	// (jailfs.RegistryDir), "" when it cannot be written.
	registry string
	// hostEnv is what every call's environment takes of the host's
	// (hostEnv of cfg.Environ and cfg.PassEnv), made once.
	hostEnv func() map[string]string
	// creds is the host's credentials as the sessions show them.
	creds *creds.Host
	// view is the project view (--overlay): the host caches it shows
	// in each jail, and the watch of the project; nil when off.
	view *view.View

	mu       sync.Mutex
	sessions map[string]*Session

	dog  limits.Watchdog
	pool *limits.Pool // nil where the server cannot create cgroups
	uw   *jailfs.UsageWatch
}

// skeleton is created in every jail; the XDG variables point at it.
var skeleton = []string{".tmp", ".config", ".cache", ".local/share", ".local/state", ".runtime"}

// New creates the jail base if needed, with a .gitignore containing "*"
// written only when absent, and returns a manager over it.
func New(cfg Config) (*Manager, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.MaxJobTime = cmp.Or(cfg.MaxJobTime, DefaultMaxJobTime)
	if cfg.MaxJobs <= 0 {
		cfg.MaxJobs = DefaultMaxJobs
	}
	if err := mkdirNoFollow(cfg.Project, cfg.Root); err != nil {
		return nil, fmt.Errorf("create jail base %s: %w", cfg.Root, err)
	}
	for _, w := range cfg.Writable {
		f, err := jailfs.OpenWritable(cfg.Project, w, true)
		if err != nil {
			return nil, fmt.Errorf("make writable directory %s: %w", w, err)
		}
		f.Close()
	}
	base, err := os.OpenRoot(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("open jail base %s: %w", cfg.Root, err)
	}
	f, err := base.OpenFile(".gitignore", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	switch {
	case err == nil:
		_, err = f.WriteString("*\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			base.Close()
			return nil, fmt.Errorf("write %s: %w", filepath.Join(cfg.Root, ".gitignore"), err)
		}
	case !errors.Is(err, fs.ErrExist):
		base.Close()
		return nil, fmt.Errorf("write %s: %w", filepath.Join(cfg.Root, ".gitignore"), err)
	}
	env := view.EnvMap(cfg.Environ)
	getenv := func(k string) string { return env[k] }
	m := &Manager{cfg: cfg, log: log, base: base, getenv: getenv, sessions: map[string]*Session{}}
	if m.creds, err = creds.New(creds.Config{Home: cfg.Home, Getenv: getenv, Auth: cfg.Auth, Mask: cfg.Mask, Log: log}); err != nil {
		base.Close()
		return nil, err
	}
	if cfg.Review {
		return m, nil
	}
	if dir := jailfs.RegistryDir(getenv); dir != "" {
		if err := jailfs.Register(dir, m.ownJails()); err != nil {
			log.Warn("name the project's jails where this user's other servers hide them from their commands", "dir", dir, "err", err)
		} else {
			m.registry = dir
		}
	}
	if cfg.Overlay {
		// The jails, and what commands write in place: never seen
		// through a view.
		skip := []string{cfg.Root}
		for _, w := range cfg.Writable {
			skip = append(skip, filepath.Join(cfg.Project, w))
		}
		m.view = view.Start(cfg.Project, cfg.Home, env, skip, m.renewViews, log)
	}
	m.hostEnv = sync.OnceValue(func() map[string]string { return m.view.Env(view.HostEnv(cfg.Environ, cfg.PassEnv)) })
	if cfg.MaxDisk > 0 || cfg.MaxFiles > 0 {
		m.uw = jailfs.NewUsageWatch(log, base)
	}
	if !jail.IsRefusing(cfg.Backend) && (cfg.MaxProcs > 0 || cfg.MaxMemory > 0) {
		m.pool = limits.NewPool(limits.Config{MaxProcs: cfg.MaxProcs, MaxMemory: cfg.MaxMemory, Agents: cfg.Backend.Agents(), OneCall: cfg.OneCall, Log: log})
	}
	return m, nil
}

// mkdirNoFollow creates dir and its missing parents below project, refusing
// any component that is a symlink.
func mkdirNoFollow(project, dir string) error {
	rel, err := filepath.Rel(project, dir)
	if err != nil {
		return err
	}
	p := project
	for _, part := range splitPath(rel) {
		p = filepath.Join(p, part)
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is a symlink or not a directory", p)
		}
	}
	return nil
}

func splitPath(rel string) []string {
	var parts []string
	for rel != "." && rel != "" {
		dir, file := filepath.Split(rel)
		parts = append(parts, file)
		rel = filepath.Clean(dir)
		if dir == "" {
			break
		}
	}
	slices.Reverse(parts)
	return parts
}

// Close closes every open session (ending their commands), then the
// launcher pool, the project view, the usage watch and the jail base.
func (m *Manager) Close() error {
	for _, s := range m.all() {
		s.Close()
	}
	m.pool.Close()
	m.view.Close()
	if m.uw != nil {
		m.uw.Close()
	}
	return m.base.Close()
}

// forget drops a closed session, so that a long-running server does not
// keep every session it ever had; opening the name again makes a new one.
func (m *Manager) forget(s *Session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sessions[s.Name] == s {
		delete(m.sessions, s.Name)
	}
}

// Agents is how many session agents the manager's sessions have now.
func (m *Manager) Agents() int {
	n := 0
	for _, s := range m.all() {
		s.agentMu.Lock()
		n += len(s.agents)
		s.agentMu.Unlock()
	}
	return n
}

func (m *Manager) all() []*Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		out = append(out, s)
	}
	return out
}

// Exposed lists what the operator's --auth exposes on this host.
func (m *Manager) Exposed() []auth.Exposure { return m.creds.Exposed() }

// Config returns the policy the manager runs with.
func (m *Manager) Config() Config { return m.cfg }

// Open returns the session called name, creating its jail and skeleton when
// they do not exist. A session directory that is a symlink is refused.
func (m *Manager) Open(name string) (*Session, error) {
	return m.open(name, openCreate)
}

// OpenReview returns the existing session called name, for a review
// manager (Config.Review): to read its layer beside a running server that
// holds it, or alone, locked so that no server opens it meanwhile (an
// apply, a discard), refused with a *HeldError while one holds it.
func (m *Manager) OpenReview(name string, alone bool) (*Session, error) {
	if alone {
		return m.open(name, openAlone)
	}
	return m.open(name, openExisting)
}

// openMode is how open takes a session's jail.
type openMode int

const (
	openCreate   openMode = iota // made when absent; locked shared (a server)
	openExisting                 // refused when absent; locked shared
	openAlone                    // refused when absent or held; locked exclusively
)

// HeldError refuses a change of a session's layer from the command line
// while another process holds its jail: a running server (its agents'
// views are mounted over the layer), or jail-mcp prune.
type HeldError struct {
	Session string
	Holders []jailfs.Holder // none when /proc/locks named none
}

func (e *HeldError) Error() string {
	who := "another process (a running server, or jail-mcp prune)"
	if len(e.Holders) > 0 {
		var names []string
		for _, h := range e.Holders {
			names = append(names, h.String())
		}
		who = strings.Join(names, "; ")
	}
	return fmt.Sprintf("session %s is held by %s: apply or discard through that server's assistant (jail_apply, jail_discard), or end it and run this again", e.Session, who)
}

func (m *Manager) open(name string, mode openMode) (*Session, error) {
	if err := jailfs.ValidName(name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.sessions[name]; ok {
		return s, nil
	}
	path := filepath.Join(m.cfg.Root, name)
	if mode == openCreate {
		if err := m.base.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create jail %s: %w", path, err)
		}
	}
	fi, err := m.base.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) && mode != openCreate {
		return nil, fmt.Errorf("no session %s in %s: %w", name, m.cfg.Root, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open jail %s: %w", path, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("open jail %s: a symlink or not a directory", path)
	}
	root, err := m.base.OpenRoot(name)
	if err != nil {
		return nil, fmt.Errorf("open jail %s: %w", path, err)
	}
	// Held while the session is open: jail-mcp prune leaves it alone.
	lock, err := m.base.Open(name)
	if err == nil {
		err = lockJail(lock, name, mode)
	}
	if err != nil {
		root.Close()
		if lock != nil {
			lock.Close()
		}
		var held *HeldError
		if errors.As(err, &held) {
			return nil, err
		}
		return nil, fmt.Errorf("lock jail %s: %w", path, err)
	}
	if now, err := m.base.Lstat(name); err != nil || !os.SameFile(now, fi) {
		// Pruned while this server waited for the lock.
		root.Close()
		lock.Close()
		return nil, fmt.Errorf("open jail %s: removed by jail-mcp prune meanwhile; open it again", path)
	}
	s := &Session{m: m, Name: name, Path: path, root: root, lock: lock, running: map[uint64]*call{}, agents: map[agentKey]*agentSlot{}}
	if m.cfg.Overlay {
		// Calls' starts stamped as the jail's file system stamps changes.
		s.views.StampIn(path)
	}
	if !m.cfg.Review {
		// A review is no use of the session (jail-mcp prune).
		s.touch()
	}
	s.ensureSkeleton()
	s.creds = m.creds.Open(root, path, name)
	m.sessions[name] = s
	m.log.Debug("session open", "session", name, "jail", path)
	return s, nil
}

// lockJail takes the lock of the jail of session name, opened as lock:
// shared, or for openAlone exclusively at once, or a *HeldError.
func lockJail(lock *os.File, name string, mode openMode) error {
	if mode != openAlone {
		return jailfs.LockShared(lock)
	}
	ok, err := jailfs.TryLockExclusive(lock)
	if err != nil {
		return err
	}
	if !ok {
		return &HeldError{Session: name, Holders: jailfs.Holders(lock)}
	}
	return nil
}

// Lookup returns an open session.
func (m *Manager) Lookup(name string) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[name]
	if !ok {
		return nil, fmt.Errorf("look up session %q: %w", name, ErrNotFound)
	}
	return s, nil
}
