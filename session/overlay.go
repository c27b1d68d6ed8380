package session

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/jailfs"
)

// The project view (--overlay): every command sees the project writable,
// and what it changes lands in the session's layer, <jail>/.overlay,
// hidden from commands: upper/ holds the changes, work/ the kernel's work
// directories, caches/ the layers of the host caches shown in the jail.
// session/layer reads the upper layer (jail_diff) and applies it to the
// project (jail_apply).

// layerDir is the layer's directory in a jail.
const layerDir = ".overlay"

// LayerUpper is where a jail's layer keeps what commands changed in the
// project, relative to the jail.
const LayerUpper = layerDir + "/upper"

// hostCache is a host cache that a jail shows copy-on-write: a fresh
// session's first build or install starts warm, never writing the host's
// cache nor sharing one writable with another session.
type hostCache struct {
	name   string
	lower  string // the host's, absolute
	target string // in the jail, relative: where its tools look by default
	// env, when set, is the variable that points the jail's tools at the
	// host's own path instead, where the view shows the cache: Go's
	// module cache, whose path is in every build cache key of a package
	// in it (the host's builds of them are hits then), and which then
	// lies outside the project (gofmt -w . does not walk it).
	env string
}

// hostCaches are the host caches of the server's environment env and
// home that exist: Go's modules and builds, npm's, pip's and cargo's
// registry, at the places the jail's tools use by default (HOME is the
// jail, GOPATH its go, XDG_CACHE_HOME its .cache).
func hostCaches(env map[string]string, home, project string) []hostCache {
	get := func(k string) string { return env[k] }
	or := func(v, def string) string {
		if v != "" && filepath.IsAbs(v) {
			return v
		}
		return def
	}
	gopath := filepath.Join(home, "go")
	if p := get("GOPATH"); p != "" {
		gopath = or(filepath.SplitList(p)[0], gopath)
	}
	xdgCache := or(get("XDG_CACHE_HOME"), filepath.Join(home, ".cache"))
	all := []hostCache{
		{"go-mod", or(get("GOMODCACHE"), filepath.Join(gopath, "pkg", "mod")), "", "GOMODCACHE"},
		{"go-build", or(get("GOCACHE"), filepath.Join(xdgCache, "go-build")), ".cache/go-build", ""},
		{"npm", or(get("npm_config_cache"), filepath.Join(home, ".npm")), ".npm", ""},
		{"pip", or(get("PIP_CACHE_DIR"), filepath.Join(xdgCache, "pip")), ".cache/pip", ""},
		{"cargo-registry", filepath.Join(or(get("CARGO_HOME"), filepath.Join(home, ".cargo")), "registry"), ".cargo/registry", ""},
	}
	var out []hostCache
	for _, c := range all {
		r, err := filepath.EvalSymlinks(c.lower)
		if err != nil || strings.ContainsAny(r, ",:\\\n") {
			continue
		}
		if fi, err := os.Stat(r); err != nil || !fi.IsDir() {
			continue
		}
		c.lower = r
		if c.env != "" && (jail.Within(r, project) || jail.Within(project, r)) {
			continue // shown over the project, or the project in it
		}
		if shadowed(r) {
			continue // a directory the sandbox shows empty (/tmp)
		}
		out = append(out, c)
	}
	return out
}

// layerSkeleton are the directories the project view needs in a jail:
// the layer's and the caches' mount points.
func (m *Manager) layerSkeleton() []string {
	if !m.cfg.Overlay {
		return nil
	}
	dirs := []string{LayerUpper, layerDir + "/work", layerDir + "/caches"}
	for _, c := range m.caches {
		if c.env == "" {
			dirs = append(dirs, c.target)
		}
	}
	return dirs
}

