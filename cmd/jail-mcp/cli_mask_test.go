//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// maskedCLI is a real CLI with credentials of a real secret's shape, the
// host its model calls go to, and the secret it must send there.
type maskedCLI struct {
	name, host string
	files      map[string]string // rel -> content
	secret     string            // what the provider must receive
	argv       []string
}

// TestRealCLIsMasked runs the real Claude Code, Codex and Gemini CLIs in
// the jail with masked credentials (--mask all): each reads placeholders,
// and its model call reaches a local server standing for its provider
// (its API host resolved there, the server's certificate trusted by the
// proxy upstream) with the real secret, which only the proxy put in. No
// model answers here: the provider refuses every call, and a CLI that
// then tries to refresh its login is refused by the proxy.
func TestRealCLIsMasked(t *testing.T) {
	withCLIsOnEachBackend(t, testRealCLIsMasked)
}

func testRealCLIsMasked(t *testing.T, b testkit.Backend, bin string) {
	access, refresh := "sk-ant-oat01-"+randToken(95)+"AA", "sk-ant-ort01-"+randToken(95)+"AA"
	openai := "sk-proj-" + randToken(156)
	ya29, google := "ya29."+randToken(160), "1//0g"+randToken(98)
	clis := []maskedCLI{
		{
			name: "claude", host: "api.anthropic.com", secret: access,
			files: map[string]string{
				".claude/.credentials.json": fmt.Sprintf(`{"claudeAiOauth":{"accessToken":%q,"refreshToken":%q,"expiresAt":4102444800000,"scopes":["user:inference","user:profile"],"subscriptionType":"max"}}`, access, refresh),
				".claude.json":              `{"numStartups":1,"installMethod":"npm","autoUpdates":false,"hasCompletedOnboarding":true}`,
			},
			argv: []string{"claude", "-p", "say hi"},
		},
		{
			name: "codex", host: "api.openai.com", secret: openai,
			files: map[string]string{
				".codex/auth.json":   fmt.Sprintf(`{"OPENAI_API_KEY":%q}`, openai),
				".codex/config.toml": "model = \"gpt-5\"\ncli_auth_credentials_store = \"file\"\n",
			},
			argv: []string{"codex", "exec", "--skip-git-repo-check", "say hi"},
		},
		{
			name: "gemini", host: "cloudcode-pa.googleapis.com", secret: ya29,
			files: map[string]string{
				".gemini/settings.json":    `{"security":{"auth":{"selectedType":"oauth-personal"}}}`,
				".gemini/oauth_creds.json": fmt.Sprintf(`{"access_token":%q,"refresh_token":%q,"scope":"https://www.googleapis.com/auth/cloud-platform","token_type":"Bearer","expiry_date":4102444800000}`, ya29, google),
			},
			argv: []string{"gemini", "-p", "say hi"},
		},
	}
	home := testkit.HostDir(t)
	var secrets []string
	for _, c := range clis {
		for rel, content := range c.files {
			os.MkdirAll(filepath.Dir(filepath.Join(home, rel)), 0o700)
			if err := os.WriteFile(filepath.Join(home, rel), []byte(content+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		secrets = append(secrets, c.secret)
	}
	secrets = append(secrets, refresh, google)
	prov := newProvider(t, secrets...)
	project := testkit.NewProject(t)
	caFile := filepath.Join(project, "provider-ca.pem")
	os.WriteFile(caFile, prov.caPEM, 0o644)
	ts := b.Start(t, project, testkit.ServerEnv(
		testkit.TestHosts+"="+prov.hosts(), testkit.TestRoots+"="+caFile, testkit.TestPorts+"=443="+prov.port,
		"HOME="+home, "CLAUDE_CONFIG_DIR=", "CODEX_HOME=",
	), "--session", "cli", "--auth", "claude,codex,gemini", "--mask", "all")
	env := map[string]any{"PATH": bin + string(os.PathListSeparator) + os.Getenv("PATH")}

	for _, c := range clis {
		t.Run(c.name, func(t *testing.T) {
			// The CLI's files in the jail hold placeholders only.
			for rel := range c.files {
				res, _ := ts.Exec(map[string]any{"argv": []string{"cat", filepath.Join(st(ts).Jail, rel)}})
				for _, s := range secrets {
					if strings.Contains(res.Stdout, s) {
						t.Errorf("%s in the jail holds a real secret", rel)
					}
				}
				if res.ExitCode != 0 {
					t.Errorf("cat %s: %q", rel, res.Stderr)
				}
			}
			before := len(prov.sawHost(c.host))
			// stdin closed: codex exec reads a prompt from it otherwise.
			argv := append([]string{"/bin/sh", "-c", `exec "$@" </dev/null`, "sh"}, c.argv...)
			res, raw := ts.Exec(map[string]any{"argv": argv, "env": env, "timeout_ms": 60000})
			if !res.Confined {
				t.Fatalf("not confined: %s", testkit.ResultText(raw))
			}
			seen := prov.sawHost(c.host)[before:]
			sent := false
			for _, r := range seen {
				if strings.Contains(credentialHeader(r.Header), c.secret) {
					sent = true
				}
				t.Logf("%s sent %s %s%s", c.name, r.Host, r.Path, authShape(r, c.secret))
			}
			if !sent {
				t.Errorf("%s's calls to %s did not carry the real secret (%d requests); exit %d\nstdout: %s\nstderr: %s",
					c.name, c.host, len(seen), res.ExitCode, testkit.Tail(res.Stdout), testkit.Tail(res.Stderr))
			}
			for _, s := range secrets {
				if strings.Contains(res.Stdout+res.Stderr, s) {
					t.Errorf("%s printed a real secret", c.name)
				}
			}
			first, _, _ := strings.Cut(strings.TrimSpace(res.Stderr+res.Stdout), "\n")
			t.Logf("%s: exit %d in %d ms, %d refusals; says: %.200s", c.name, res.ExitCode, res.DurationMS, len(res.Refusals), first)
		})
	}
	// Nothing the provider got carries a secret where it is not bound.
	bound := map[string][]string{}
	for _, c := range clis {
		cli, _ := auth.Lookup(c.name)
		bound[c.secret] = cli.Hosts
	}
	for _, l := range prov.leaks(bound) {
		t.Errorf("%s", l)
	}
}

// st is the server's status.
func st(ts *testkit.Server) struct{ Jail string } {
	return struct{ Jail string }{ts.Status().Jail}
}

// authShape says what authenticated a request: the real secret, or not.
func authShape(r seenRequest, secret string) string {
	a := credentialHeader(r.Header)
	switch {
	case a == "":
		return " (no credential)"
	case strings.Contains(a, secret):
		return " with the real secret"
	}
	return " with another credential"
}

// sawHost lists what the provider was sent for host.
func (p *provider) sawHost(host string) []seenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []seenRequest
	for _, s := range p.seen {
		if strings.Split(s.Host, ":")[0] == host {
			out = append(out, s)
		}
	}
	return out
}
