//go:build linux

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/jail"
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

	// The same through the read view of a call, which shows the PATH
	// directories that a hidden one holds: a link in the jail to the
	// other jail, named in the next call's PATH.
	fx.vector(t, "other-session-path", func(t *testing.T) {
		fx.attack(t, fx.a, `ln -sfn "$OTHER" "$HOME/.tmp/path-link"; mkdir -p "$HOME/.tmp/d"; ln -sfn "$OTHER/b-secret" "$HOME/.tmp/d/b"`, nil)
		fx.attack(t, fx.a, `
for f in "$HOME/.tmp/path-link/b-secret" "$OTHER/b-secret" "$HOME/.tmp/d/b"; do
	cat "$f" 2>/dev/null | grep -q b-secret && echo "ESCAPED: read $f through the call's PATH"
done
true
`, map[string]any{"env": map[string]any{"PATH": fx.jails["a"] + "/.tmp/path-link:" + fx.jails["a"] + "/.tmp/d:/usr/bin:/bin"}})
	})

	// A call's read view never shows more than its own PATH does, though
	// the agent readies threads in the view of the session's default
	// PATH, which shows an installation under the hidden /tmp: calls
	// whose PATH does not name it, more of them than the agent keeps
	// threads ready, must not read it.
	fx.vector(t, "armed-view", func(t *testing.T) {
		inst, err := os.MkdirTemp("", "escape-inst-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(inst) })
		secret := filepath.Join(inst, "secret")
		if err := os.MkdirAll(filepath.Join(inst, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(secret, []byte("inst-secret\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		// The installation first in the backend's PATH (landlock's
		// tests have their own, without bwrap).
		b, path := fx.backend, os.Getenv("PATH")
		b.Env = slices.DeleteFunc(slices.Clone(b.Env), func(kv string) bool {
			p, ok := strings.CutPrefix(kv, "PATH=")
			if ok {
				path = p
			}
			return ok
		})
		ts := b.Start(t, testkit.NewProject(t), fx.env("PATH="+filepath.Join(inst, "bin")+":"+path), "--session", "armed", "--auth", "none")
		if res, _ := ts.Exec(map[string]any{"command": "cat " + secret}); res.Stdout != "inst-secret\n" {
			t.Fatalf("a call of the default PATH does not read what its PATH shows: %+v", res)
		}
		for i := range 2 * jail.AgentSpares {
			res, _ := ts.Exec(map[string]any{"command": "cat " + secret + " 2>/dev/null; true", "env": map[string]any{"PATH": "/usr/bin:/bin"}})
			if strings.Contains(res.Stdout, "inst-secret") {
				fx.escape(t, "call %d, whose PATH shows nothing under /tmp, read %s (shown to the default PATH's calls)", i, secret)
			}
			if i%4 == 3 {
				// The default PATH's calls meanwhile, and a pause for the
				// agent to ready threads again.
				ts.Exec(map[string]any{"command": "true"})
				time.Sleep(20 * time.Millisecond)
			}
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
	fx.vector(t, "http-token", fx.httpToken)
	fx.vector(t, "http-session-ids", fx.httpSessionIDs)
	fx.vector(t, "http-token-file", fx.httpTokenFile)
}

// httpToken: the HTTP server's bearer token is nowhere a command can read
// it. Under landlock the host's /proc is in view and the server is its
// agent's parent, so the command reads /proc/$PPID and every process's
// command line and environment it can open; it is given only the public
// prefix of the token, to pick out lines that would hold it.
func (fx *escapeFixture) httpToken(t *testing.T) {
	prefix := "escape-token-" + fx.marker
	token := prefix + "-" + uuid.NewString()
	hs := testkit.StartHTTP(t, testkit.NewProject(t), append(fx.env("JAIL_MCP_TOKEN="+token), fx.backend.Env...), fx.backend.Args...)
	s := hs.Connect(t, "")
	res, raw := s.Exec(map[string]any{"command": `
read=0
for f in /proc/$PPID/cmdline /proc/$PPID/environ /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do
	c=$(tr '\0' '\n' < "$f" 2>/dev/null) || continue
	read=$((read+1))
	printf '%s\n' "$c" | grep -F -e "$PREFIX" | sed "s|^|$f: |"
done
echo "server: $(tr '\0' ' ' < /proc/$SERVERPID/cmdline 2>/dev/null)"
echo "read $read"
`, "env": map[string]any{"PREFIX": prefix, "SERVERPID": strconv.Itoa(hs.Cmd.Process.Pid)}, "timeout_ms": 60000})
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "\nread ") {
		t.Fatalf("attack did not run: %+v %s", res, testkit.ResultText(raw))
	}
	if fx.landlock() && !strings.Contains(res.Stdout, " serve --project ") {
		t.Errorf("the server's command line was not read: the attack proves less than it should\n%s", testkit.Tail(res.Stdout))
	}
	if strings.Contains(res.Stdout, token) {
		for _, line := range strings.Split(res.Stdout, "\n") {
			if strings.Contains(line, token) {
				fx.escape(t, "the server's bearer token is readable in the jail: %s", strings.ReplaceAll(line, token, "<token>"))
			}
		}
	}
}

// httpSessionIDs: a command must not learn another session's MCP session
// id, which with the token drives that session (its commands run in that
// session's jail). The jails' names are in view (.agent-home is readable);
// the command tries each as Mcp-Session-Id, with the right token (given to
// it here to isolate this link), and must be refused every time.
func (fx *escapeFixture) httpSessionIDs(t *testing.T) {
	token := "escape-ids-" + fx.marker
	project := testkit.NewProject(t)
	hs := testkit.StartHTTP(t, project, append(fx.env("JAIL_MCP_TOKEN="+token), fx.backend.Env...), fx.backend.Args...)
	victim := hs.Connect(t, "")
	if res, raw := victim.Exec(map[string]any{"command": "echo $HOME"}); res.ExitCode != 0 {
		t.Fatalf("victim: %+v %s", res, testkit.ResultText(raw))
	}
	attacker := hs.Connect(t, "")
	res, raw := attacker.Exec(map[string]any{"command": `
for n in $(ls "$BASE"); do
	code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" -H "Mcp-Session-Id: $n" \
		-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -H "MCP-Protocol-Version: $VERSION" \
		--data '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"jailed_exec","arguments":{"command":"echo driven > $HOME/driven-` + fx.marker + `"}}}' "$URL")
	echo "tried $n $code"
done
`, "env": map[string]any{"BASE": filepath.Join(project, ".agent-home"), "TOKEN": token, "URL": hs.URL, "VERSION": testkit.LegacyVersion}, "timeout_ms": 60000})
	if res.ExitCode != 0 {
		t.Fatalf("attack did not run: %+v %s", res, testkit.ResultText(raw))
	}
	tried := 0
	for _, line := range strings.Split(res.Stdout, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "tried" {
			continue
		}
		tried++
		if f[2] != "404" {
			fx.escape(t, "a jail's name %s taken as a session id: HTTP %s, want 404", f[1], f[2])
		}
	}
	switch {
	case !fx.landlock() && tried > 1:
		// bubblewrap shows a session its own jail alone.
		fx.escape(t, "the command listed %d jails, want its own only\n%s", tried, res.Stdout)
	case fx.landlock() && tried < 2:
		t.Errorf("the command tried %d jails' names, want both sessions': the attack proves less than it should\n%s", tried, res.Stdout)
	}
	if httpFoundUnder(filepath.Join(project, ".agent-home"), "driven-"+fx.marker) {
		fx.escape(t, "a command drove another session over HTTP: its jail has the file")
	}
}

// httpTokenFile: a token file (--token-file) is read like any other file
// of the server's user: reads are not confined, so a command that knows
// (or finds) its path reads the token. A known gap on every backend
// (knownGaps): the docs say to prefer JAIL_MCP_TOKEN, or to remove the
// file once the server has started.
func (fx *escapeFixture) httpTokenFile(t *testing.T) {
	token := "escape-token-file-" + fx.marker + "-" + uuid.NewString()
	file := filepath.Join(testkit.HostDir(t), "token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hs := testkit.StartHTTP(t, testkit.NewProject(t), append(fx.env(), fx.backend.Env...), append(slices.Clone(fx.backend.Args), "--token-file", file)...)
	s := hs.Connect(t, "")
	res, _ := s.Exec(map[string]any{"command": `tr '\0' ' ' < /proc/$PPID/cmdline; echo; cat "$FILE"; cat "/proc/self/root$FILE"; (cd "$(dirname "$FILE")" && cat "./$(basename "$FILE")"; cp "$FILE" "$HOME/t" && cat "$HOME/t")`, "env": map[string]any{"FILE": file}})
	if strings.Contains(res.Stdout, token) {
		fx.escape(t, "the token file %s is readable in the jail", file)
	}
}
