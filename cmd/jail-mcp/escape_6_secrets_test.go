//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jail-mcp/jail-mcp/auth"
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
	fx.vector(t, "deny-read", fx.denyRead)
	fx.vector(t, "deny-families", fx.denyFamilies)
	fx.vector(t, "deny-made-later", fx.denyMadeLater)
	fx.vector(t, "deny-linked-later", fx.denyLinkedLater)
	fx.vector(t, "deny-moved-during-call", fx.denyMovedDuringCall)
	fx.vector(t, "other-project", fx.otherProject)
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

// denyFamilyFiles are, per tool, files where it keeps a secret (its own
// documentation's paths, see auth/deny.go), written out here rather than
// taken from the list; denyFamilyRoot are the host's, which only root
// reads.
var (
	denyFamilyFiles = map[string][]string{
		"postgresql":  {".pgpass"},
		"mysql":       {".my.cnf", ".mylogin.cnf"},
		"glab":        {".config/glab-cli/config.yml"},
		"terraform":   {".terraformrc", ".terraform.d/credentials.tfrc.json"},
		"pulumi":      {".pulumi/credentials.json"},
		"rclone":      {".config/rclone/rclone.conf"},
		"s3cmd":       {".s3cfg"},
		"kaggle":      {".kaggle/kaggle.json", ".config/kaggle/access_token"},
		"huggingface": {".cache/huggingface/token", ".cache/huggingface/stored_tokens", ".huggingface/token"},
		"sops-age":    {".config/sops/age/keys.txt"},
		"maven":       {".m2/settings-security.xml"},
		"rubygems":    {".gem/credentials", ".local/share/gem/credentials"},
		"podman":      {".config/containers/auth.json"},
		"atuin":       {".local/share/atuin/history.db", ".local/share/atuin/key"},
		"thunderbird": {".thunderbird/x.default/logins.json", ".mozilla-thunderbird/x.default/key4.db", "snap/thunderbird/common/.thunderbird/x.default/key4.db"},
	}
	denyFamilyRoot = []string{"/etc/ssl/private", "/etc/letsencrypt/live/%s", "/etc/NetworkManager/system-connections"}
)

