// Package auth owns the credential registry: which CLIs the jail knows,
// where each keeps its credentials under the operator's home, and which
// variables carry them. It resolves what is really present on a host, how
// a call narrows the operator's choice, and the copy-into-jail path for
// backends that cannot bind host files into the jail.
package auth

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Path is one credential path of a CLI.
type Path struct {
	// Rel is the place relative to HOME, on the host by default and always
	// inside the jail.
	Rel string
	// Env, when set on the host, relocates the path there (CODEX_HOME).
	Env string
	// State marks a file the CLI rewrites whenever it starts: the jail gets
	// a private per-session copy, refreshed from the host when the session
	// opens, that never flows back.
	State bool
	// Secrets, for a directory the CLI writes its state into, are the
	// entries in it that hold credentials. The jail gets a private
	// per-session directory there instead, seeded with copies of the host
	// directory's top-level files when the session opens, and only the
	// secrets are the host's, read-only. A directory without secrets is
	// shown read-only whole.
	Secrets []string
}

// CLI is one entry of the registry.
type CLI struct {
	Name    string
	Aliases []string
	Paths   []Path
	Env     []string // variables that carry its credentials or point at its service

	// What --mask needs (issue 31): where the CLI's masked credentials may
	// be sent, and which of its values are secrets.

	// Hosts are the provider's API and sign-in hosts, exact lower-case
	// names: the only ones the proxy puts a masked credential of this CLI
	// back into a request for. A value whose file names its own host
	// (Field.Host) is bound to that host instead.
	Hosts []string
	// TokenPaths are the endpoints on Hosts that hand out tokens (OAuth
	// token endpoints, Copilot's exchange), "host/path": a refresh token
	// goes into a request body only there.
	TokenPaths []string
	// Rotates says the provider issues a new refresh token on each
	// refresh and revokes the old one: a refresh from the jail would log
	// the operator's own CLI out, so the proxy never sends one.
	Rotates bool
	// SecretEnv are the variables of Env that hold secrets; the others
	// (base URLs, model and project names, file paths) are shown as they are.
	SecretEnv []string
}

// Registry is sorted by Name. Hosts, TokenPaths and Rotates are read from
// each CLI's own code: Claude Code's OAuth config, codex-rs's login crate,
// gemini-cli's code_assist with google-auth-library, gh's ghinstance and
// authflow, kimi-cli's auth package, opencode's provider plugins.
var Registry = []CLI{
	{
		Name: "claude", Aliases: []string{"claude-code", "claudish"},
		Paths: []Path{
			{Rel: ".claude", Env: "CLAUDE_CONFIG_DIR", Secrets: []string{".credentials.json"}},
			{Rel: ".claude.json", State: true},
		},
		Env: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"},
		// platform.claude.com took the token endpoint over from
		// console.anthropic.com (Claude Code 2.1.81 on); claude.ai is the
		// web origin and mcp-proxy.anthropic.com the connectors' proxy.
		Hosts:      []string{"api.anthropic.com", "claude.ai", "console.anthropic.com", "mcp-proxy.anthropic.com", "platform.claude.com"},
		TokenPaths: []string{"console.anthropic.com/v1/oauth/token", "platform.claude.com/v1/oauth/token"},
		Rotates:    true,
		SecretEnv:  []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"},
	},
	{
		Name:       "codex",
		Paths:      []Path{{Rel: ".codex", Env: "CODEX_HOME", Secrets: []string{"auth.json"}}},
		Env:        []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"},
		Hosts:      []string{"api.openai.com", "auth.openai.com", "chatgpt.com"},
		TokenPaths: []string{"auth.openai.com/oauth/token"},
		Rotates:    true,
		SecretEnv:  []string{"OPENAI_API_KEY"},
	},
	{
		Name: "gemini",
		Paths: []Path{
			{Rel: ".gemini", Secrets: []string{"oauth_creds.json", "google_accounts.json", "mcp-oauth-tokens.json", ".env"}},
			{Rel: ".config/gcloud"},
		},
		Env: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_GENAI_USE_VERTEXAI"},
		// Code Assist for a Google login, the Gemini API and Vertex AI's
		// global endpoint for a key, Google's token and userinfo endpoints.
		// Google keeps the refresh token on refresh.
		Hosts:      []string{"aiplatform.googleapis.com", "cloudcode-pa.googleapis.com", "generativelanguage.googleapis.com", "oauth2.googleapis.com", "www.googleapis.com"},
		TokenPaths: []string{"oauth2.googleapis.com/token"},
		SecretEnv:  []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"},
	},
	{
		Name:  "gh",
		Paths: []Path{{Rel: ".config/gh", Env: "GH_CONFIG_DIR"}},
		Env:   []string{"GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN", "GH_HOST"},
		// gh signs in as an OAuth app: its tokens do not expire and come
		// without a refresh token. It sends a github.com token to any
		// *.github.com name; uploads. takes release assets.
		Hosts:      []string{"api.github.com", "gist.github.com", "github.com", "uploads.github.com"},
		TokenPaths: []string{"github.com/login/oauth/access_token"},
		SecretEnv:  []string{"GH_ENTERPRISE_TOKEN", "GH_TOKEN", "GITHUB_ENTERPRISE_TOKEN", "GITHUB_TOKEN"},
	},
	{
		// Each line of a credential store names its own host (Field.Host).
		Name:  "git",
		Paths: []Path{{Rel: ".gitconfig"}, {Rel: ".config/git"}, {Rel: ".git-credentials"}},
		Env:   []string{"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"},
	},
	{
		Name: "kimi", Aliases: []string{"kimi-code"},
		Paths:      []Path{{Rel: ".kimi", Secrets: []string{"config.json", "config.toml", "credentials"}}},
		Env:        []string{"KIMI_API_KEY", "MOONSHOT_API_KEY", "KIMI_BASE_URL"},
		Hosts:      []string{"api.kimi.com", "api.moonshot.ai", "api.moonshot.cn", "auth.kimi.com"},
		TokenPaths: []string{"auth.kimi.com/api/oauth/token"},
		Rotates:    true,
		SecretEnv:  []string{"KIMI_API_KEY", "MOONSHOT_API_KEY"},
	},
	{
		Name:  "opencode",
		Paths: []Path{{Rel: ".config/opencode"}, {Rel: ".local/share/opencode", Secrets: []string{"auth.json", "mcp-auth.json"}}},
		Env:   []string{"OPENCODE_CONFIG"},
		// The providers opencode signs in to itself (Claude, ChatGPT,
		// GitHub Copilot) and its own Zen; a key for any other provider
		// stays a placeholder there.
		Hosts: []string{
			"api.anthropic.com", "api.github.com", "api.githubcopilot.com", "api.openai.com", "auth.openai.com",
			"chatgpt.com", "console.anthropic.com", "github.com", "opencode.ai", "platform.claude.com",
		},
		// api.github.com's is Copilot's exchange (opencode-copilot-auth):
		// it hands out a Copilot token for the GitHub one, which the
		// proxy masks as it masks a token endpoint's.
		TokenPaths: []string{
			"api.github.com/copilot_internal/v2/token",
			"auth.openai.com/oauth/token", "console.anthropic.com/v1/oauth/token",
			"github.com/login/oauth/access_token", "platform.claude.com/v1/oauth/token",
		},
		Rotates: true,
	},
}

