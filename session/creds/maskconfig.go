package creds

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/session/view"
)

// MaskConfig is --mask resolved against the registry, --auth and
// --pass-env: where each masked credential may be sent.
type MaskConfig struct {
	CLIs map[string]MaskHosts // a masked CLI's
	Env  map[string]MaskHosts // a masked variable's
	// vars are the secret variables of each masked CLI (CLI.SecretEnv),
	// masked with it unless --mask names them itself.
	vars map[string][]string
}

// MaskHosts is where one masked credential may go.
type MaskHosts struct {
	Hosts      []string `json:"hosts"`
	TokenPaths []string `json:"token_paths"` // paths of the token endpoints on Hosts
	Rotates    bool     `json:"rotates"`     // the provider rotates refresh tokens: a refresh is refused
}

// Empty reports whether nothing is masked.
func (c MaskConfig) Empty() bool { return len(c.CLIs) == 0 && len(c.Env) == 0 }

// ResolveMask resolves the operator's --mask for the CLIs --auth enables
// (enabled) and the variables --pass-env passes (pass): every masked CLI
// must be enabled, every masked variable passed (or a variable of an
// enabled CLI), and every variable bound to hosts, its own or its CLI's.
func ResolveMask(m auth.Mask, enabled, pass []string) (MaskConfig, error) {
	c := MaskConfig{CLIs: map[string]MaskHosts{}, Env: map[string]MaskHosts{}, vars: map[string][]string{}}
	names := slices.Collect(maps.Keys(m.CLIs))
	if m.All {
		names = append(names, enabled...)
	}
	slices.Sort(names)
	for _, n := range slices.Compact(names) {
		if !slices.Contains(enabled, n) {
			return c, fmt.Errorf("%s: its credentials are not enabled (--auth %s)", n, cmp.Or(strings.Join(enabled, ","), "none"))
		}
		cli, _ := auth.Lookup(n)
		h := hostsOf(cli, m.CLIs[n])
		c.CLIs[n] = h
		for _, v := range cli.SecretEnv {
			if _, named := m.Env[v]; !named {
				c.Env[v] = h
				c.vars[n] = append(c.vars[n], v)
			}
		}
	}
	for v, extra := range m.Env {
		owner, ok := envOwner(v)
		switch {
		case ok && slices.Contains(enabled, owner.Name):
		case view.Matches(v, pass):
		default:
			return c, fmt.Errorf("env:%s: not passed to commands (--pass-env, or a variable of a CLI --auth enables)", v)
		}
		switch {
		case ok:
			h := hostsOf(owner, extra)
			c.Env[v] = h
		case len(extra) > 0:
			c.Env[v] = MaskHosts{Hosts: slices.Clone(extra), TokenPaths: []string{}}
		default:
			return c, fmt.Errorf("env:%s: name the hosts its value may be sent to (env:%s@HOST,HOST)", v, v)
		}
	}
	return c, nil
}

// hostsOf is where a credential of cli may go: the registry's hosts and
// extra.
func hostsOf(cli auth.CLI, extra []string) MaskHosts {
	h := MaskHosts{Hosts: append([]string{}, cli.Hosts...), TokenPaths: []string{}, Rotates: cli.Rotates}
	for _, e := range extra {
		if !slices.Contains(h.Hosts, e) {
			h.Hosts = append(h.Hosts, e)
		}
	}
	for _, tp := range cli.TokenPaths {
		if i := strings.IndexByte(tp, '/'); i > 0 && !slices.Contains(h.TokenPaths, tp[i:]) {
			h.TokenPaths = append(h.TokenPaths, tp[i:])
		}
	}
	return h
}

// envOwner is the CLI whose secret variable v is.
func envOwner(v string) (auth.CLI, bool) {
	for _, c := range auth.Registry {
		if slices.Contains(c.SecretEnv, v) {
			return c, true
		}
	}
	return auth.CLI{}, false
}

// Credentials lists the masked CLIs, then the masked variables, each
// with where it may go.
func (c MaskConfig) Credentials() []MaskedCredential {
	out := []MaskedCredential{}
	implied := map[string]bool{}
	for _, n := range slices.Sorted(maps.Keys(c.CLIs)) {
		out = append(out, MaskedCredential{Name: n, Vars: append([]string{}, c.vars[n]...), MaskHosts: c.CLIs[n]})
		for _, v := range c.vars[n] {
			implied[v] = true
		}
	}
	for _, n := range slices.Sorted(maps.Keys(c.Env)) {
		if !implied[n] {
			out = append(out, MaskedCredential{Name: "env:" + n, Vars: []string{n}, MaskHosts: c.Env[n]})
		}
	}
	return out
}

// MaskInfo is what jail_status says of masking.
type MaskInfo struct {
	Credentials  []MaskedCredential `json:"credentials"`
	CA           string             `json:"ca_fingerprint"`
	Bundle       string             `json:"ca_bundle"` // where the jail's bundle is, in the jail
	Placeholders int                `json:"placeholders"`
}

// MaskedCredential is one masked CLI or variable and where it may go.
type MaskedCredential struct {
	Name string   `json:"name"` // a CLI's, or env:NAME
	Vars []string `json:"env"`  // the variables masked with it
	MaskHosts
}