// denyFamilies: under the default --deny-read list, a jailed cat of each
// family's secret file fails; with an empty --deny-read the same cat reads it
// (the control). As root, the host's TLS keys and NetworkManager's
// connections too.
func (fx *escapeFixture) denyFamilies(t *testing.T) {
	home, project := testkit.HostDir(t), testkit.NewProject(t)
	env := slices.DeleteFunc(fx.env(), func(kv string) bool { return strings.HasPrefix(kv, "HOME=") })
	env = append(env, "HOME="+home)
	for _, v := range auth.DenyVars() {
		env = append(env, v+"=")
	}
	canary := "jmc-family-" + uuid.NewString()
	var files []string
	for family, rels := range denyFamilyFiles {
		for _, rel := range rels {
			files = append(files, filepath.Join(home, rel))
			writeFiles(t, home, map[string]string{rel: canary + " " + family + "\n"})
		}
	}
	if os.Geteuid() == 0 {
		for _, dir := range denyFamilyRoot {
			dir = strings.ReplaceAll(dir, "%s", fx.marker)
			f := filepath.Join(dir, fx.marker+"-secret")
			created := dir
			for p := dir; p != "/etc"; p = filepath.Dir(p) {
				if _, err := os.Lstat(p); err != nil {
					created = p
				}
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, []byte(canary+" root\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if created == dir {
				t.Cleanup(func() { os.Remove(f) })
			} else {
				t.Cleanup(func() { os.RemoveAll(created) })
			}
			files = append(files, f)
		}
	}
	slices.Sort(files)
	script := `for f in "$@"; do if cat "$f" 2>/dev/null | grep -q "$C"; then echo "READ $f"; fi; done; echo done`
	a := fx.start(t, project, env, "--session", "families", "--auth", "none")
	ctl := fx.start(t, project, env, "--session", "families-control", "--auth", "none", "--deny-read", "")
	// The canary reaches the jail only in its halves' variable C, whole
	// in the command's environment: the files are what is read.
	args := map[string]any{"argv": append([]string{"/bin/sh", "-c", script, "sh"}, files...), "env": map[string]any{"C": canary}}
	res, _ := a.Exec(args)
	read, _ := ctl.Exec(args)
	for _, f := range files {
		if !strings.Contains(read.Stdout, "READ "+f+"\n") {
			t.Errorf("with --deny-read '' the jail does not read %s: the check proves less than it should\n%s", f, read.Stdout)
		}
		if strings.Contains(res.Stdout, "READ "+f+"\n") {
			fx.escape(t, "the default --deny-read list lets a command read %s", f)
		}
	}
	if !strings.HasSuffix(res.Stdout, "done\n") {
		t.Errorf("the reads did not run to their end: %+v", res)
	}
}

// denyDirs are the directories among the paths --deny-read hides by
// default (the built-in list and the registry's credentials): the canary
// goes in a file inside each. Every other path is a file, or a pattern
// (denyInstances).
var denyDirs = []string{
	".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube",
	".password-store", ".local/share/keyrings", ".config/op",
	".mozilla", ".config/google-chrome", ".config/chromium", ".config/BraveSoftware",
	"snap/firefox/common/.mozilla", "snap/chromium/common/chromium",
	".config/gh", ".config/git", ".config/opencode",
	".config/glab-cli", ".config/rclone", ".kaggle", ".config/kaggle", ".huggingface",
	".config/sops", ".local/share/atuin", ".thunderbird", ".mozilla-thunderbird",
	"snap/thunderbird/common/.thunderbird",
}

// denyInstances name a file that each pattern of the default list
// matches.
var denyInstances = map[string]string{
	".cargo/credentials*":       ".cargo/credentials.toml",
	".terraform.d/credentials*": ".terraform.d/credentials.tfrc.json",
}

// denyLinked are default paths planted as links into a dotfiles
// directory, as dotfile managers do: the list hides what they lead to.
var denyLinked = map[string]string{
	".gnupg": ".dotfiles/gnupg",
	".npmrc": ".dotfiles/npmrc",
}

// canaryHost is a host with a canary, a string made for one run, planted
// where no command may read it: in every path of the default --deny-read
// list under a home of its own (the servers' HOME), in paths the test adds
// to the list (absolute, a pattern, of the project), and in another live
// session's jail (its files, a call's and its jobs' outputs, its CLI's
// state copy) and its job's environment. The canary is never whole in a
// command's text or environment: commands get it in two halves.
type canaryHost struct {
	canary  string
	home    string
	project string
	env     []string          // the servers' environment: HOME the canary home
	deny    string            // --deny-read: default and the test's paths
	hidden  []string          // host files holding the canary that deny hides
	shown   map[string]string // files below denied paths that stay readable, and what they hold
	other   []string          // files of session b's jail holding the canary
	b       *testkit.Server   // session b, --auth claude
}

// newCanaryHost plants the canary and starts session b on the project,
// whose jobs run on until the test ends.
func (fx *escapeFixture) newCanaryHost(t *testing.T) *canaryHost {
	t.Helper()
	h := &canaryHost{
		canary:  "jmc-canary-" + uuid.NewString(),
		home:    testkit.HostDir(t),
		project: testkit.NewProject(t),
		shown:   map[string]string{},
	}
	// No variable moves a credential out of the home (CODEX_HOME, say):
	// every path of the list is planted under it.
	h.env = slices.DeleteFunc(fx.env(), func(kv string) bool { return strings.HasPrefix(kv, "HOME=") })
	h.env = append(h.env, "HOME="+h.home)
	for _, c := range auth.Registry {
		for _, p := range c.Paths {
			if p.Env != "" {
				h.env = append(h.env, p.Env+"=")
			}
		}
	}
	for _, v := range auth.DenyVars() {
		h.env = append(h.env, v+"=")
	}
	plant := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for rel, target := range denyLinked {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(h.home, target)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(h.home, rel)); err != nil {
			t.Fatal(err)
		}
	}
	def := auth.DefaultDeny(h.home, false, envLookup(h.env))
	for _, p := range def.Paths {
		rel, err := filepath.Rel(h.home, p)
		if err != nil || !filepath.IsLocal(rel) {
			t.Fatalf("%s of the default list is not under the home %s", p, h.home)
		}
		secret := fmt.Sprintf("%s\nfrom ~/%s\n", h.canary, rel)
		listed := rel
		if target, ok := denyLinked[rel]; ok {
			rel = target
		}
		switch {
		case slices.Contains(denyDirs, listed):
			// A file inside, and one deeper.
			plant(filepath.Join(h.home, rel, "secret"), secret)
			plant(filepath.Join(h.home, rel, "sub", "deeper"), secret)
			h.hidden = append(h.hidden, filepath.Join(h.home, rel, "secret"), filepath.Join(h.home, rel, "sub", "deeper"))
		case strings.ContainsAny(filepath.Base(rel), "*?["):
			inst, ok := denyInstances[rel]
			if !ok {
				t.Fatalf("the default list's pattern ~/%s has no instance in denyInstances: add a file it matches", rel)
			}
			plant(filepath.Join(h.home, inst), secret)
			h.hidden = append(h.hidden, filepath.Join(h.home, inst))
		default:
			plant(filepath.Join(h.home, rel), secret)
			h.hidden = append(h.hidden, filepath.Join(h.home, rel))
		}
	}
	for _, p := range def.Shown {
		h.shown[p] = "shown " + filepath.Base(p) + "\n"
		plant(p, h.shown[p])
	}
	// The test's own: a directory, a file and a pattern outside the
	// project, and a file of the project.
	abs := testkit.HostDir(t)
	for _, rel := range []string{"vault/token", "vault/nested/key", "loose.key", "server.pem", "config/secret.env"} {
		dir := abs
		if strings.HasPrefix(rel, "config/") {
			dir = h.project
		}
		plant(filepath.Join(dir, rel), h.canary+"\n")
		h.hidden = append(h.hidden, filepath.Join(dir, rel))
	}
	writeFiles(t, h.project, map[string]string{"config/app.toml": "shown\n"})
	h.deny = strings.Join([]string{"default", filepath.Join(abs, "vault"), filepath.Join(abs, "loose.key"), filepath.Join(abs, "*.pem"), "config/secret.env"}, ",")
	slices.Sort(h.hidden)

	// Session b: its CLI (claude) has state the server copies into its
	// jail; a call writes files and an output kept in the jail; two jobs,
	// one on a terminal, print the canary and run on with it in their
	// environment.
	plant(filepath.Join(h.home, ".claude.json"), fmt.Sprintf("{\"token\":%q}\n", h.canary))
	b := fx.start(t, h.project, h.env, "--session", "b", "--auth", "claude")
	h.b = b
	env := map[string]any{"CANARY": h.canary}
	res, raw := b.Exec(map[string]any{"env": env, "command": `mkdir -p "$HOME/work/deep"
printf '%s\n' "$CANARY" > "$HOME/notes.txt"
printf 'KEY=%s\n' "$CANARY" > "$HOME/work/deep/.env"
printf '%s\n' "$CANARY"; head -c 200000 /dev/zero | tr '\0' x`})
	if res.ExitCode != 0 || res.OutputPath == "" {
		t.Fatalf("session b's call: %+v %s", res, testkit.ResultText(raw))
	}
	var jobOut []string
	for _, tty := range []bool{false, true} {
		id := b.StartJob(map[string]any{"env": env, "tty": tty, "command": `printf 'job %s\n' "$CANARY"; echo job-ready; exec cat`})
		got, end := b.ReadUntil(id, "job-ready", time.Minute)
		if !strings.Contains(got, "job-ready") || !end.Running || end.OutputPath == "" {
			t.Fatalf("session b's job (tty %t): %q %+v", tty, got, end)
		}
		jobOut = append(jobOut, end.OutputPath)
	}
	jail := filepath.Join(h.project, ".agent-home", "b")
	filepath.WalkDir(jail, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), h.canary) {
				h.other = append(h.other, p)
			}
		}
		return nil
	})
	// What the host finds there, each kind of it: else the attack
	// proves less than it should. The state copy is in the state
	// directory, or at its place in the jail while a call that shows it
	// runs (under landlock, b's jobs).
	for _, want := range append([]string{filepath.Join(jail, "notes.txt"), filepath.Join(jail, "work/deep/.env"), res.OutputPath}, jobOut...) {
		if !slices.ContainsFunc(h.other, func(p string) bool { return testkit.Within(p, want) }) {
			t.Fatalf("session b's jail has no canary in %s: %v", want, h.other)
		}
	}
	if !slices.Contains(h.other, filepath.Join(jail, stateCopy("claude", ".claude.json"))) && !slices.Contains(h.other, filepath.Join(jail, ".claude.json")) {
		t.Fatalf("session b's jail has no copy of the canary's .claude.json: %v", h.other)
	}
	return h
}

