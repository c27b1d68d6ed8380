package auth

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestRegistrySorted(t *testing.T) {
	if !slices.IsSortedFunc(Registry, func(a, b CLI) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("Registry is not sorted by name: %v", Names())
	}
	seen := map[string]bool{}
	for _, c := range Registry {
		for _, n := range append([]string{c.Name}, c.Aliases...) {
			if seen[n] {
				t.Errorf("name %q appears twice", n)
			}
			seen[n] = true
		}
	}
}

func TestParseList(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "all", want: Names()},
		{in: "none", want: []string{}},
		{in: "claude", want: []string{"claude"}},
		{in: "claude-code, gh,claude", want: []string{"claude", "gh"}},
		{in: "kimi-code,claudish", want: []string{"claude", "kimi"}},
		{in: "", wantErr: "empty list"},
		{in: "nope", wantErr: `unknown CLI "nope" (known: claude, codex`},
		{in: "gh,", wantErr: `unknown CLI ""`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseList(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseList(%q) error %v, want %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("ParseList(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestNarrow(t *testing.T) {
	allowed := []string{"claude", "gh"}
	tests := []struct {
		name      string
		requested []string
		want      []string
		wantErr   string
	}{
		{name: "nil keeps all", requested: nil, want: allowed},
		{name: "empty means none", requested: []string{}, want: []string{}},
		{name: "subset", requested: []string{"gh"}, want: []string{"gh"}},
		{name: "alias", requested: []string{"claude-code"}, want: []string{"claude"}},
		{name: "widening refused", requested: []string{"codex"}, wantErr: `credentials of "codex" are not enabled by the operator (enabled: claude, gh)`},
		{name: "unknown refused", requested: []string{"x"}, wantErr: `unknown CLI "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Narrow(allowed, tt.requested)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("Narrow = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if _, err := Narrow([]string{}, []string{"gh"}); err == nil || !strings.Contains(err.Error(), "enabled: none") {
		t.Errorf("widening from none: %v", err)
	}
}

func TestResolve(t *testing.T) {
	home := t.TempDir()
	xdg := t.TempDir()
	codexHome := t.TempDir()
	mk := func(path string, dir bool) {
		t.Helper()
		if dir {
			if err := os.MkdirAll(path, 0o700); err != nil {
				t.Fatal(err)
			}
			return
		}
		os.MkdirAll(filepath.Dir(path), 0o700)
		if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mk(filepath.Join(home, ".claude"), true)
	mk(filepath.Join(home, ".claude.json"), false)
	mk(filepath.Join(home, ".config/gh"), true) // hidden by XDG_CONFIG_HOME
	mk(filepath.Join(xdg, "gh"), true)
	mk(filepath.Join(codexHome, "auth.json"), false)
	mk(filepath.Join(home, ".gitconfig"), false)
	os.Symlink(filepath.Join(home, ".gitconfig"), filepath.Join(home, ".git-credentials"))
	os.Symlink("/nonexistent", filepath.Join(home, ".kimi"))

	env := map[string]string{
		"XDG_CONFIG_HOME": xdg,
		"CODEX_HOME":      codexHome,
		"GH_TOKEN":        "t",
		"OPENAI_API_KEY":  "k",
	}
	got := Resolve(Names(), home, func(k string) string { return env[k] })
	byName := map[string]Exposure{}
	for _, e := range got {
		byName[e.Name] = e
	}
	check := func(name string, wantItems []Item, wantEnv []string) {
		t.Helper()
		e := byName[name]
		if !reflect.DeepEqual(e.Items, wantItems) || !slices.Equal(e.EnvNames(), wantEnv) {
			t.Errorf("%s: items %+v env %v; want %+v %v", name, e.Items, e.EnvNames(), wantItems, wantEnv)
		}
	}
	canon := func(p string) string {
		c, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	check("claude", []Item{
		{Host: canon(filepath.Join(home, ".claude")), Rel: ".claude", Dir: true, State: true, Secrets: []Secret{}},
		{Host: canon(filepath.Join(home, ".claude.json")), Rel: ".claude.json", State: true},
	}, []string{})
	check("codex", []Item{{Host: canon(codexHome), Rel: ".codex", Dir: true, State: true,
		Secrets: []Secret{{Name: "auth.json", Host: canon(filepath.Join(codexHome, "auth.json"))}}}}, []string{"OPENAI_API_KEY"})
	check("gh", []Item{{Host: canon(filepath.Join(xdg, "gh")), Rel: ".config/gh", Dir: true}}, []string{"GH_TOKEN"})
	check("git", []Item{
		{Host: canon(filepath.Join(home, ".gitconfig")), Rel: ".gitconfig"},
		{Host: canon(filepath.Join(home, ".gitconfig")), Rel: ".git-credentials"},
	}, []string{})
	if _, ok := byName["kimi"]; ok {
		t.Errorf("a dangling symlink was exposed: %+v", byName["kimi"])
	}
	if _, ok := byName["opencode"]; ok {
		t.Errorf("opencode has nothing on this host but was listed")
	}
	for _, e := range got {
		for _, kv := range e.Env {
			if !strings.Contains(kv, "=") {
				t.Errorf("env %q has no value", kv)
			}
		}
	}
	if len(Resolve(nil, home, func(string) string { return "" })) != 0 {
		t.Error("no names, yet something exposed")
	}
	if len(Resolve(Names(), "", func(string) string { return "" })) != 0 {
		t.Error("no home, yet something exposed")
	}
}

// TestRegistryMask: what --mask reads from the registry holds together:
// hosts are exact lower-case names, a token endpoint is on one of its
// CLI's hosts, and a secret variable is one of its CLI's variables.
func TestRegistryMask(t *testing.T) {
	for _, c := range Registry {
		for _, h := range c.Hosts {
			if h != strings.ToLower(h) || h == "" || strings.ContainsAny(h, "/:*") {
				t.Errorf("%s: host %q is not a lower-case host name", c.Name, h)
			}
		}
		for _, tp := range c.TokenPaths {
			host, path, ok := strings.Cut(tp, "/")
			if !ok || path == "" || !slices.Contains(c.Hosts, host) {
				t.Errorf("%s: token path %q is not host/path on one of its hosts", c.Name, tp)
			}
		}
		for _, k := range c.SecretEnv {
			if !slices.Contains(c.Env, k) {
				t.Errorf("%s: secret variable %s is not in its Env", c.Name, k)
			}
		}
	}
}
