package session

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
)

// credFile is where fakeHome puts the credential of p, relative to HOME:
// the file itself, a state directory's first secret, or a token in a
// directory shown whole.
func credFile(p auth.Path) string {
	switch {
	case strings.HasSuffix(p.Rel, ".json") || strings.HasPrefix(filepath.Base(p.Rel), ".git"):
		return p.Rel
	case len(p.Secrets) > 0:
		return p.Rel + "/" + p.Secrets[0]
	}
	return p.Rel + "/token"
}

// fakeHome is an operator's home holding fake credentials at every path of
// the registry, each file's content naming its path, and beside each state
// directory's secret a settings file that the session gets a copy of.
func fakeHome(t *testing.T) string {
	t.Helper()
	home := canonTempDir(t)
	for _, c := range auth.Registry {
		for _, p := range c.Paths {
			writeFile(t, filepath.Join(home, credFile(p)), "secret of "+credFile(p))
			if len(p.Secrets) > 0 {
				writeFile(t, filepath.Join(home, p.Rel, "settings"), "settings of "+p.Rel)
			}
		}
	}
	return home
}

// fakeEnv sets every credential variable of the registry, plus a secret
// that belongs to no CLI.
func fakeEnv() []string {
	env := []string{"PATH=/usr/bin:/bin", "AWS_SECRET_ACCESS_KEY=never"}
	for _, c := range auth.Registry {
		for _, k := range c.Env {
			env = append(env, k+"=value-of-"+k)
		}
	}
	return env
}

// fingerprint records content, mode and modification time of everything
// under dir, to prove the host's credentials were left byte-identical.
func fingerprint(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := d.Info()
		line := fmt.Sprintf("%s %v %d", p, fi.Mode(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			line += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out = append(out, line)
		return nil
	})
	return out
}

func credManager(t *testing.T, home string, enabled []string, backend func(jail.Backend) jail.Backend) *Manager {
	t.Helper()
	m, _ := newManager(t, func(c *Config) {
		c.Home = home
		c.Auth = enabled
		c.Environ = fakeEnv()
		if backend != nil {
			c.Backend = backend(c.Backend)
		}
	}, nil)
	return m
}

// attack is a shell line that tries to change every credential and prints
// what it managed. State directories are the session's own; only the
// secrets in them are the host's.
func attack() string {
	var b strings.Builder
	try := func(cmd string) {
		fmt.Fprintf(&b, "( %s ) 2>/dev/null && echo 'CHANGED: %s';\n", cmd, strings.ReplaceAll(cmd, "'", ""))
	}
	for _, c := range auth.Registry {
		for _, p := range c.Paths {
			if p.State {
				continue // a private copy: writable by design
			}
			f := "$HOME/" + credFile(p)
			for _, op := range []string{
				`echo x >> "%s"`, `echo x > "%s"`, `rm -f "%s"`, `mv "%s" "%s.moved"`,
				`chmod 777 "%s"`, `touch -d 2001-01-01 "%s"`, `ln "%s" "$HOME/hardlink"`, `truncate -s 0 "%s"`,
			} {
				try(strings.ReplaceAll(op, "%s", f))
			}
			if len(p.Secrets) == 0 && f != "$HOME/"+p.Rel {
				d := "$HOME/" + p.Rel
				for _, op := range []string{`rm -rf "%s"`, `mv "%s" "%s.moved"`, `chmod 777 "%s"`, `touch "%s/new"`} {
					try(strings.ReplaceAll(op, "%s", d))
				}
			}
		}
	}
	b.WriteString("true")
	return b.String()
}

func TestCredentialsReadOnly(t *testing.T) {
	home := fakeHome(t)
	before := fingerprint(t, home)
	m := credManager(t, home, auth.Names(), nil)
	s := openSession(t, m, "cred")

	// Readable at their home-relative places.
	var cat strings.Builder
	for _, c := range auth.Registry {
		for _, p := range c.Paths {
			fmt.Fprintf(&cat, `cat "$HOME/%s"; echo;`, credFile(p))
		}
	}
	res, err := s.Exec(t.Context(), Request{Command: cat.String()})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("reading credentials: %v %+v", err, res)
	}
	for _, c := range auth.Registry {
		for _, p := range c.Paths {
			if !strings.Contains(res.Stdout.Text, "secret of "+credFile(p)) {
				t.Errorf("%s not readable in the jail; output:\n%s\n%s", p.Rel, res.Stdout.Text, res.Stderr.Text)
			}
		}
	}

	// Every change fails.
	res, err = s.Exec(t.Context(), Request{Command: attack()})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Stdout.Text, "CHANGED") {
		t.Errorf("credentials changed from inside:\n%s", res.Stdout.Text)
	}
	if after := fingerprint(t, home); !slices.Equal(before, after) {
		t.Errorf("host credentials changed:\nbefore %v\nafter  %v", before, after)
	}

	// Variables of enabled CLIs come in; no other secret does.
	res, _ = s.Exec(t.Context(), Request{Command: "env"})
	for _, c := range auth.Registry {
		for _, k := range c.Env {
			if !strings.Contains(res.Stdout.Text, k+"=value-of-"+k+"\n") {
				t.Errorf("%s missing from the jail", k)
			}
		}
	}
	if strings.Contains(res.Stdout.Text, "AWS_SECRET_ACCESS_KEY") {
		t.Error("a secret of no enabled CLI reached the jail")
	}
}

