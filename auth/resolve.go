package auth

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Item is one credential path present on the host.
type Item struct {
	Host  string // the host path, symlinks resolved
	Rel   string // the place relative to HOME, inside the jail
	Dir   bool
	State bool // a private per-session copy (a file, or a directory with Secrets)
	// Secrets are the entries of a State directory present on the host,
	// shown read-only inside the private copy.
	Secrets []Secret
}

// Secret is one credential entry inside a State directory.
type Secret struct {
	Name string // relative to the directory
	Host string
	Dir  bool
}

// Exposure is what one CLI exposes on this host: only paths that exist and
// variables that are set.
type Exposure struct {
	Name  string
	Items []Item
	Env   []string // KEY=VALUE
}

// EnvNames lists the names of e's variables.
func (e Exposure) EnvNames() []string {
	out := make([]string, 0, len(e.Env))
	for _, kv := range e.Env {
		k, _, _ := strings.Cut(kv, "=")
		out = append(out, k)
	}
	return out
}

// Resolve finds, for each named CLI, the credential paths that exist under
// home (or where the host's variables relocate them) and the credential
// variables getenv has set. CLIs with nothing present are left out. Only
// regular files and directories are exposed.
func Resolve(names []string, home string, getenv func(string) string) []Exposure {
	var out []Exposure
	for _, n := range names {
		c, ok := Lookup(n)
		if !ok {
			continue
		}
		e := Exposure{Name: c.Name, Items: []Item{}, Env: []string{}}
		for _, p := range c.Paths {
			if !filepath.IsAbs(home) && p.Env == "" {
				continue
			}
			// Most CLIs' paths are absent on a given host: one stat says
			// so, where resolving the links looks at each component.
			raw := hostPath(p, home, getenv)
			if _, err := os.Stat(raw); err != nil {
				continue
			}
			host, err := filepath.EvalSymlinks(raw)
			if err != nil {
				continue
			}
			fi, err := os.Stat(host)
			if err != nil || !(fi.IsDir() || fi.Mode().IsRegular()) {
				continue
			}
			it := Item{Host: host, Rel: p.Rel, Dir: fi.IsDir(), State: p.State && fi.Mode().IsRegular()}
			if fi.IsDir() && len(p.Secrets) > 0 {
				it.State, it.Secrets = true, []Secret{}
				for _, name := range p.Secrets {
					sp := filepath.Join(host, name)
					if sfi, err := os.Lstat(sp); err == nil && (sfi.IsDir() || sfi.Mode().IsRegular()) {
						it.Secrets = append(it.Secrets, Secret{Name: name, Host: sp, Dir: sfi.IsDir()})
					}
				}
			}
			e.Items = append(e.Items, it)
		}
		for _, k := range c.Env {
			if v := getenv(k); v != "" {
				e.Env = append(e.Env, k+"="+v)
			}
		}
		if len(e.Items) > 0 || len(e.Env) > 0 {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Exposure) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}
