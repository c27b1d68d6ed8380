package session

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/jailfs"
)

// unread is what a sandbox showing exps hides (Spec.Unread) and shows
// (visible, with what stays readable below a hidden path): the paths no
// command reads (the HTTP token file), and the --deny-read list. A
// backend that binds the enabled CLIs' credentials into the jail hides
// their host paths too; one that links them there lets the calls that
// enable them read their host paths, which the links lead to.
func (s *Session) unread(exps []auth.Exposure, visible []string) (unread, shown []string) {
	cfg := s.m.cfg
	unread = slices.Clone(cfg.Unread)
	shown = append(slices.Clone(visible), cfg.Deny.Shown...)
	var enabled []string
	if cfg.Backend.Credentials() == jail.LinkCredentials {
		enabled = s.m.creds.LinkedPaths(exps)
		shown = append(shown, enabled...)
	}
	// Other projects' jails (their servers named them), wherever they
	// are, for a backend without session agents: an agent's read view
	// reads the registry itself, at every change (Spec.Jails), and a
	// mount of bubblewrap's over a project that ends meanwhile would
	// keep the sandbox from starting.
	if s.m.registry != "" && !cfg.Backend.Agents() {
		unread = append(unread, jailfs.OtherJails(s.m.registry, s.m.ownJails())...)
	}
	// A masked CLI's host credentials are read by no command, whatever
	// the deny list says: the jail has their masked copies.
	unread = append(unread, s.m.creds.MaskedPaths()...)
	for _, p := range cfg.Deny.Paths {
		if !slices.ContainsFunc(enabled, func(e string) bool { return jail.Within(p, e) }) {
			unread = append(unread, p)
		}
	}
	return unread, shown
}

// ownJails is the directory of the project's jails (the base is it or
// lies in it).
func (m *Manager) ownJails() string { return filepath.Join(m.cfg.Project, BaseName) }

// ResolveDeny makes the deny list of entries (and the built-in list when
// def) canonical, and refuses a path the jail cannot do without: one that
// is, holds or lies in the jails' directory (root), or holds the project.
// A path that does not exist yet is kept as named below its deepest
// existing directory, resolved, so that it is hidden once made. A path
// that is, holds or lies in a directory commands write in place
// (writable) is refused too: they could rename it there, from under what
// hides it. asRoot: the server runs as root.
func ResolveDeny(entries []string, def bool, home, project, root string, writable []string, asRoot bool, getenv func(string) string) (auth.Deny, error) {
	var d auth.Deny
	if def {
		d = auth.DefaultDeny(home, asRoot, getenv)
	}
	for _, e := range entries {
		c := jail.CanonicalPath(e)
		if jail.Within(project, c) {
			return auth.Deny{}, fmt.Errorf("%s: holds the project, which commands read", e)
		}
		if jail.Within(c, root) || jail.Within(root, c) {
			return auth.Deny{}, fmt.Errorf("%s: the jails' directory %s is it, holds it or lies in it", e, root)
		}
	}
	var paths []string
	for _, p := range append(d.Paths, entries...) {
		c := jail.CanonicalPath(p)
		if jail.Within(project, c) || jail.Within(c, root) || jail.Within(root, c) {
			// A built-in path the project's place makes moot (a project
			// in ~/.config): the project and the jails stay readable.
			continue
		}
		for _, w := range writable {
			if jail.Within(c, w) || jail.Within(w, c) {
				return auth.Deny{}, fmt.Errorf("%s: the --writable directory %s is it, holds it or lies in it, and commands rename what is there: name another directory writable", c, w)
			}
		}
		paths = append(paths, c)
	}
	slices.Sort(paths)
	d.Paths = slices.Compact(paths)
	var shown []string
	for _, s := range d.Shown {
		shown = append(shown, jail.CanonicalPath(s))
	}
	slices.Sort(shown)
	d.Shown = slices.Compact(shown)
	return d, nil
}