// Names lists the canonical names of the registry, sorted.
func Names() []string {
	out := make([]string, len(Registry))
	for i, c := range Registry {
		out[i] = c.Name
	}
	return out
}

// Lookup returns the registry entry of a name or alias.
func Lookup(name string) (CLI, bool) {
	for _, c := range Registry {
		if c.Name == name || slices.Contains(c.Aliases, name) {
			return c, true
		}
	}
	return CLI{}, false
}

// Canonical maps a name or alias to its registry name.
func Canonical(name string) (string, bool) {
	c, ok := Lookup(name)
	return c.Name, ok
}

// ParseList parses the operator's --auth value: "all", "none" or a comma
// list of names and aliases. It returns canonical names, sorted, without
// duplicates.
func ParseList(s string) ([]string, error) {
	switch strings.TrimSpace(s) {
	case "all":
		return Names(), nil
	case "none":
		return []string{}, nil
	case "":
		return nil, fmt.Errorf("empty list (use all, none, or names from: %s)", strings.Join(Names(), ", "))
	}
	return canonicalize(strings.Split(s, ","))
}

// Narrow returns the names of requested that allowed permits. A nil
// requested means all of allowed; a name outside allowed is refused, never
// added.
func Narrow(allowed, requested []string) ([]string, error) {
	if requested == nil {
		return slices.Clone(allowed), nil
	}
	names, err := canonicalize(requested)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if !slices.Contains(allowed, n) {
			return nil, fmt.Errorf("credentials of %q are not enabled by the operator (enabled: %s)", n, list(allowed))
		}
	}
	return names, nil
}

func canonicalize(names []string) ([]string, error) {
	out := make([]string, 0, len(names))
	for _, n := range names {
		n = strings.TrimSpace(n)
		c, ok := Canonical(n)
		if !ok {
			return nil, fmt.Errorf("unknown CLI %q (known: %s)", n, strings.Join(Names(), ", "))
		}
		out = append(out, c)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// hostPath is where p lives on the host: the relocating variable when set,
// else under XDG_CONFIG_HOME or XDG_DATA_HOME when set for .config/ and
// .local/share/ paths, else under home.
func hostPath(p Path, home string, getenv func(string) string) string {
	if p.Env != "" {
		if v := getenv(p.Env); filepath.IsAbs(v) {
			return filepath.Clean(v)
		}
	}
	for _, x := range []struct{ prefix, env string }{
		{".config/", "XDG_CONFIG_HOME"},
		{".local/share/", "XDG_DATA_HOME"},
	} {
		if rest, ok := strings.CutPrefix(p.Rel, x.prefix); ok {
			if v := getenv(x.env); filepath.IsAbs(v) {
				return filepath.Join(v, rest)
			}
		}
	}
	return filepath.Join(home, p.Rel)
}
