//go:build linux

package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// Promise 6: secrets stay out unless asked for.
func (fx *escapeFixture) secretsStayOut(t *testing.T) {
	secrets := map[string]string{
		"SSH_AUTH_SOCK":            "/tmp/ssh-" + fx.marker + "/agent.sock",
		"DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus-" + fx.marker,
		"DOCKER_HOST":              "unix:///run/docker-" + fx.marker + ".sock",
		"DISPLAY":                  ":77",
		"XAUTHORITY":               "/tmp/xauth-" + fx.marker,
		"GPG_AGENT_INFO":           "/tmp/gpg-" + fx.marker + ":1:1",
		"AWS_SECRET_ACCESS_KEY":    "aws-" + fx.marker,
		"AWS_ACCESS_KEY_ID":        "akia-" + fx.marker,
		"GITHUB_TOKEN":             "ghp-" + fx.marker,
		"GH_TOKEN":                 "gho-" + fx.marker,
		"OPENAI_API_KEY":           "sk-" + fx.marker,
		"ANTHROPIC_API_KEY":        "sk-ant-" + fx.marker,
		"NPM_TOKEN":                "npm-" + fx.marker,
	}
	// Another session's jail: its files, its job outputs, its CLI state,
	// read or run by name, through /proc/self/root, and by a link.
	fx.vector(t, "other-session-read", func(t *testing.T) {
		res := fx.attack(t, fx.a, `
for f in "$OTHER/b-secret" "/proc/self/root$OTHER/b-secret"; do
	cat "$f" 2>/dev/null | grep -q b-secret && echo "ESCAPED: read $f"
done
ln -sfn "$OTHER" "$HOME/.tmp/other-link"
cat "$HOME/.tmp/other-link/b-secret" 2>/dev/null | grep -q b-secret && echo "ESCAPED: read through a link"
cp "$OTHER/b-secret" "$HOME/.tmp/copied" 2>/dev/null && grep -q b-secret "$HOME/.tmp/copied" && echo "ESCAPED: copied"
printf '#!/bin/sh\necho ran\n' > /dev/null
[ -e "$OTHER" ] && echo "OTHER-LISTED"
true
`, nil)
		if !fx.landlock() && strings.Contains(res.Stdout, "OTHER-LISTED") {
			fx.escape(t, "another session's jail is in view under bubblewrap")
		}
	})

	var extra []string
	for k, v := range secrets {
		extra = append(extra, k+"="+v)
	}
	project := testkit.NewProject(t)
	for _, v := range []struct {
		name string
		args []string
		pass []string
	}{
		{"auth-none", []string{"--session", "env", "--auth", "none"}, nil},
		{"pass-env", []string{"--session", "env-pass", "--auth", "none", "--pass-env", "DISPLAY"}, []string{"DISPLAY"}},
	} {
		fx.vector(t, v.name, func(t *testing.T) {
			ts := fx.start(t, project, fx.env(extra...), v.args...)
			// Every process of the jail, bwrap's init included: its
			// environment and its command line.
			res, _ := ts.Exec(map[string]any{"command": `env; echo ---; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\0' '\n' < "$f"; echo; done 2>/dev/null`})
			if res.ExitCode != 0 || !strings.Contains(res.Stdout, "---") {
				t.Fatalf("result: %+v", res)
			}
			env, _, _ := strings.Cut(res.Stdout, "---")
			for k, val := range secrets {
				passed := slices.Contains(v.pass, k)
				if got := slices.Contains(strings.Split(env, "\n"), k+"="+val); got != passed {
					fx.escape(t, "%s in the jail: %t, want %t", k, got, passed)
				}
				if !passed && strings.Contains(val, fx.marker) && strings.Contains(res.Stdout, val) {
					fx.escape(t, "the value of %s is visible in the jail", k)
				}
			}
		})
	}
}