func TestCredentialState(t *testing.T) {
	home := fakeHome(t)
	before := fingerprint(t, home)
	m := credManager(t, home, auth.Names(), nil)
	s := openSession(t, m, "state")
	res, _ := s.Exec(t.Context(), Request{Command: `cat $HOME/.claude.json; echo; echo rewritten > $HOME/.claude.json && cat $HOME/.claude.json; ls -A $HOME/.jail-mcp/state | wc -l`})
	if res.ExitCode != 0 || res.Stdout.Text != "secret of .claude.json\nrewritten\n0\n" {
		t.Errorf("state copy: %+v %q", res, res.Stderr.Text)
	}
	// State directories are the session's own, seeded with the host's
	// top-level files; only the secrets in them are the host's, read-only.
	res, _ = s.Exec(t.Context(), Request{Command: `cd $HOME/.codex && cat settings && echo new > sessions.db && mkdir -p tmp && echo changed > settings && cat auth.json && echo; echo x > auth.json || echo auth-read-only; rm auth.json || echo auth-kept`})
	if res.Stdout.Text != "settings of .codexsecret of .codex/auth.json\nauth-read-only\nauth-kept\n" {
		t.Errorf("codex state directory: %q %q", res.Stdout.Text, res.Stderr.Text)
	}
	// The copy persists in the session, never flows back, and is hidden
	// from a call that narrows claude away.
	res, _ = s.Exec(t.Context(), Request{Command: `cat $HOME/.claude.json $HOME/.codex/sessions.db $HOME/.codex/settings`})
	if res.Stdout.Text != "rewritten\nnew\nchanged\n" {
		t.Errorf("state copy did not persist: %q", res.Stdout.Text)
	}
	res, _ = s.Exec(t.Context(), Request{Command: `cat $HOME/.claude.json $HOME/.claude/.credentials.json $HOME/.claude/settings; echo "[$ANTHROPIC_API_KEY]"; cat $HOME/.config/gh/token`, Auth: []string{"gh"}})
	if strings.Contains(res.Stdout.Text, "rewritten") || strings.Contains(res.Stdout.Text, "secret of .claude") || !strings.Contains(res.Stdout.Text, "[]") {
		t.Errorf("narrowed call sees claude's credentials: %q", res.Stdout.Text)
	}
	if !strings.Contains(res.Stdout.Text, "secret of .config/gh/token") {
		t.Errorf("narrowed call lost gh: %q", res.Stdout.Text)
	}
	if after := fingerprint(t, home); !slices.Equal(before, after) {
		t.Errorf("host changed:\nbefore %v\nafter  %v", before, after)
	}
	// A new session starts from the host's file again.
	s2 := openSession(t, m, "state2")
	res, _ = s2.Exec(t.Context(), Request{Command: `cat $HOME/.claude.json`})
	if res.Stdout.Text != "secret of .claude.json" {
		t.Errorf("fresh session's state copy: %q", res.Stdout.Text)
	}
}

func TestCredentialNarrowing(t *testing.T) {
	home := fakeHome(t)
	for _, tc := range []struct {
		name      string
		enabled   []string
		requested []string
		visible   []string // CLIs whose token the call reads
		refused   string
	}{
		{name: "all", enabled: auth.Names(), requested: nil, visible: auth.Names()},
		{name: "none", enabled: []string{}, requested: nil, visible: nil},
		{name: "operator list", enabled: []string{"codex", "gh"}, requested: nil, visible: []string{"codex", "gh"}},
		{name: "call narrows", enabled: auth.Names(), requested: []string{"gh"}, visible: []string{"gh"}},
		{name: "call narrows to nothing", enabled: auth.Names(), requested: []string{}, visible: nil},
		{name: "alias", enabled: auth.Names(), requested: []string{"claude-code"}, visible: []string{"claude"}},
		{name: "widening refused", enabled: []string{"gh"}, requested: []string{"codex"}, refused: "not enabled by the operator"},
		{name: "unknown refused", enabled: auth.Names(), requested: []string{"nope"}, refused: "unknown CLI"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := credManager(t, home, tc.enabled, nil)
			s := openSession(t, m, "n")
			var probe strings.Builder
			for _, c := range auth.Registry {
				fmt.Fprintf(&probe, `cat "$HOME/%s" 2>/dev/null && echo;`, credFile(c.Paths[0]))
			}
			probe.WriteString(`env | grep -c value-of- || true`)
			res, err := s.Exec(t.Context(), Request{Command: probe.String(), Auth: tc.requested})
			if tc.refused != "" {
				if _, ok := err.(*InputError); !ok || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("err = %v, want an InputError with %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range auth.Names() {
				c, _ := auth.Lookup(name)
				seen := strings.Contains(res.Stdout.Text, "secret of "+credFile(c.Paths[0]))
				if want := slices.Contains(tc.visible, name); seen != want {
					t.Errorf("%s visible %t, want %t; output %q", name, seen, want, res.Stdout.Text)
				}
			}
			if len(tc.visible) == 0 && !strings.HasSuffix(res.Stdout.Text, "0\n") {
				t.Errorf("credential variables leaked: %q", res.Stdout.Text)
			}
		})
	}
}

