package view

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/jail-mcp/jail-mcp/jail"
)

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