// stateCopy is where a session's jail keeps its copy of a CLI's state
// file (creds.StateDir).
func stateCopy(cli, rel string) string { return filepath.Join(".jail-mcp/state", cli, rel) }

// envLookup is getenv over env.
func envLookup(env []string) func(string) string {
	return func(k string) string {
		v := ""
		for _, kv := range env {
			if val, ok := strings.CutPrefix(kv, k+"="); ok {
				v = val
			}
		}
		return v
	}
}

// halves are the variables that give a command the canary in two
// parts, and the project.
func (h *canaryHost) halves() map[string]any {
	return map[string]any{"C1": h.canary[:7], "C2": h.canary[7:], "PROJECT": h.project}
}

// canaryGrep lists every file holding the canary in the host's homes,
// /tmp, /etc, /var, the project and every process's environment, then
// says how grep ended. Devices, FIFOs and sockets are skipped, and links
// are not followed (what they lead to is searched where it lies). /tmp is
// large on a build host, but every backend hides the host's (bubblewrap:
// a tmpfs of its own; landlock: its files read EACCES), so the search
// there is a walk of names.
const canaryGrep = `c="$C1$C2"
timeout 540 grep -r -a -l -F -D skip -e "$c" /home /root /tmp /etc /var "$PROJECT" /proc/[0-9]*/environ 2>/dev/null
echo "grep-exit=$?"
`

