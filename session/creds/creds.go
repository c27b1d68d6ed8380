// Package creds owns the credentials a session's jail shows its commands
// and their masking (--mask): what the operator's --auth exposes on the
// host, how it reaches a sandbox (bound read-only, or placed in the jail's
// home as links or copies), the session's copies of the state CLIs
// rewrite, the placeholders of masked credentials and variables, and the
// bundle of roots a jail trusts. How each CLI's files reach the jail
// (its host files, or masked copies) and what the session masks beyond
// them are chosen once, when the session opens. All its file work inside
// a jail goes through os.Root, so that nothing a command plants there
// steers the server outside. It never imports session.
package creds

import (
	"log/slog"
	"path/filepath"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
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

// masked reports whether the credentials of cli reach the jail masked.
func (h *Host) masked(cli string) bool {
	_, ok := h.cfg.Mask.CLIs[cli]
	return ok
}

// LinkedPaths are the host paths, canonical, that the links a backend
// places for exps lead to, which the calls showing them read: those of
// the CLIs that are not masked (the jail holds masked copies of the
// others).
func (h *Host) LinkedPaths(exps []auth.Exposure) []string {
	var names []string
	for _, e := range exps {
		if !h.masked(e.Name) {
			names = append(names, e.Name)
		}
	}
	paths := auth.EnabledPaths(names, h.cfg.Home, h.cfg.Getenv)
	for i, p := range paths {
		paths[i] = jail.CanonicalPath(p)
	}
	return paths
}

// MaskedPaths are the host paths, canonical, of the masked CLIs'
// credentials, which no command reads, whatever the deny list says: the
// jail has their masked copies.
func (h *Host) MaskedPaths() []string {
	var masked []string
	for n := range h.cfg.Mask.CLIs {
		masked = append(masked, n)
	}
	var paths []string
	for _, p := range auth.EnabledPaths(masked, h.cfg.Home, h.cfg.Getenv) {
		paths = append(paths, jail.CanonicalPath(p))
	}
	return paths
}

// homeRel is host as ~/REL when it lies in the operator's home.
func (h *Host) homeRel(host string) string {
	if rel, err := filepath.Rel(h.cfg.Home, host); err == nil && filepath.IsLocal(rel) {
		return "~/" + filepath.ToSlash(rel)
	}
	return host
}
