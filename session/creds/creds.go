// Package creds owns the credentials a session's jail shows its commands
// and their masking (--mask): what the operator's --auth exposes on the
// host, how it reaches a sandbox (bound read-only, or placed in the jail's
// home as links or copies), the session's copies of the state CLIs
// rewrite, the placeholders of masked credentials and variables, and the
// bundle of roots a jail trusts. All its file work inside a jail goes
// through os.Root, so that nothing a command plants there steers the
// server outside. It never imports session.
package creds

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/jail-mcp/jail-mcp/auth"
)

// Config is what the operator's configuration says of credentials.
type Config struct {
	Home   string              // the operator's home, where credentials live
	Getenv func(string) string // the server's environment
	Auth   []string            // canonical CLI names the operator enabled
	// Mask are the credentials the jail gets as placeholders (--mask),
	// from ResolveMask.
	Mask MaskConfig
	Log  *slog.Logger // nil discards
}

// Host is the credentials of the operator's host as a manager's sessions
// show them: one per manager.
type Host struct {
	cfg Config
	log *slog.Logger
	// masking is the authority of the proxies that put masked
	// credentials in, and the bundle the jails trust; nil: none masked.
	masking *masking
}

// New returns the host's credentials as cfg shows them; when cfg masks
// any, it makes the authority of the proxies that put them in.
func New(cfg Config) (*Host, error) {
	h := &Host{cfg: cfg, log: cfg.Log}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if !cfg.Mask.Empty() {
		var err error
		if h.masking, err = newMasking(); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// Exposures resolves what the named CLIs expose on the host now: paths
// that exist and variables that are set.
func (h *Host) Exposures(names []string) []auth.Exposure {
	return auth.Resolve(names, h.cfg.Home, h.cfg.Getenv)
}

// Exposed lists what the operator's --auth exposes on this host.
func (h *Host) Exposed() []auth.Exposure { return h.Exposures(h.cfg.Auth) }

// Masked reports whether the credentials of cli reach the jail masked.
func (h *Host) Masked(cli string) bool { return h.masked(cli) }

// masked reports whether the credentials of cli reach the jail masked.
func (h *Host) masked(cli string) bool {
	_, ok := h.cfg.Mask.CLIs[cli]
	return ok
}

// homeRel is host as ~/REL when it lies in the operator's home.
func (h *Host) homeRel(host string) string {
	if rel, err := filepath.Rel(h.cfg.Home, host); err == nil && filepath.IsLocal(rel) {
		return "~/" + filepath.ToSlash(rel)
	}
	return host
}

// Jail is the credentials of one session's jail: what is placed in it
// and the placeholders of its masked credentials.
type Jail struct {
	h    *Host
	root *os.Root // the jail's
	path string   // the jail, absolute on the host
	name string   // the session's, for the log
	log  *slog.Logger

	// mu serialises the credential work of starting calls, and guards
	// placed: the credentials placed in the jail for running calls, by
	// jail-relative path, under backends that place them rather than
	// bind them.
	mu     sync.Mutex
	placed map[string]*placement

	// mask is the session's masked credentials (mask.go), nil when none.
	mask *sessionMask
}

// Open returns the credentials of the session name's jail, root at path,
// and copies the host's state of the enabled CLIs into it.
func (h *Host) Open(root *os.Root, path, name string) *Jail {
	j := &Jail{h: h, root: root, path: path, name: name, log: h.log}
	if h.masking != nil {
		j.mask = newSessionMask(h.masking.ca)
	}
	j.refreshState()
	return j
}

// Masking reports whether the session masks credentials.
func (j *Jail) Masking() bool { return j.mask != nil }