// runGrep runs a grep that prints the files it finds, then
// "grep-exit=CODE", through a call, a job or a terminal job (how: call,
// job, tty), and lists the files; it fails the test when the grep did
// not run confined to its end.
func runGrep(ctx context.Context, t *testing.T, ts *testkit.Server, how string, args map[string]any) []string {
	t.Helper()
	var out string
	if how == "call" {
		res, raw, err := callExec(ctx, ts, args)
		if err != nil {
			t.Fatalf("grep: %v", err)
		}
		if !res.Confined {
			t.Fatalf("grep did not run confined: %s", testkit.ResultText(raw))
		}
		out = res.Stdout
	} else {
		args["tty"] = how == "tty"
		id := ts.StartJob(args)
		out, _ = ts.ReadUntil(id, "grep-exit=", 10*time.Minute)
	}
	found, done := grepFound(out)
	if !done {
		t.Fatalf("grep through a %s did not run to its end:\n%s", how, testkit.Tail(out))
	}
	return found
}

// grepFound is the files canaryGrep's output lists; done: it ran to its
// end (grep neither timed out nor was killed).
func grepFound(out string) (found []string, done bool) {
	for _, line := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
		if code, ok := strings.CutPrefix(line, "grep-exit="); ok {
			return found, code == "0" || code == "1" || code == "2"
		}
		// The project is searched twice where it lies in /tmp.
		if strings.HasPrefix(line, "/") && !slices.Contains(found, line) {
			found = append(found, line)
		}
	}
	return found, false
}

