package view

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// baseEnv are the host variables every command gets (contract: --pass-env).
var baseEnv = []string{"PATH", "LANG", "LC_*", "TERM", "TZ", "USER", "LOGNAME", "SHELL"}

// neverPassed are host variables no command gets, whatever --pass-env
// says: the HTTP server's bearer token, which would let a command drive
// every session of its server.
var neverPassed = []string{"JAIL_MCP_TOKEN"}

const defaultPath = "/usr/local/bin:/usr/bin:/bin"

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reserved reports whether name is set by the jail and may not be given.
func reserved(name string) bool {
	return name == "HOME" || name == "TMPDIR" || strings.HasPrefix(name, "XDG_")
}

// ValidPassEnv checks one --pass-env entry: a variable name or PREFIX_*.
func ValidPassEnv(entry string) error {
	name := strings.TrimSuffix(entry, "*")
	if (name == "" && entry != "*") || (name != "" && !envNameRE.MatchString(name)) {
		return fmt.Errorf("invalid --pass-env entry %q: want a variable name or PREFIX_*", entry)
	}
	if entry == "*" {
		return fmt.Errorf("invalid --pass-env entry %q: passing the whole environment defeats the allowlist", entry)
	}
	if reserved(name) && !strings.HasSuffix(entry, "*") {
		return fmt.Errorf("invalid --pass-env entry %q: %s is set by the jail", entry, name)
	}
	if slices.Contains(neverPassed, entry) {
		return fmt.Errorf("invalid --pass-env entry %q: the server's secret is never passed to commands", entry)
	}
	return nil
}

// Matches reports whether name is one of patterns, each a variable name
// or PREFIX_* (as --pass-env takes them).
func Matches(name string, patterns []string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if name == p {
			return true
		}
	}
	return false
}

// jailVars are the variables that point into the jail.
func jailVars(jail string) map[string]string {
	return map[string]string{
		"HOME":            jail,
		"TMPDIR":          filepath.Join(jail, ".tmp"),
		"XDG_CONFIG_HOME": filepath.Join(jail, ".config"),
		"XDG_CACHE_HOME":  filepath.Join(jail, ".cache"),
		"XDG_DATA_HOME":   filepath.Join(jail, ".local/share"),
		"XDG_STATE_HOME":  filepath.Join(jail, ".local/state"),
		"XDG_RUNTIME_DIR": filepath.Join(jail, ".runtime"),
	}
}

// CheckEnv validates the variables a request adds.
func CheckEnv(env map[string]string) error {
	for k, v := range env {
		switch {
		case !envNameRE.MatchString(k):
			return fmt.Errorf("env: %q is not a valid variable name", k)
		case reserved(k):
			return fmt.Errorf("env: %s is reserved: HOME, TMPDIR and XDG_* point into the jail", k)
		case strings.IndexByte(v, 0) >= 0:
			return fmt.Errorf("env: value of %s contains a NUL byte", k)
		}
	}
	return nil
}

// buildEnv is CallEnv with the host's part made from environ and pass.
func buildEnv(environ, pass []string, jail string, creds []string, extra map[string]string) []string {
	return CallEnv(HostEnv(environ, pass), jail, creds, extra)
}

// HostEnv is the part of every child's environment the host gives: its
// allowlisted variables, and PATH.
func HostEnv(environ, pass []string) map[string]string {
	allow := append(slices.Clone(baseEnv), pass...)
	vars := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && envNameRE.MatchString(k) && !reserved(k) && !slices.Contains(neverPassed, k) && Matches(k, allow) {
			vars[k] = v
		}
	}
	if vars["PATH"] == "" {
		vars["PATH"] = defaultPath
	}
	return vars
}

// CallEnv is the child's whole environment: the host's part (HostEnv,
// which it leaves as it is), the enabled credentials' variables, then the
// request's, then the jail's, sorted.
func CallEnv(host map[string]string, jail string, creds []string, extra map[string]string) []string {
	vars := maps.Clone(host)
	for _, kv := range creds {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	for k, v := range extra {
		vars[k] = v
	}
	for k, v := range jailVars(jail) {
		vars[k] = v
	}
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// EnvOf is the value of key in env (the last one set), or "".
func EnvOf(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// EnvMap is environ, KEY=VALUE, by key.
func EnvMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}
