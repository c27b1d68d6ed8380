package view

import (
	"slices"
	"strings"
	"testing"
)

// serverEnviron is a server environment full of things that must stay out.
var serverEnviron = []string{
	"PATH=/host/bin:/usr/bin",
	"LANG=de_DE.UTF-8",
	"LC_ALL=C.UTF-8",
	"LC_CTYPE=en_US.UTF-8",
	"TERM=xterm-256color",
	"TZ=Europe/Berlin",
	"USER=alice",
	"LOGNAME=alice",
	"SHELL=/bin/zsh",
	"HOME=/home/alice",
	"TMPDIR=/var/tmp/alice",
	"XDG_CONFIG_HOME=/home/alice/.config",
	"XDG_RUNTIME_DIR=/run/user/1000",
	"XDG_SESSION_TYPE=wayland",
	"SSH_AUTH_SOCK=/run/user/1000/ssh-agent.sock",
	"DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus",
	"DOCKER_HOST=unix:///var/run/docker.sock",
	"DISPLAY=:0",
	"WAYLAND_DISPLAY=wayland-0",
	"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI",
	"GITHUB_TOKEN=ghp_secret",
	"LD_PRELOAD=/evil.so",
	"GOFLAGS=-mod=mod",
	"NPM_CONFIG_REGISTRY=https://registry.example",
	"NPM_TOKEN=npm_secret",
	"LCX=not-a-locale",
	"lang=lowercase",
	"NOEQUALS",
	"=empty-name",
	"BAD-NAME=1",
}

const testJail = "/p/.agent-home/s"

// jailEnv is what every command gets for testJail.
var jailEnv = []string{
	"HOME=/p/.agent-home/s",
	"TMPDIR=/p/.agent-home/s/.tmp",
	"XDG_CACHE_HOME=/p/.agent-home/s/.cache",
	"XDG_CONFIG_HOME=/p/.agent-home/s/.config",
	"XDG_DATA_HOME=/p/.agent-home/s/.local/share",
	"XDG_RUNTIME_DIR=/p/.agent-home/s/.runtime",
	"XDG_STATE_HOME=/p/.agent-home/s/.local/state",
}

var baseWant = []string{
	"LANG=de_DE.UTF-8",
	"LC_ALL=C.UTF-8",
	"LC_CTYPE=en_US.UTF-8",
	"LOGNAME=alice",
	"PATH=/host/bin:/usr/bin",
	"SHELL=/bin/zsh",
	"TERM=xterm-256color",
	"TZ=Europe/Berlin",
	"USER=alice",
}

func sorted(lists ...[]string) []string {
	out := slices.Concat(lists...)
	slices.Sort(out)
	return out
}

func TestBuildEnv(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		pass    []string
		extra   map[string]string
		want    []string
	}{
		{
			name:    "base allowlist only",
			environ: serverEnviron,
			want:    sorted(baseWant, jailEnv),
		},
		{
			name:    "pass-env names and prefixes",
			environ: serverEnviron,
			pass:    []string{"GOFLAGS", "NPM_CONFIG_*", "NOT_SET"},
			want:    sorted(baseWant, jailEnv, []string{"GOFLAGS=-mod=mod", "NPM_CONFIG_REGISTRY=https://registry.example"}),
		},
		{
			// The HTTP server's bearer token, whatever the prefix.
			name:    "pass-env never brings the server's token",
			environ: append(slices.Clone(serverEnviron), "JAIL_MCP_TOKEN=http-secret", "JAIL_MCP_MARK=1"),
			pass:    []string{"JAIL_*"},
			want:    sorted(baseWant, jailEnv, []string{"JAIL_MCP_MARK=1"}),
		},
		{
			name:    "operator passes a socket explicitly",
			environ: serverEnviron,
			pass:    []string{"DISPLAY"},
			want:    sorted(baseWant, jailEnv, []string{"DISPLAY=:0"}),
		},
		{
			name:    "pass-env cannot bring reserved names",
			environ: serverEnviron,
			pass:    []string{"XDG_*", "HOME", "TMPDIR"},
			want:    sorted(baseWant, jailEnv),
		},
		{
			name:    "default PATH when the host has none",
			environ: []string{"TERM=dumb"},
			want:    sorted([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "TERM=dumb"}, jailEnv),
		},
		{
			name:    "default PATH when the host PATH is empty",
			environ: []string{"PATH="},
			want:    sorted([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, jailEnv),
		},
		{
			name:    "empty host",
			environ: nil,
			want:    sorted([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, jailEnv),
		},
		{
			name:    "request env added and overrides the host",
			environ: serverEnviron,
			extra:   map[string]string{"FOO": "bar baz", "MULTI": "a\nb=c", "TERM": "dumb"},
			want: sorted(slices.DeleteFunc(slices.Clone(baseWant), func(kv string) bool { return strings.HasPrefix(kv, "TERM=") }),
				jailEnv, []string{"FOO=bar baz", "MULTI=a\nb=c", "TERM=dumb"}),
		},
		{
			name:    "values with equals signs kept whole",
			environ: []string{"LANG=a=b=c"},
			want:    sorted([]string{"LANG=a=b=c", "PATH=/usr/local/bin:/usr/bin:/bin"}, jailEnv),
		},
	}
	secrets := []string{"SSH_AUTH_SOCK", "DBUS_SESSION_BUS_ADDRESS", "DOCKER_HOST", "DISPLAY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "LD_PRELOAD"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := buildEnv(tt.environ, tt.pass, testJail, nil, tt.extra)
			if !slices.Equal(got, tt.want) {
				t.Errorf("buildEnv:\n got %q\nwant %q", got, tt.want)
			}
			for _, kv := range got {
				name, _, _ := strings.Cut(kv, "=")
				if slices.Contains(secrets, name) && !slices.Contains(tt.pass, name) {
					t.Errorf("host variable %s leaked into the jail", name)
				}
			}
			seen := map[string]bool{}
			for _, kv := range got {
				name, _, _ := strings.Cut(kv, "=")
				if seen[name] {
					t.Errorf("%s set twice", name)
				}
				seen[name] = true
			}
		})
	}
}

func TestCheckEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		ok   bool
	}{
		{"nil", nil, true},
		{"plain", map[string]string{"FOO": "bar", "_X": "", "A1": "x y\nz=w"}, true},
		{"PATH may be set", map[string]string{"PATH": "/opt/bin"}, true},
		{"lowercase home is not reserved", map[string]string{"home": "x"}, true},
		{"HOME", map[string]string{"HOME": "/"}, false},
		{"TMPDIR", map[string]string{"TMPDIR": "/tmp"}, false},
		{"XDG_FOO", map[string]string{"XDG_FOO": "x"}, false},
		{"XDG_CONFIG_HOME", map[string]string{"XDG_CONFIG_HOME": "/etc"}, false},
		{"XDG_ alone", map[string]string{"XDG_": "x"}, false},
		{"leading digit", map[string]string{"1A": "x"}, false},
		{"dash", map[string]string{"A-B": "x"}, false},
		{"empty name", map[string]string{"": "x"}, false},
		{"equals in name", map[string]string{"A=B": "x"}, false},
		{"space in name", map[string]string{"A B": "x"}, false},
		{"NUL in value", map[string]string{"A": "x\x00y"}, false},
		{"NUL in name", map[string]string{"A\x00": "x"}, false},
		{"one bad among good", map[string]string{"A": "1", "B": "2", "HOME": "3"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := CheckEnv(tt.env); (err == nil) != tt.ok {
				t.Errorf("CheckEnv(%q) = %v, want ok %t", tt.env, err, tt.ok)
			}
		})
	}
}

func TestValidPassEnv(t *testing.T) {
	tests := []struct {
		entry string
		ok    bool
	}{
		{"FOO", true},
		{"_", true},
		{"GOFLAGS", true},
		{"NPM_CONFIG_*", true},
		{"A*", true},
		{"XDG_*", true}, // harmless: buildEnv never passes reserved names
		{"", false},
		{"*", false},
		{"**", false},
		{"A**", false},
		{"*A", false},
		{"A*B", false},
		{"1A", false},
		{"A-B", false},
		{"A B", false},
		{"A=B", false},
		{"HOME", false},
		{"TMPDIR", false},
		{"XDG_CONFIG_HOME", false},
		{"JAIL_MCP_TOKEN", false},
		{"JAIL_MCP_*", true}, // harmless: buildEnv never passes the token
	}
	for _, tt := range tests {
		t.Run(tt.entry, func(t *testing.T) {
			if err := ValidPassEnv(tt.entry); (err == nil) != tt.ok {
				t.Errorf("ValidPassEnv(%q) = %v, want ok %t", tt.entry, err, tt.ok)
			}
		})
	}
}