// denyRead: the canary is nowhere a command can read it, through a call,
// a background job and a terminal job; a server whose --deny-read is
// empty finds every planted host file with the same command (the
// control).
func (fx *escapeFixture) denyRead(t *testing.T) {
	h := fx.newCanaryHost(t)
	a := fx.start(t, h.project, h.env, "--session", "a", "--auth", "none", "--deny-read", h.deny)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	grep := func(t *testing.T, ts *testkit.Server, how string) []string {
		t.Helper()
		args := map[string]any{"command": canaryGrep, "env": h.halves(), "timeout_ms": 570000}
		if how == "control" {
			// The shell that greps holds the canary whole in its own
			// environment: the grep must find it there.
			args["command"] = `c="$C1$C2"; CANARY="$c" exec /bin/sh -c "$GREP"`
			args["env"].(map[string]any)["GREP"] = canaryGrep
			how = "call"
		}
		return runGrep(ctx, t, ts, how, args)
	}

	ctl := fx.start(t, h.project, h.env, "--session", "control", "--auth", "none", "--deny-read", "")
	// The controls: the same grep, nothing denied, finds every planted
	// host file, and session b's jail stays hidden all the same; in
	// session b, it finds b's files and outputs.
	t.Run("control", func(t *testing.T) {
		found := grep(t, ctl, "control")
		t.Logf("with --deny-read '' the grep finds %d files", len(found))
		for _, p := range h.hidden {
			if !slices.Contains(found, p) {
				t.Errorf("with --deny-read '' the grep does not find %s: it proves less than it should", p)
			}
		}
		environ := 0
		for _, p := range found {
			switch {
			case strings.HasPrefix(p, "/proc/") && strings.HasSuffix(p, "/environ"):
				environ++
			case !slices.Contains(h.hidden, p):
				fx.escape(t, "with --deny-read '' the canary is read in %s", p)
			}
		}
		if environ != 1 {
			t.Errorf("the grep finds the canary in %d environments of processes, want 1 (its own shell's): it proves less than it should", environ)
		}
		found = grep(t, h.b, "call")
		for _, p := range h.other {
			// Its CLI's state is hidden from its commands but where a
			// call that enables the CLI shows it.
			if !strings.Contains(p, "/.jail-mcp/state/") && !strings.HasSuffix(p, "/.claude.json") && !slices.Contains(found, p) {
				t.Errorf("in session b the grep does not find %s: it proves less than it should", p)
			}
		}
	})
	for _, how := range []string{"call", "job", "tty"} {
		t.Run(how, func(t *testing.T) {
			for _, p := range grep(t, a, how) {
				kind := "a path --deny-read hides"
				if slices.Contains(h.other, p) {
					kind = "session b's jail"
				}
				fx.escape(t, "through a %s the canary is read in %s (%s)", how, p, kind)
			}
		})
	}
	// What stays readable below a denied path.
	t.Run("shown", func(t *testing.T) {
		for p, want := range h.shown {
			res, _ := a.Exec(map[string]any{"argv": []string{"cat", p}})
			if res.Stdout != want {
				t.Errorf("%s reads %q (%s), want %q", p, res.Stdout, res.Stderr, want)
			}
		}
		if res, _ := a.Exec(map[string]any{"argv": []string{"cat", filepath.Join(h.project, "config/app.toml")}}); res.Stdout != "shown\n" {
			t.Errorf("the project beside a denied file: %+v", res)
		}
	})

	// As root the built-in list adds the host's password and host-key
	// files, which root reads (the control, as root, proves it); a normal
	// user reads none of them either way. A mask may leave a file empty:
	// what counts is its content.
	t.Run("root-files", func(t *testing.T) {
		const script = `for f in /etc/shadow /etc/shadow- /etc/gshadow /etc/gshadow- /etc/ssh/ssh_host_*_key; do
	[ -e "$f" ] || continue
	if n=$(wc -c < "$f" 2>/dev/null); then echo "read $f $n"; else echo "refused $f"; fi
done`
		res, _ := a.Exec(map[string]any{"command": script})
		read, _ := ctl.Exec(map[string]any{"command": script})
		for _, line := range strings.Split(res.Stdout, "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "read" && f[2] != "0" {
				fx.escape(t, "%s: %s bytes read", f[1], f[2])
			}
		}
		if os.Geteuid() == 0 {
			for _, line := range strings.Split(read.Stdout, "\n") {
				if f := strings.Fields(line); len(f) > 0 && f[0] != "read" {
					t.Errorf("as root with --deny-read '' the jail does not read %s: the check proves less than it should", f[1])
				}
			}
		}
		t.Logf("default: %q; --deny-read '': %q", res.Stdout, read.Stdout)
	})

	// A narrow --auth: the enabled CLI reads its credentials in the jail,
	// where they belong; no other CLI's are readable, at their host paths
	// or in the jail.
	t.Run("auth-narrow", func(t *testing.T) {
		n := fx.start(t, h.project, h.env, "--session", "narrow", "--auth", "codex")
		jail := filepath.Join(h.project, ".agent-home", "narrow")
		getenv := envLookup(h.env)
		enabled := auth.EnabledPaths([]string{"codex"}, h.home, getenv)
		paths := []string{jail}
		for _, p := range auth.CredentialPaths(h.home, getenv) {
			if !slices.ContainsFunc(enabled, func(e string) bool { return testkit.Within(p, e) }) {
				paths = append(paths, p)
			}
		}
		script := `cat "$HOME/.codex/auth.json"; echo; echo ---; c="$C1$C2"; grep -r -a -l -F -D skip -e "$c" "$@" 2>/dev/null; echo "grep-exit=$?"`
		res, _ := n.Exec(map[string]any{"argv": append([]string{"/bin/sh", "-c", script, "sh"}, paths...), "env": h.halves()})
		own, out, _ := strings.Cut(res.Stdout, "---\n")
		if want := fmt.Sprintf("%s\nfrom ~/.codex/auth.json\n\n", h.canary); own != want {
			t.Errorf("codex's credentials in the jail read %q (%s), want %q", own, res.Stderr, want)
		}
		found, done := grepFound(out)
		if !done {
			t.Fatalf("grep did not run to its end: %+v", res)
		}
		for _, p := range found {
			if p != filepath.Join(jail, ".codex/auth.json") {
				fx.escape(t, "with --auth codex the canary is read in %s", p)
			}
		}
	})
}

