package creds

import (
	"slices"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/auth"
)

func TestResolveMask(t *testing.T) {
	claude, _ := auth.Lookup("claude")
	for _, c := range []struct {
		mask, err string
		enabled   []string
		pass      []string
		check     func(t *testing.T, c MaskConfig)
	}{
		{mask: "", check: func(t *testing.T, c MaskConfig) {
			if !c.Empty() {
				t.Errorf("masks %+v", c)
			}
		}},
		{mask: "all", enabled: []string{"claude", "gh"}, check: func(t *testing.T, c MaskConfig) {
			if len(c.CLIs) != 2 || !slices.Equal(c.CLIs["claude"].Hosts, claude.Hosts) || c.Env["GH_TOKEN"].Hosts == nil || !c.CLIs["claude"].Rotates {
				t.Errorf("all: %+v", c)
			}
			if got := c.Credentials(); len(got) != 2 || !slices.Contains(got[0].Vars, "ANTHROPIC_API_KEY") {
				t.Errorf("credentials %+v: want the two CLIs, each with its variables", got)
			}
		}},
		{mask: "claude@gw.example.com", enabled: []string{"claude"}, check: func(t *testing.T, c MaskConfig) {
			if h := c.CLIs["claude"].Hosts; !slices.Contains(h, "gw.example.com") || !slices.Contains(h, "api.anthropic.com") {
				t.Errorf("hosts %q", h)
			}
			if !slices.Equal(c.CLIs["claude"].TokenPaths, []string{"/v1/oauth/token"}) {
				t.Errorf("token paths %q", c.CLIs["claude"].TokenPaths)
			}
		}},
		{mask: "env:GH_TOKEN", enabled: []string{"gh"}, check: func(t *testing.T, c MaskConfig) {
			if !slices.Contains(c.Env["GH_TOKEN"].Hosts, "api.github.com") {
				t.Errorf("a CLI's variable takes its hosts: %+v", c.Env)
			}
		}},
		{mask: "env:GH_TOKEN", pass: []string{"GH_*"}, check: func(t *testing.T, c MaskConfig) {
			if !slices.Contains(c.Env["GH_TOKEN"].Hosts, "github.com") {
				t.Errorf("a passed CLI variable takes its CLI's hosts: %+v", c.Env)
			}
		}},
		{mask: "env:TOKEN@api.example.com", pass: []string{"TOKEN"}, check: func(t *testing.T, c MaskConfig) {
			if !slices.Equal(c.Env["TOKEN"].Hosts, []string{"api.example.com"}) || c.Env["TOKEN"].TokenPaths == nil {
				t.Errorf("%+v", c.Env)
			}
		}},
		{mask: "claude", enabled: []string{"gh"}, err: "not enabled (--auth gh)"},
		{mask: "claude", err: "not enabled (--auth none)"},
		{mask: "env:TOKEN@api.example.com", err: "not passed to commands"},
		{mask: "env:TOKEN", pass: []string{"TOKEN"}, err: "name the hosts"},
	} {
		m, err := auth.ParseMask(c.mask)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ResolveMask(m, c.enabled, c.pass)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want %q", c.mask, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.mask, err)
			continue
		}
		c.check(t, got)
	}
}