// viewFiles gives spec the project view, its layer by a descriptor that
// the caller closes, and hides the layer from commands.
func (s *Session) viewFiles(spec *jail.Spec, opened *[]*os.File) error {
	if !s.m.cfg.Overlay {
		return nil
	}
	lf, err := jailfs.OpenPath(s.root, layerDir)
	if err != nil {
		return fmt.Errorf("open the layer of %s: %w", s.Path, err)
	}
	if lf != nil {
		*opened = append(*opened, lf)
		if fi, err := lf.Stat(); err != nil || !fi.IsDir() {
			return fmt.Errorf("open the layer of %s: not a directory", s.Path)
		}
	}
	// The view's root takes the upper layer's owner and mode: the
	// project's.
	if pi, err := os.Stat(s.m.cfg.Project); err == nil {
		if ui, err := s.root.Lstat(LayerUpper); err == nil && ui.IsDir() && ui.Mode().Perm() != pi.Mode().Perm() {
			s.root.Chmod(LayerUpper, pi.Mode().Perm())
		}
	}
	ov := &jail.Overlay{Layer: lf}
	for _, c := range s.m.caches {
		target := c.lower
		if c.env == "" {
			target = filepath.Join(s.Path, c.target)
		}
		ov.Caches = append(ov.Caches, jail.CacheMount{Name: c.name, Lower: c.lower, Target: target})
	}
	spec.Overlay = ov
	spec.Hide = append(spec.Hide, filepath.Join(s.Path, layerDir))
	return nil
}

// envMap is environ, KEY=VALUE, by key.
func envMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// cleanViews removes the work directories of the views of the session's
// stopped agents (the kernel makes their own work/ with no permission
// bits, which no plain removal of the jail would get through); the layer
// stays.
func (s *Session) cleanViews() {
	if !s.m.cfg.Overlay {
		return
	}
	empty := func(dir string, match func(name string) bool) {
		r, err := s.root.OpenRoot(dir)
		if err != nil {
			return
		}
		defer r.Close()
		f, err := r.Open(".")
		if err != nil {
			return
		}
		names, _ := f.Readdirnames(-1)
		f.Close()
		for _, n := range names {
			if !match(n) {
				continue
			}
			if sub, err := r.OpenRoot(n); err == nil {
				jailfs.EmptyRoot(sub)
				sub.Close()
			}
			r.Remove(n)
		}
	}
	empty(layerDir+"/work", func(string) bool { return true })
	for _, c := range s.m.caches {
		empty(layerDir+"/caches/"+c.name, func(n string) bool { return strings.HasPrefix(n, "work-") })
	}
}

// viewEnv adds to env, the host's part of every call's environment, the
// variables that point the jail's tools at caches shown at the host's
// paths.
func viewEnv(env map[string]string, caches []hostCache) map[string]string {
	for _, c := range caches {
		if c.env != "" {
			env[c.env] = c.lower
		}
	}
	return env
}

// shadowed reports whether p lies in a host directory bubblewrap shows
// empty (jail.ShadowDirs), where the sandbox cannot see a cache.
func shadowed(p string) bool {
	for _, d := range jail.ShadowDirs {
		if r, err := filepath.EvalSymlinks(d); err == nil && jail.Within(p, r) || jail.Within(p, d) {
			return true
		}
	}
	return false
}

// viewRenewer is a runner whose views of the project a change makes
// stale (a session agent under --overlay).
type viewRenewer interface{ RenewView(gen uint64) }

// renewViews tells every session agent that the project is at gen now:
// each readies a view of it ahead of the next call.
func (m *Manager) renewViews(gen uint64) {
	for _, s := range m.all() {
		s.agentMu.Lock()
		for _, a := range s.agents {
			if r, ok := a.runner.(viewRenewer); ok {
				r.RenewView(gen)
			}
		}
		s.agentMu.Unlock()
	}
}

// viewGen is the number of the project's state a call must see (0: a
// view of its own), or 0 without the view.
func (m *Manager) viewGen() uint64 {
	if m.views == nil {
		return 0
	}
	return m.views.current()
}

// ViewWatch says, under --overlay, whether the server's watch of the
// project sees every change ("watching"), or is blind and why: every call
// then gets a view of its own (a mount per call), until it sees all again.
func (m *Manager) ViewWatch() string {
	if m.views == nil {
		return ""
	}
	why, since := m.views.state()
	if why == "" {
		return "watching"
	}
	return fmt.Sprintf("blind since %s (%s): every call gets a view of its own until the watch sees all again", since.Format(time.RFC3339), why)
}