// laterDenied are paths of the default list that the host makes between
// two calls (denyMadeLater), one a call: files, and files in directories
// that did not exist when the session started.
var laterDenied = []string{
	".vault-token", ".netrc", ".pypirc", ".git-credentials", ".docker/config.json",
	".azure/accessTokens.json", ".config/gcloud/credentials.db", ".password-store/web.gpg",
	".local/share/keyrings/login.keyring", ".terraform.d/credentials.tfrc.json",
	".bash_history", ".claude/.credentials.json",
}

// denyMadeLater: what the host makes between two calls is read as the
// deny list says, by the next call: a file in the project's root and in
// the home's, yes; one in a denied directory that was there when the
// session started (~/.aws) or made since (~/.kube, and ~/.mozilla as a
// link into a dotfiles directory), or a denied file made since, never. More calls than the agent readies threads ahead, each
// after a change. The same with an empty --deny-read reads them all (the
// control).
func (fx *escapeFixture) denyMadeLater(t *testing.T) {
	if len(laterDenied) < 2*jail.AgentSpares {
		t.Fatalf("laterDenied has %d paths, want one for each of %d calls", len(laterDenied), 2*jail.AgentSpares)
	}
	for _, deny := range []string{"default", ""} {
		home, project := testkit.HostDir(t), testkit.NewProject(t)
		canary := "jmc-later-" + uuid.NewString()
		writeFiles(t, home, map[string]string{".aws/credentials": canary + "\n"})
		env := slices.DeleteFunc(fx.env(), func(kv string) bool { return strings.HasPrefix(kv, "HOME=") })
		ts := fx.start(t, project, append(env, "HOME="+home), "--session", "later", "--auth", "none", "--deny-read", deny)
		// read reports what a call read of the host's denied paths.
		read := func(i int, stdout string, paths ...string) {
			t.Helper()
			for _, p := range paths {
				got := strings.Contains(stdout, "read "+p+"\n")
				switch {
				case got && deny != "":
					fx.escape(t, "call %d reads %s, which --deny-read hides", i, p)
				case !got && deny == "":
					t.Errorf("call %d with --deny-read '' does not read %s: the check proves less than it should", i, p)
				}
			}
		}
		res, _ := ts.Exec(map[string]any{"env": map[string]any{"F": filepath.Join(home, ".aws/credentials")}, "command": `cat "$F" >/dev/null 2>&1 && echo "read $F"; true`})
		read(0, res.Stdout, filepath.Join(home, ".aws/credentials"))
		// A denied directory made as a link into a dotfiles directory, as
		// dotfile managers do: what it leads to is hidden, as it is for a
		// link there when the server starts.
		writeFiles(t, home, map[string]string{".dotfiles/mozilla/profiles.ini": "[General]\n"})
		if err := os.Symlink(".dotfiles/mozilla", filepath.Join(home, ".mozilla")); err != nil {
			t.Fatal(err)
		}
		for i := range 2 * jail.AgentSpares {
			later := fmt.Sprintf("later-%d", i)
			writeFiles(t, project, map[string]string{later + ".txt": "project " + later + "\n"})
			writeFiles(t, home, map[string]string{
				later + ".txt":               "home " + later + "\n",
				".aws/" + later:              canary + "\n",
				".kube/" + later:             canary + "\n",
				laterDenied[i]:               canary + "\n",
				".dotfiles/mozilla/" + later: canary + "\n",
			})
			denied := []string{filepath.Join(home, ".aws", later), filepath.Join(home, ".kube", later), filepath.Join(home, laterDenied[i]),
				filepath.Join(home, ".mozilla", later), filepath.Join(home, ".dotfiles/mozilla", later)}
			res, raw := ts.Exec(map[string]any{"argv": append([]string{"/bin/sh", "-c", `cat "$P" "$H"; for f; do grep -q -F -e "$C" "$f" 2>/dev/null && echo "read $f"; done; true`, "sh"}, denied...),
				"env": map[string]any{"P": filepath.Join(project, later+".txt"), "H": filepath.Join(home, later+".txt"), "C": canary}})
			if want := "project " + later + "\nhome " + later + "\n"; !strings.HasPrefix(res.Stdout, want) {
				t.Errorf("call %d does not read what the host made before it in the project and the home: %q %q %s", i, res.Stdout, res.Stderr, testkit.ResultText(raw))
			}
			read(i+1, res.Stdout, denied...)
		}
	}
}

