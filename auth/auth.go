// Package auth owns the credential registry: which CLIs the jail knows, where
// each keeps its credentials under the operator's home, and which variables
// carry them. Exposing them inside the jail is the job of a later step; this
// package answers which names are valid and how a call narrows the
// operator's choice.
package auth

import (
	"fmt"
	"slices"
	"strings"
)

// CLI is one entry of the registry.
type CLI struct {
	Name    string
	Aliases []string
	Paths   []string // relative to the operator's home
	Env     []string // variables that carry its credentials
}

// Registry is sorted by Name.
var Registry = []CLI{
	{Name: "claude", Aliases: []string{"claude-code", "claudish"}, Paths: []string{".claude", ".claude.json"}, Env: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"}},
	{Name: "codex", Paths: []string{".codex"}, Env: []string{"OPENAI_API_KEY"}},
	{Name: "gemini", Paths: []string{".gemini"}, Env: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}},
	{Name: "gh", Paths: []string{".config/gh"}, Env: []string{"GH_TOKEN", "GITHUB_TOKEN"}},
	{Name: "git", Paths: []string{".gitconfig", ".config/git"}},
	{Name: "kimi", Aliases: []string{"kimi-code"}, Paths: []string{".kimi"}},
	{Name: "opencode", Paths: []string{".config/opencode", ".local/share/opencode"}},
}

// Names lists the canonical names of the registry, sorted.
func Names() []string {
	out := make([]string, len(Registry))
	for i, c := range Registry {
		out[i] = c.Name
	}
	return out
}

// Canonical maps a name or alias to its registry name.
func Canonical(name string) (string, bool) {
	for _, c := range Registry {
		if c.Name == name || slices.Contains(c.Aliases, name) {
			return c.Name, true
		}
	}
	return "", false
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