func TestCredentialMountPointPlanted(t *testing.T) {
	home := fakeHome(t)
	outside := canonTempDir(t)
	writeFile(t, filepath.Join(outside, "keep"), "keep")
	before := tree(t, outside)
	m := credManager(t, home, []string{"codex", "gh"}, nil)
	s := openSession(t, m, "plant")
	// A previous command left symlinks where credentials go.
	symlink(t, outside, filepath.Join(s.Path, ".codex"))
	os.RemoveAll(filepath.Join(s.Path, ".config"))
	symlink(t, outside, filepath.Join(s.Path, ".config"))
	res, err := s.Exec(t.Context(), Request{Command: "cat $HOME/.codex/auth.json $HOME/.config/gh/token"})
	if err != nil || res.ExitCode != 0 || res.Stdout.Text != "secret of .codex/auth.jsonsecret of .config/gh/token" {
		t.Errorf("credentials over planted symlinks: %v %+v %q", err, res, res.Stderr.Text)
	}
	if after := tree(t, outside); !slices.Equal(before, after) {
		t.Errorf("outside changed: %v -> %v", before, after)
	}
}

// copying is the bwrap backend made to take the copy path of backends that
// cannot bind host files (sandbox-exec), so that path is tested on Linux.
type copying struct{ jail.Backend }

func (copying) BindsPaths() bool { return false }

func TestCredentialCopies(t *testing.T) {
	home := fakeHome(t)
	before := fingerprint(t, home)
	outside := canonTempDir(t)
	m := credManager(t, home, auth.Names(), func(b jail.Backend) jail.Backend { return copying{b} })
	s := openSession(t, m, "copy")
	skeleton := tree(t, s.Path)
	symlink(t, outside, filepath.Join(s.Path, ".codex")) // reserved place: gives way

	for _, tc := range []struct {
		name    string
		command string
		cancel  bool
	}{
		{name: "succeeds", command: "cat $HOME/.codex/auth.json $HOME/.config/gh/token $HOME/.claude.json"},
		{name: "fails", command: "cat $HOME/.codex/auth.json; exit 3"},
		{name: "times out", command: "cat $HOME/.codex/auth.json; sleep 30"},
		{name: "cancelled", command: "cat $HOME/.codex/auth.json; sleep 30", cancel: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req := Request{Command: tc.command}
			if tc.name == "times out" {
				req.Timeout = 500 * time.Millisecond
			}
			if tc.cancel {
				time.AfterFunc(500*time.Millisecond, cancel)
			}
			res, err := s.Exec(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(res.Stdout.Text, "secret of .codex/auth.json") {
				t.Errorf("copy not readable during the call: %q %q", res.Stdout.Text, res.Stderr.Text)
			}
			got := tree(t, s.Path)
			got = slices.DeleteFunc(got, func(p string) bool { return strings.HasPrefix(p, ".jail-mcp") })
			want := slices.DeleteFunc(slices.Clone(skeleton), func(p string) bool { return strings.HasPrefix(p, ".jail-mcp") })
			if !slices.Equal(got, want) {
				t.Errorf("copies left in the jail after the call:\n got %v\nwant %v", got, want)
			}
		})
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("copied through a planted symlink: %v", entries)
	}
	// State written during a call is kept for the session, not the host.
	s.Exec(t.Context(), Request{Command: "echo mine > $HOME/.claude.json"})
	res, _ := s.Exec(t.Context(), Request{Command: "cat $HOME/.claude.json"})
	if res.Stdout.Text != "mine\n" {
		t.Errorf("state copy not kept across calls: %q", res.Stdout.Text)
	}
	if after := fingerprint(t, home); !slices.Equal(before, after) {
		t.Errorf("host changed:\nbefore %v\nafter  %v", before, after)
	}
}