// denyLinkedLater: a denied file of the project that the host turns into
// a link after the session started (ln -sf config/production.env .env)
// is read through the link by no call: what it leads to is hidden, as
// the read view hides what a denied path leads to. Under bubblewrap with
// the project view, whose views mask the denied paths as each view is
// made; under landlock, by the read view.
func (fx *escapeFixture) denyLinkedLater(t *testing.T) {
	project := testkit.NewProject(t)
	canary := "jmc-linked-" + uuid.NewString()
	writeFiles(t, project, map[string]string{".env": "DEV=1\n", "config/production.env": canary + "\n"})
	args := []string{"--session", "linked", "--auth", "none", "--deny-read", "default,.env"}
	if !fx.landlock() {
		args = append(args, "--overlay", "on")
	}
	ts := fx.start(t, project, fx.env(), args...)
	read := `cat .env 2>/dev/null | grep -q -F -e "$C" && echo "read .env"; true`
	vars := map[string]any{"C": canary}
	if res, raw := ts.Exec(map[string]any{"command": read + "; cat .env", "env": vars}); res.Stdout != "" {
		t.Fatalf("the denied .env is read before it is a link: %s", testkit.ResultText(raw))
	}
	env := filepath.Join(project, ".env")
	if err := os.Remove(env); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("config/production.env", env); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if res, raw := ts.Exec(map[string]any{"command": read, "env": vars}); strings.Contains(res.Stdout, "read .env") {
			fx.escape(t, "call %d reads the denied .env through the link the host made: %s", i, testkit.ResultText(raw))
		}
	}
}

