package auth

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Mask is the operator's --mask list: the credentials the jail gets as
// placeholders, the real values staying in the server's memory, and the
// hosts beyond the registry's each may be sent to.
type Mask struct {
	// All masks every CLI --auth enables.
	All bool
	// CLIs maps a CLI's canonical name to the hosts added to its
	// registry's (CLI.Hosts).
	CLIs map[string][]string
	// Env maps a variable to the hosts its value may be sent to; none:
	// those of the CLI it belongs to (CLI.SecretEnv).
	Env map[string][]string
}

// Empty reports whether m masks nothing.
func (m Mask) Empty() bool { return !m.All && len(m.CLIs) == 0 && len(m.Env) == 0 }

// String is m as --mask takes it.
func (m Mask) String() string {
	var out []string
	if m.All {
		out = append(out, "all")
	}
	entry := func(name string, hosts []string) string {
		if len(hosts) == 0 {
			return name
		}
		return name + "@" + strings.Join(hosts, ",")
	}
	for _, n := range slices.Sorted(maps.Keys(m.CLIs)) {
		out = append(out, entry(n, m.CLIs[n]))
	}
	for _, n := range slices.Sorted(maps.Keys(m.Env)) {
		out = append(out, entry("env:"+n, m.Env[n]))
	}
	return strings.Join(out, ",")
}

// ParseMask reads --mask: a comma list of "all", names of the registry
// and "env:NAME", each optionally followed by "@HOST" and more hosts
// (env:GH_TOKEN@api.github.com,github.com): the entries after an "@"
// that are neither a registry name, "all" nor "env:" are its hosts. A
// host is bound on port 443; HOST:PORT binds it on PORT too
// (git.example.com:8443). "" masks nothing.
func ParseMask(s string) (Mask, error) {
	m := Mask{CLIs: map[string][]string{}, Env: map[string][]string{}}
	cli, env := map[string]*[]string{}, map[string]*[]string{}
	var hosts *[]string // the entry that took "@": what follows may be its hosts
	add := func(h string) error {
		h, err := maskHost(h)
		if err != nil {
			return err
		}
		if !slices.Contains(*hosts, h) {
			*hosts = append(*hosts, h)
		}
		return nil
	}
	entry := func(in map[string]*[]string, name string) *[]string {
		if in[name] == nil {
			in[name] = &[]string{}
		}
		return in[name]
	}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, host, at := strings.Cut(f, "@")
		c, known := Canonical(name)
		if hosts != nil && !at && !known && name != "all" && !strings.HasPrefix(name, "env:") {
			if err := add(f); err != nil {
				return Mask{}, err
			}
			continue
		}
		hosts = nil
		switch {
		case name == "all":
			if at {
				return Mask{}, fmt.Errorf("all@%s: name the CLI the hosts are for", host)
			}
			m.All = true
			continue
		case strings.HasPrefix(name, "env:"):
			v := strings.TrimPrefix(name, "env:")
			if !varName(v) {
				return Mask{}, fmt.Errorf("%q: want env:NAME, a variable's name", f)
			}
			hosts = entry(env, v)
		case known:
			hosts = entry(cli, c)
		default:
			return Mask{}, fmt.Errorf("%q: want all, a CLI's name (%s) or env:NAME", f, strings.Join(Names(), ", "))
		}
		if at {
			if err := add(host); err != nil {
				return Mask{}, err
			}
		}
	}
	for k, v := range cli {
		m.CLIs[k] = *v
	}
	for k, v := range env {
		m.Env[k] = *v
	}
	return m, nil
}

// maskHost reads a host of --mask, HOST or HOST:PORT, as the proxy
// takes it: lower case, no trailing dot, ":443" (the port every host is
// bound on) left out.
func maskHost(s string) (string, error) {
	h, port, hasPort := strings.Cut(strings.ToLower(s), ":")
	h = strings.TrimSuffix(h, ".")
	if !hostName(h) {
		return "", fmt.Errorf("%q: want a host name (api.example.com), or HOST:PORT", s)
	}
	if !hasPort {
		return h, nil
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || port != strconv.Itoa(n) {
		return "", fmt.Errorf("%q: want a port from 1 to 65535 after the host", s)
	}
	if n == 443 {
		return h, nil
	}
	return h + ":" + port, nil
}

// hostName reports whether s is a DNS name with a letter in it (a name
// only: a masked credential is sent over TLS to names, never to
// addresses).
func hostName(s string) bool {
	return strings.ContainsAny(s, "abcdefghijklmnopqrstuvwxyz") && DNSName(s)
}

// DNSName reports whether s is a DNS name, lower case: labels of letters,
// digits and hyphens (underscores too, as some services use), 1 to 63
// each, 253 at most in all.
func DNSName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// varName reports whether s is a variable's name.
func varName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range s {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
