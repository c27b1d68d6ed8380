package auth

import (
	"strings"
	"testing"
)

func TestParseMask(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{in: "", want: ""},
		{in: "all", want: "all"},
		{in: "claude,codex", want: "claude,codex"},
		{in: "claude-code", want: "claude"},
		{in: "env:GH_TOKEN@api.github.com,github.com,codex", want: "codex,env:GH_TOKEN@api.github.com,github.com"},
		{in: "claude@gateway.example.com,Other.Example.com.,env:ANTHROPIC_API_KEY", want: "claude@gateway.example.com,other.example.com,env:ANTHROPIC_API_KEY"},
		{in: "env:A@x.example,env:A@y.example", want: "env:A@x.example,y.example"},
		{in: "all,gh@ghe.example.com", want: "all,gh@ghe.example.com"},
		{in: "nosuch", err: "want all, a CLI's name"},
		{in: "env:1X", err: "want env:NAME"},
		{in: "env:X@10.0.0.1", err: "want a host name"},
		{in: "gh@x.example,not a host", err: "want a host name"},
		{in: "all@x.example", err: "name the CLI"},
		{in: "env:A@git.example:8443,git.example,api.example:443", want: "env:A@git.example:8443,git.example,api.example"},
		{in: "claude@API.example.:8443", want: "claude@api.example:8443"},
		{in: "env:A@x.example:0", err: "want a port from 1 to 65535"},
		{in: "env:A@x.example:65536", err: "want a port from 1 to 65535"},
		{in: "env:A@x.example:https", err: "want a port from 1 to 65535"},
		{in: "env:A@x.example:+80", err: "want a port from 1 to 65535"},
		{in: "env:A@x.example:", err: "want a port from 1 to 65535"},
		{in: "env:A@10.0.0.1:8443", err: "want a host name"},
	} {
		m, err := ParseMask(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseMask(%q) = %v, want an error with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || m.String() != c.want {
			t.Errorf("ParseMask(%q) = %q, %v; want %q", c.in, m.String(), err, c.want)
		}
		if m.Empty() != (c.want == "") {
			t.Errorf("ParseMask(%q).Empty() = %v", c.in, m.Empty())
		}
	}
}