// denyMovedDuringCall: a file or directory of the home that a running
// job's read view granted, which the host then moves into a denied path
// (onto ~/.pgpass, into ~/.ssh), would stay readable to that job there
// (Landlock's rules follow the inode), and so would what the host writes
// into it next: the session agent ends the job, and its result says why.
// The next call reads neither. Without the guard the job runs on (it
// sleeps for ten minutes) and the wait for its end fails.
func (fx *escapeFixture) denyMovedDuringCall(t *testing.T) {
	for _, tc := range []struct{ name, from, to string }{
		{"file", "stage.txt", ".pgpass"},
		{"dir", "stagedir", ".ssh/stagedir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home, project := testkit.HostDir(t), testkit.NewProject(t)
			canary := "jmc-moved-" + uuid.NewString()
			writeFiles(t, home, map[string]string{"stage.txt": "staged\n", "stagedir/notes": "staged\n", ".ssh/known_hosts": "host\n", "other.txt": "other\n"})
			env := slices.DeleteFunc(fx.env(), func(kv string) bool { return strings.HasPrefix(kv, "HOME=") })
			ts := fx.start(t, project, append(env, "HOME="+home), "--session", "moved", "--auth", "none", "--deny-read", "default")
			id := ts.StartJob(map[string]any{"command": "echo ready; exec sleep 600"})
			if out, _ := ts.ReadUntil(id, "ready", time.Minute); !strings.Contains(out, "ready") {
				t.Fatalf("the job did not start: %q", out)
			}
			// A move the guard lets be: to a place the view shows.
			if err := os.Rename(filepath.Join(home, "other.txt"), filepath.Join(home, "stagedir-other.txt")); err != nil {
				t.Fatal(err)
			}
			to := filepath.Join(home, tc.to)
			if err := os.Rename(filepath.Join(home, tc.from), to); err != nil {
				t.Fatal(err)
			}
			_, out := ts.ReadUntil(id, "never printed", 2*time.Minute)
			if out.Running {
				fx.escape(t, "the job runs on, two minutes after the host moved %s to %s, which its read view still lets it read", tc.from, tc.to)
				ts.Job(map[string]any{"job_id": id, "signal": "KILL"})
				return
			}
			res, raw := ts.Job(map[string]any{"job_id": id})
			text := testkit.ResultText(raw)
			if !strings.Contains(text, "ended: the host moved "+filepath.Join(home, tc.from)+" to "+to) {
				t.Errorf("the job's result does not say why it ended: %s (%+v)", text, res)
			}
			target := to
			if tc.name == "dir" {
				target = filepath.Join(to, "notes")
			}
			if err := os.WriteFile(target, []byte(canary+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if r, raw := ts.Exec(map[string]any{"command": `cat "$F" 2>/dev/null; true`, "env": map[string]any{"F": target}}); strings.Contains(r.Stdout, canary) {
				fx.escape(t, "the next call reads %s: %s", target, testkit.ResultText(raw))
			}
		})
	}
}

// otherProject: a session of another project's server on the host reads
// as session b's jail does, nothing: not its files, its job's output, nor
// its CLI's state copy, a copy of a default-denied file (~/.claude.json).
// That project lies in plain view of every backend, as a user's
// ~/src/<project> does, not under /tmp, which both hide whole.
func (fx *escapeFixture) otherProject(t *testing.T) {
	home, other := testkit.HostDir(t), testkit.HostDir(t)
	canary := "jmc-canary-" + uuid.NewString()
	writeFiles(t, home, map[string]string{".claude.json": fmt.Sprintf("{\"token\":%q}\n", canary)})
	env := slices.DeleteFunc(fx.env(), func(kv string) bool { return strings.HasPrefix(kv, "HOME=") })
	env = append(env, "HOME="+home, "CLAUDE_CONFIG_DIR=")
	// A session of this project started before the other project's
	// server (whose jails its sandbox did not know of when it started),
	// and one after.
	early := fx.start(t, testkit.NewProject(t), env, "--session", "early", "--auth", "none")
	if res, raw := early.Exec(map[string]any{"command": "true"}); res.ExitCode != 0 {
		t.Fatalf("session early's first call: %+v %s", res, testkit.ResultText(raw))
	}
	x := fx.start(t, other, env, "--session", "x", "--auth", "claude")
	vars := map[string]any{"CANARY": canary}
	if res, raw := x.Exec(map[string]any{"env": vars, "command": `printf '%s\n' "$CANARY" > "$HOME/notes.txt"`}); res.ExitCode != 0 {
		t.Fatalf("session x's call: %+v %s", res, testkit.ResultText(raw))
	}
	id := x.StartJob(map[string]any{"env": vars, "command": `printf 'job %s\n' "$CANARY"; echo job-ready; exec cat`})
	if got, _ := x.ReadUntil(id, "job-ready", time.Minute); !strings.Contains(got, "job-ready") {
		t.Fatalf("session x's job: %q", got)
	}
	jail := filepath.Join(other, ".agent-home", "x")
	var planted []string
	filepath.WalkDir(jail, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), canary) {
				planted = append(planted, p)
			}
		}
		return nil
	})
	// Its files, its job's output, its CLI's state copy: else the attack
	// proves less than it should.
	if len(planted) < 3 {
		t.Fatalf("session x's jail holds the canary in %v, want its file, its job's output and the state copy of .claude.json", planted)
	}
	a := fx.start(t, testkit.NewProject(t), env, "--session", "a", "--auth", "none")
	for _, s := range []*testkit.Server{early, a} {
		res, raw := s.Exec(map[string]any{"env": map[string]any{"C1": canary[:7], "C2": canary[7:], "OTHER": other, "H": home},
			"command": `c="$C1$C2"; grep -r -a -l -F -D skip -e "$c" "$OTHER" "$H" /proc/[0-9]*/environ 2>/dev/null; echo "grep-exit=$?"`})
		found, done := grepFound(res.Stdout)
		if !done {
			t.Fatalf("grep did not run to its end: %+v %s", res, testkit.ResultText(raw))
		}
		for _, p := range found {
			fx.escape(t, "the canary is read in %s, in a jail of another project's server (session %s)", p, map[bool]string{true: "early", false: "a"}[s == early])
		}
	}
}
