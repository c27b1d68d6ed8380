package session

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/creds"
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

// credManager returns a manager over the named real backend, wrapped by
// wrap when set, with the credentials of home and enabled CLIs.
func credManager(t *testing.T, backend, home string, enabled []string, wrap func(jail.Backend) jail.Backend) *Manager {
	t.Helper()
	m, _ := newManagerOn(t, backend, func(c *Config) {
		c.Home = home
		c.Auth = enabled
		c.Environ = fakeEnv()
		if wrap != nil {
			c.Backend = wrap(c.Backend)
		}
	}, nil)
	return m
}

// withoutMeta is fingerprint lines without modification times, and
// without modes when dropMode.
func withoutMeta(lines []string, dropMode bool) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		f := strings.Fields(l) // path mode mtime [sum]
		f = slices.Delete(f, 2, 3)
		if dropMode {
			f = slices.Delete(f, 1, 2)
		}
		out = append(out, strings.Join(f, " "))
	}
	return out
}

// hostUnchanged fails t if the host's credentials under home differ from
// before. attacked says the command tried to change their metadata
// (chmod, utime): bwrap denies that like any write; landlock declares
// that it cannot (promise 1 not kept), so there content and kind must be
// unchanged, modes too when the server is root (seccomp denies chmod to
// root), and a metadata change is logged.
func hostUnchanged(t *testing.T, m *Manager, home string, before []string, attacked bool) {
	t.Helper()
	after := fingerprint(t, home)
	b := m.Config().Backend
	if attacked && b.Name() == "landlock" {
		declared := false
		for _, p := range b.Guarantees().NotKept {
			declared = declared || (p.ID == 1 && strings.Contains(p.Note, "utime"))
		}
		if !declared {
			t.Errorf("landlock lets utime reach host credentials but does not declare promise 1 not kept")
		}
		var changed []string
		for i := range min(len(before), len(after)) {
			if before[i] != after[i] {
				changed = append(changed, strings.Fields(before[i])[0])
			}
		}
		if len(changed) > 0 {
			t.Logf("metadata of host credentials changed from inside (declared by landlock): %v", changed)
		}
		dropMode := os.Geteuid() != 0
		before, after = withoutMeta(before, dropMode), withoutMeta(after, dropMode)
	}
	if !slices.Equal(before, after) {
		t.Errorf("host credentials changed:\nbefore %v\nafter  %v", before, after)
	}
}

// attempt is one try at changing a credential from inside the jail.
type attempt struct {
	op   string // the template, %s the target and %n a number
	cmd  string
	kind string // content, create, link, mode, time, or place (the place itself: replaced, moved, removed)
	// onLink: the target is the credential's place itself, which under
	// landlock is a link the session put in the jail, not a host file.
	onLink bool
}

var fileAttempts = []struct{ kind, op string }{
	{"content", `echo x >> "%s"`},
	{"content", `echo x > "%s"`},
	{"content", `truncate -s 0 "%s"`},
	{"content", `exec 3< "%s" && echo x > /proc/self/fd/3`},
	{"mode", `chmod 777 "%s"`},
	{"time", `touch -d 2001-01-01 "%s"`},
	{"link", `ln "%s" "$HOME/.tmp/hardlink%n"`},
	// Last: under landlock they take the place's link away, and what
	// followed would hit the jail rather than the credential.
	{"place", `printf x > "$HOME/.tmp/new%n" && mv -f "$HOME/.tmp/new%n" "%s"`},
	{"place", `mv "%s" "%s.moved"`},
	{"place", `rm -f "%s"`},
}

var dirAttempts = []struct{ kind, op string }{
	{"mode", `chmod 777 "%s"`},
	{"create", `touch "%s/new"`},
	{"create", `mkdir "%s/newdir"`},
	{"place", `mv "%s" "%s.moved"`},
	{"place", `rm -rf "%s"`},
}

// attempts lists every change tried on every credential, those on one
// credential in the order above. State files are left out: they are the
// session's own copies, writable by design; in state directories only
// the secrets are the host's.
func attempts() []attempt {
	var out []attempt
	add := func(kind, op, target string, onLink bool) {
		n := strconv.Itoa(len(out))
		cmd := strings.NewReplacer("%s", target, "%n", n).Replace(op)
		out = append(out, attempt{op: op, cmd: cmd, kind: kind, onLink: onLink})
	}
	for _, c := range auth.Registry {
		for _, p := range c.Paths {
			if p.State {
				continue
			}
			f := "$HOME/" + credFile(p)
			for _, a := range fileAttempts {
				add(a.kind, a.op, f, credFile(p) == p.Rel || len(p.Secrets) > 0)
			}
			if len(p.Secrets) == 0 && f != "$HOME/"+p.Rel {
				for _, a := range dirAttempts {
					add(a.kind, a.op, "$HOME/"+p.Rel, true)
				}
			}
		}
	}
	return out
}

// attack is a shell line that tries every attempt and prints which
// succeeded.
func attack(as []attempt) string {
	var b strings.Builder
	for i, a := range as {
		fmt.Fprintf(&b, "( %s ) 2>/dev/null && echo 'CHANGED %d';\n", a.cmd, i)
	}
	b.WriteString("true")
	return b.String()
}

// succeeded is the attempts that attack's output says succeeded.
func succeeded(t *testing.T, out string, as []attempt) []attempt {
	t.Helper()
	var done []attempt
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		i, err := strconv.Atoi(strings.TrimPrefix(line, "CHANGED "))
		if err != nil || i < 0 || i >= len(as) {
			t.Fatalf("unexpected attack output %q", line)
		}
		done = append(done, as[i])
	}
	return done
}

// mayChange reports whether a may succeed under backend with the host
// left as hostUnchanged demands.
func mayChange(backend string, a attempt) bool {
	if backend != "landlock" {
		return false // bwrap: read-only binds, nothing gives
	}
	switch a.kind {
	case "place", "link":
		// Only the jail's own link goes, or is linked again (renames
		// and links across the jail's directories work); the host file
		// stays.
		return a.onLink
	case "time":
		// Landlock does not cover utime (declared: promise 1 not kept).
		return true
	case "mode":
		// Nor chmod, which seccomp denies only to root (declared).
		return os.Geteuid() != 0
	}
	return false
}

func TestCredentialsReadOnly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		home := fakeHome(t)
		before := fingerprint(t, home)
		m := credManager(t, backend, home, auth.Names(), nil)
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
		as := attempts()
		res, err = s.Exec(t.Context(), Request{Command: attack(as)})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range succeeded(t, res.Stdout.Text, as) {
			if !mayChange(backend, a) {
				t.Errorf("credential changed from inside: %s", a.cmd)
			}
		}
		hostUnchanged(t, m, home, before, true)

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
	})
}

func TestCredentialState(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		home := fakeHome(t)
		before := fingerprint(t, home)
		m := credManager(t, backend, home, auth.Names(), nil)
		s := openSession(t, m, "state")
		stateProbe := `ls -A $HOME/.jail-mcp/state | wc -l` // bwrap: hidden behind an empty tmpfs
		if backend == "landlock" {
			// Not hidden, but every copy has moved to its place for the call.
			stateProbe = `find $HOME/.jail-mcp/state ! -type d | wc -l`
		}
		res, _ := s.Exec(t.Context(), Request{Command: `cat $HOME/.claude.json; echo; echo rewritten > $HOME/.claude.json && cat $HOME/.claude.json; ` + stateProbe})
		if res.ExitCode != 0 || res.Stdout.Text != "secret of .claude.json\nrewritten\n0\n" {
			t.Errorf("state copy: %+v %q", res, res.Stderr.Text)
		}
		// State directories are the session's own, seeded with the host's
		// top-level files; only the secrets in them are the host's, read-only.
		res, _ = s.Exec(t.Context(), Request{Command: `cd $HOME/.codex && cat settings && echo new > sessions.db && mkdir -p tmp && echo changed > settings && cat auth.json && echo; echo x > auth.json || echo auth-read-only; rm auth.json || echo auth-kept`})
		want := "settings of .codexsecret of .codex/auth.json\nauth-read-only\nauth-kept\n"
		if backend == "landlock" {
			// The secret is a link in the session's own directory: the
			// command can remove the link, never the host file.
			want = "settings of .codexsecret of .codex/auth.json\nauth-read-only\n"
		}
		if res.Stdout.Text != want {
			t.Errorf("codex state directory: %q %q", res.Stdout.Text, res.Stderr.Text)
		}
		// The copy persists in the session, never flows back, and is hidden
		// from a call that narrows claude away; the secret is there again.
		res, _ = s.Exec(t.Context(), Request{Command: `cat $HOME/.claude.json $HOME/.codex/sessions.db $HOME/.codex/settings $HOME/.codex/auth.json`})
		if res.Stdout.Text != "rewritten\nnew\nchanged\nsecret of .codex/auth.json" {
			t.Errorf("state copy did not persist: %q", res.Stdout.Text)
		}
		res, _ = s.Exec(t.Context(), Request{Command: `cat $HOME/.claude.json $HOME/.claude/.credentials.json $HOME/.claude/settings; echo "[$ANTHROPIC_API_KEY]"; cat $HOME/.config/gh/token`, Auth: []string{"gh"}})
		if strings.Contains(res.Stdout.Text, "rewritten") || strings.Contains(res.Stdout.Text, "secret of .claude") || !strings.Contains(res.Stdout.Text, "[]") {
			t.Errorf("narrowed call sees claude's credentials: %q", res.Stdout.Text)
		}
		if !strings.Contains(res.Stdout.Text, "secret of .config/gh/token") {
			t.Errorf("narrowed call lost gh: %q", res.Stdout.Text)
		}
		hostUnchanged(t, m, home, before, false)
		// A new session starts from the host's file again.
		s2 := openSession(t, m, "state2")
		res, _ = s2.Exec(t.Context(), Request{Command: `cat $HOME/.claude.json`})
		if res.Stdout.Text != "secret of .claude.json" {
			t.Errorf("fresh session's state copy: %q", res.Stdout.Text)
		}
	})
}

func TestCredentialNarrowing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
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
				m := credManager(t, backend, home, tc.enabled, nil)
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
	})
}

func TestCredentialMountPointPlanted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		home := fakeHome(t)
		outside := canonTempDir(t)
		writeFile(t, filepath.Join(outside, "keep"), "keep")
		before := tree(t, outside)
		m := credManager(t, backend, home, []string{"codex", "gh"}, nil)
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
		// The planted symlinks gave way to real directories.
		if fi, err := os.Lstat(filepath.Join(s.Path, ".config")); err != nil || !fi.IsDir() {
			t.Errorf(".config after the call: %v, want a directory", err)
		}
		for _, rel := range []string{".codex", ".config/gh"} {
			fi, err := os.Lstat(filepath.Join(s.Path, rel))
			switch backend {
			case "bwrap":
				// Mount points, made real directories, stay in the jail.
				if err != nil || !fi.IsDir() {
					t.Errorf("%s after the call: %v, want the mount point, a directory", rel, err)
				}
			case "landlock":
				// Placed: .codex the state directory, .config/gh a link
				// to the host's, kept for the next call.
				want := map[string]fs.FileMode{".codex": fs.ModeDir, ".config/gh": fs.ModeSymlink}[rel]
				if err != nil || fi.Mode().Type() != want {
					t.Errorf("%s after the call: %v %v, want %v", rel, err, fi, want)
				}
			}
		}
		// Gone once a call without them took them out.
		unplace(t, s)
		if backend == "landlock" {
			for _, rel := range []string{".codex", ".config/gh"} {
				if fi, err := os.Lstat(filepath.Join(s.Path, rel)); err == nil {
					t.Errorf("%s left in the jail after a call without credentials: %v", rel, fi.Mode())
				}
			}
		}
		if after := tree(t, outside); !slices.Equal(before, after) {
			t.Errorf("outside changed: %v -> %v", before, after)
		}
	})
}

// unplace runs a call that shows no credential: under landlock it takes
// every credential placed in the jail out first.
func unplace(t *testing.T, s *Session) {
	t.Helper()
	if res, err := s.Exec(t.Context(), Request{Command: "true", Auth: []string{}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("a call without credentials: %v %+v", err, res)
	}
}

// jailTree is tree of the jail without the server's .jail-mcp and without
// what skip says is the command's own.
func jailTree(t *testing.T, s *Session, skip func(line string) bool) []string {
	t.Helper()
	return slices.DeleteFunc(sorted(tree(t, s.Path)), func(l string) bool {
		return strings.HasPrefix(l, ".jail-mcp") || (skip != nil && skip(l))
	})
}

// links lists the symlinks anywhere in dir.
func links(t *testing.T, dir string) []string {
	t.Helper()
	return slices.DeleteFunc(tree(t, dir), func(l string) bool { return !strings.Contains(l, " -> ") })
}

// TestCredentialLinks: under landlock each credential is a link to the
// host path at its home-relative place (a state directory is the
// session's own copy, the secrets in it links), readable; no write through
// it reaches the host; the next call that shows it finds it as placed,
// whatever a command did to it; a call that does not show it finds
// nothing of it in the jail.
func TestCredentialLinks(t *testing.T) {
	home := fakeHome(t)
	before := fingerprint(t, home)
	m := credManager(t, "landlock", home, auth.Names(), nil)
	s := openSession(t, m, "links")

	var probe, want strings.Builder
	for _, e := range m.Exposed() {
		for _, it := range e.Items {
			switch {
			case !it.State:
				fmt.Fprintf(&probe, `readlink "$HOME/%s";`, it.Rel)
				fmt.Fprintf(&want, "%s\n", it.Host)
			case it.Dir:
				fmt.Fprintf(&probe, `[ -d "$HOME/%[1]s" ] && [ ! -L "$HOME/%[1]s" ] && echo "%[1]s: own directory";`, it.Rel)
				fmt.Fprintf(&want, "%s: own directory\n", it.Rel)
				for _, sec := range it.Secrets {
					fmt.Fprintf(&probe, `readlink "$HOME/%s/%s";`, it.Rel, sec.Name)
					fmt.Fprintf(&want, "%s\n", sec.Host)
				}
			default:
				fmt.Fprintf(&probe, `[ -f "$HOME/%[1]s" ] && [ ! -L "$HOME/%[1]s" ] && echo "%[1]s: own file";`, it.Rel)
				fmt.Fprintf(&want, "%s: own file\n", it.Rel)
			}
		}
	}
	for _, c := range auth.Registry {
		for _, p := range c.Paths {
			fmt.Fprintf(&probe, `cat "$HOME/%s"; echo;`, credFile(p))
			fmt.Fprintf(&want, "secret of %s\n", credFile(p))
		}
	}
	shown := func(when string) {
		t.Helper()
		res, err := s.Exec(t.Context(), Request{Command: probe.String()})
		if err != nil || res.ExitCode != 0 || res.Stdout.Text != want.String() {
			t.Fatalf("credentials during the call %s: %v %+v\n got %q\nwant %q", when, err, res, res.Stdout.Text, want.String())
		}
	}
	// A call that shows none takes every place out of the jail first.
	gone := func(when string, own func(string) bool) {
		t.Helper()
		res, err := s.Exec(t.Context(), Request{Command: "true", Auth: []string{}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("a call without credentials %s: %v %+v", when, err, res)
		}
		if got := jailTree(t, s, own); !slices.Equal(got, skeletonTree) {
			t.Errorf("%s, a call without credentials finds %q, want the skeleton", when, got)
		}
		if l := slices.DeleteFunc(links(t, s.Path), func(l string) bool { return own != nil && own(l) }); len(l) > 0 {
			t.Errorf("%s, a call without credentials finds links %q", when, l)
		}
	}
	shown("first")
	// The places stay for the next call of the same policy.
	if l := links(t, s.Path); len(l) == 0 {
		t.Errorf("no credential link in the jail between two calls that show them")
	}
	shown("second")
	gone("after the calls", nil)

	// Every kind of write, one call each: none reaches the host.
	as := attempts()
	var ops []string
	for _, a := range as {
		if !slices.Contains(ops, a.op) {
			ops = append(ops, a.op)
		}
	}
	for _, op := range ops {
		group := slices.DeleteFunc(slices.Clone(as), func(a attempt) bool { return a.op != op })
		res, err := s.Exec(t.Context(), Request{Command: attack(group)})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range succeeded(t, res.Stdout.Text, group) {
			if !mayChange("landlock", a) {
				t.Errorf("credential changed from inside: %s", a.cmd)
			}
		}
		// The next call finds every credential as placed: what the
		// command changed was placed again.
		shown("after " + op)
		// What the command made of its own (a moved link, scratch files)
		// may stay; the places themselves go.
		own := func(l string) bool {
			return (strings.HasPrefix(l, ".tmp/") && l != ".tmp/") || strings.Contains(l, ".moved")
		}
		gone("after "+op, own)
	}
	hostUnchanged(t, m, home, before, true)

	// Control: the same attempts on the jail's own files succeed, so the
	// failures above are the jail's doing, not broken command lines (but
	// chmod, which seccomp denies to a root server everywhere).
	var ctl []attempt
	for i, a := range slices.Concat(fileAttempts, dirAttempts) {
		target := fmt.Sprintf("$HOME/.tmp/ctl%d", i)
		mk := `printf c > "` + target + `"`
		if i >= len(fileAttempts) {
			mk = `mkdir "` + target + `"`
		}
		cmd := strings.NewReplacer("%s", target, "%n", fmt.Sprintf("ctl%d", i)).Replace(a.op)
		ctl = append(ctl, attempt{op: a.op, cmd: mk + " && " + cmd, kind: a.kind})
	}
	res, err := s.Exec(t.Context(), Request{Command: attack(ctl)})
	if err != nil {
		t.Fatal(err)
	}
	done := succeeded(t, res.Stdout.Text, ctl)
	for _, a := range ctl {
		if want := a.kind != "mode" || os.Geteuid() != 0; slices.Contains(done, a) != want {
			t.Errorf("control %s: succeeded %t, want %t", a.cmd, !want, want)
		}
	}
}

// TestCredentialConcurrentCalls: calls of one session that run at once
// all see the credentials they enabled; the end of one takes nothing from
// another still running; under landlock, a later call that shows none
// finds nothing of them in the jail. State written by either is kept.
func TestCredentialConcurrentCalls(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		for _, firstEnds := range []bool{true, false} {
			t.Run(fmt.Sprintf("first ends first %t", firstEnds), func(t *testing.T) {
				home := fakeHome(t)
				before := fingerprint(t, home)
				m := credManager(t, backend, home, auth.Names(), nil)
				s := openSession(t, m, "conc")
				flag := func(name string) string { return filepath.Join(s.Path, ".tmp", name) }
				waitFor := func(name string) {
					t.Helper()
					for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
						if _, err := os.Lstat(flag(name)); err == nil {
							return
						}
					}
					t.Fatalf("%s never appeared", name)
				}
				const read = `cat "$HOME/.codex/auth.json" "$HOME/.config/gh/token"; echo;`
				script := func(me string) string {
					return read + `touch "$HOME/.tmp/` + me + `-started"; ` +
						`while [ ! -e "$HOME/.tmp/` + me + `-go" ]; do sleep 0.02; done; ` +
						read + `echo ` + me + ` > "$HOME/.codex/` + me + `-wrote"`
				}
				type outcome struct {
					res *Result
					err error
				}
				run := func(me string, names []string) chan outcome {
					ch := make(chan outcome, 1)
					go func() {
						res, err := s.Exec(context.Background(), Request{Command: script(me), Auth: names, Timeout: 20 * time.Second})
						ch <- outcome{res, err}
					}()
					return ch
				}
				done := map[string]chan outcome{}
				// Never leave a call waiting, whatever fails.
				defer func() {
					for name, ch := range done {
						os.WriteFile(flag(name+"-go"), nil, 0o600)
						select {
						case <-ch:
						case <-time.After(30 * time.Second):
							t.Errorf("call %s never returned", name)
						}
					}
				}()
				done["a"] = run("a", nil) // every CLI
				waitFor("a-started")
				done["b"] = run("b", []string{"codex", "gh"})
				waitFor("b-started")
				first, second := "a", "b"
				if !firstEnds {
					first, second = "b", "a"
				}
				check := func(name string, o outcome) {
					t.Helper()
					if o.err != nil || o.res.ExitCode != 0 {
						t.Fatalf("call %s: %v %+v", name, o.err, o.res)
					}
					const twice = "secret of .codex/auth.jsonsecret of .config/gh/token\n" + "secret of .codex/auth.jsonsecret of .config/gh/token\n"
					if o.res.Stdout.Text != twice || o.res.Stderr.Text != "" {
						t.Errorf("call %s read %q %q, want the credentials before and after the other call ended", name, o.res.Stdout.Text, o.res.Stderr.Text)
					}
				}
				os.WriteFile(flag(first+"-go"), nil, 0o600)
				check(first, <-done[first])
				delete(done, first)
				if backend == "landlock" {
					// What the running call holds is still placed; what only
					// the ended call held is gone.
					isLink := func(rel string) bool {
						fi, err := os.Lstat(filepath.Join(s.Path, rel))
						return err == nil && fi.Mode()&fs.ModeSymlink != 0
					}
					// What the running call holds is placed; what only the
					// ended one held stays too, for the session's next call.
					for _, rel := range []string{".codex/auth.json", ".config/gh", ".gitconfig"} {
						if got, want := isLink(rel), true; got != want {
							t.Errorf("after call %s ended, %s placed %t, want %t", first, rel, got, want)
						}
					}
				}
				os.WriteFile(flag(second+"-go"), nil, 0o600)
				check(second, <-done[second])
				delete(done, second)
				// A call that shows none takes the places out first.
				if res, err := s.Exec(t.Context(), Request{Command: "true", Auth: []string{}}); err != nil || res.ExitCode != 0 {
					t.Fatalf("a call without credentials: %v %+v", err, res)
				}
				if backend == "landlock" {
					own := func(l string) bool { return strings.HasPrefix(l, ".tmp/") && l != ".tmp/" }
					if got := jailTree(t, s, own); !slices.Equal(got, skeletonTree) {
						t.Errorf("after both calls, a call without credentials finds %q, want the skeleton", got)
					}
				}
				for _, name := range []string{"a", "b"} {
					b, err := os.ReadFile(filepath.Join(s.Path, creds.StateDir, "codex/.codex", name+"-wrote"))
					if err != nil || string(b) != name+"\n" {
						t.Errorf("state written by call %s not kept: %q %v", name, b, err)
					}
				}
				hostUnchanged(t, m, home, before, false)
			})
		}
	})
}

// TestCredentialPlantedGivesWay: under landlock, symlinks and files a
// command planted at credential places, at their parents and in the state
// directory (which is not hidden from commands) give way to the
// credentials, and the server follows none of them: nothing outside the
// jail is touched, before the call nor when a command swapped its places
// for links outside during it.
func TestCredentialPlantedGivesWay(t *testing.T) {
	home := fakeHome(t)
	before := fingerprint(t, home)
	outside := canonTempDir(t)
	for _, f := range []string{"f", "auth.json", "settings", "config.json", "opencode/auth.json", "opencode/settings", "token"} {
		writeFile(t, filepath.Join(outside, f), "outside")
	}
	outsideBefore := tree(t, outside)
	m := credManager(t, "landlock", home, auth.Names(), nil)
	s := openSession(t, m, "planted")
	env := map[string]string{"OUT": outside}

	plant := `set -e
ln -s "$OUT" "$HOME/.codex"
ln -s "$OUT/f" "$HOME/.claude.json"
ln -s "$OUT/f" "$HOME/.gitconfig"
printf planted > "$HOME/.config/gh"
mkdir -p "$HOME/.git-credentials/x" && printf planted > "$HOME/.git-credentials/x/y"
rm -rf "$HOME/.local/share" && ln -s "$OUT" "$HOME/.local/share"
rm -rf "$HOME/.jail-mcp/state/kimi/.kimi" && ln -s "$OUT" "$HOME/.jail-mcp/state/kimi/.kimi"
rm -f "$HOME/.jail-mcp/state/claude/.claude.json" && ln -s "$OUT/f" "$HOME/.jail-mcp/state/claude/.claude.json"
ln -s "$OUT/f" "$HOME/.jail-mcp/state/claude/.claude.json.new"
rm -rf "$HOME/.jail-mcp/state/gemini" && ln -s "$OUT" "$HOME/.jail-mcp/state/gemini"`
	res, err := s.Exec(t.Context(), Request{Command: plant, Env: env, Auth: []string{}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("plant: %v %+v %q", err, res, res.Stderr.Text)
	}

	const read = `cat "$HOME/.codex/auth.json" "$HOME/.codex/settings" "$HOME/.claude.json" "$HOME/.gitconfig" "$HOME/.config/gh/token" "$HOME/.git-credentials" "$HOME/.local/share/opencode/auth.json" "$HOME/.kimi/config.json" "$HOME/.kimi/settings" "$HOME/.gemini/settings"`
	const wantRead = "secret of .codex/auth.jsonsettings of .codexsecret of .claude.jsonsecret of .gitconfigsecret of .config/gh/tokensecret of .git-credentialssecret of .local/share/opencode/auth.jsonsecret of .kimi/config.jsonsettings of .kimisettings of .gemini"
	// During the call, the command swaps its places for links outside:
	// removing what was placed must follow none of them.
	swap := `
rm -rf "$HOME/.codex" && ln -s "$OUT" "$HOME/.codex"
rm -rf "$HOME/.local/share" && ln -s "$OUT" "$HOME/.local/share"
rm -f "$HOME/.config/gh" && ln -s "$OUT" "$HOME/.config/gh"
rm -f "$HOME/.claude.json" && ln -s "$OUT/f" "$HOME/.claude.json"
rm -f "$HOME/.kimi/config.json" && ln -s "$OUT/config.json" "$HOME/.kimi/config.json"
rm -rf "$HOME/.gemini" && ln -s "$OUT" "$HOME/.gemini"`
	for i, cmd := range []string{read + swap, read} {
		res, err := s.Exec(t.Context(), Request{Command: cmd, Env: env})
		if err != nil || res.ExitCode != 0 || res.Stdout.Text != wantRead {
			t.Errorf("call %d: %v %+v\n got %q\nwant %q", i, err, res, res.Stdout.Text, wantRead)
		}
		if after := tree(t, outside); !slices.Equal(outsideBefore, after) {
			t.Errorf("call %d: outside changed: %v -> %v", i, outsideBefore, after)
		}
	}
	// The last call planted nothing: once a call without credentials took
	// its places out, the jail is the skeleton; what earlier commands
	// planted has given way.
	unplace(t, s)
	if got := jailTree(t, s, nil); !slices.Equal(got, skeletonTree) {
		t.Errorf("left in the jail: %q, want the skeleton", got)
	}
	if l := links(t, s.Path); len(l) > 0 {
		t.Errorf("planted links left in the jail: %q", l)
	}
	hostUnchanged(t, m, home, before, false)
}

// TestCredentialStateKept: under landlock the state copies are renamed
// into place; what a call writes there (a new config.toml, a rewritten
// .claude.json), also one that times out, is what the next call sees, is
// moved back to the session's state directory when a call without them
// takes them out, and never reaches the host; a new session does not see
// it.
func TestCredentialStateKept(t *testing.T) {
	home := fakeHome(t)
	before := fingerprint(t, home)
	m := credManager(t, "landlock", home, auth.Names(), nil)
	s := openSession(t, m, "kept")
	res, err := s.Exec(t.Context(), Request{Command: `set -e
echo 'model = "x"' > $HOME/.codex/config.toml
mkdir $HOME/.codex/sessions && echo s1 > $HOME/.codex/sessions/1
echo changed > $HOME/.codex/settings
echo mine > $HOME/.claude.json
echo kimi > $HOME/.kimi/state.db`})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("write state: %v %+v %q", err, res, res.Stderr.Text)
	}
	res, _ = s.Exec(t.Context(), Request{Command: `cat $HOME/.codex/config.toml $HOME/.codex/sessions/1 $HOME/.codex/settings $HOME/.claude.json $HOME/.codex/auth.json`})
	if want := "model = \"x\"\ns1\nchanged\nmine\nsecret of .codex/auth.json"; res.Stdout.Text != want {
		t.Errorf("next call reads %q %q, want %q", res.Stdout.Text, res.Stderr.Text, want)
	}
	// Taken out by a call without credentials: moved back to the state
	// directory, without the links to the host's secrets.
	unplace(t, s)
	if got := jailTree(t, s, nil); !slices.Equal(got, skeletonTree) {
		t.Errorf("left in the jail after a call without credentials: %q, want the skeleton", got)
	}
	state := tree(t, filepath.Join(s.Path, creds.StateDir))
	for _, want := range []string{
		"codex/.codex/config.toml: model = \"x\"\n", "codex/.codex/sessions/1: s1\n", "codex/.codex/settings: changed\n",
		"claude/.claude.json: mine\n", "kimi/.kimi/state.db: kimi\n",
	} {
		if !slices.Contains(state, want) {
			t.Errorf("state directory lacks %q: %q", want, state)
		}
	}
	if l := links(t, s.Path); len(l) > 0 {
		t.Errorf("links to the host's secrets moved back with the state: %q", l)
	}
	hostUnchanged(t, m, home, before, false)

	// A call that narrows codex away gets no copy placed; the copy stays.
	res, _ = s.Exec(t.Context(), Request{Command: `[ -e $HOME/.codex ] && echo placed || echo absent`, Auth: []string{"gh"}})
	if res.Stdout.Text != "absent\n" {
		t.Errorf("codex state placed for a call without codex: %q", res.Stdout.Text)
	}
	// Written by a call that times out: kept too.
	res, _ = s.Exec(t.Context(), Request{Command: `echo late > $HOME/.claude.json; sleep 30`, Timeout: 500 * time.Millisecond})
	if res.End != TimedOut {
		t.Errorf("call did not time out: %+v", res)
	}
	res, _ = s.Exec(t.Context(), Request{Command: `cat $HOME/.claude.json $HOME/.codex/config.toml`})
	if want := "late\nmodel = \"x\"\n"; res.Stdout.Text != want {
		t.Errorf("state after a call without codex and one that timed out: %q, want %q", res.Stdout.Text, want)
	}
	unplace(t, s)
	if b, err := os.ReadFile(filepath.Join(s.Path, creds.StateDir, "claude/.claude.json")); err != nil || string(b) != "late\n" {
		t.Errorf("state written by a call that timed out: %q %v", b, err)
	}
	hostUnchanged(t, m, home, before, false)
	// A new session starts from the host's.
	s2 := openSession(t, m, "other")
	res, _ = s2.Exec(t.Context(), Request{Command: `cat $HOME/.claude.json; [ -e $HOME/.codex/config.toml ] || echo no-config`})
	if res.Stdout.Text != "secret of .claude.jsonno-config\n" {
		t.Errorf("fresh session's state: %q", res.Stdout.Text)
	}
}

// TestCredentialPlacesRecover: what a command left at a credential place
// or in the state directory (not hidden under landlock; under bwrap the
// command can move the hidden one aside and make a new one) never makes a
// later call hang or fail: it gives way, as at any reserved place.
func TestCredentialPlacesRecover(t *testing.T) {
	tests := []struct {
		name  string
		plant string // run in a call without claude and codex
		read  string
		want  string
	}{
		{
			name:  "directory at the state file's place in the state directory",
			plant: `rm -rf $HOME/.jail-mcp/state/claude/.claude.json && mkdir -p $HOME/.jail-mcp/state/claude/.claude.json/x`,
			read:  `cat $HOME/.claude.json`,
			want:  "secret of .claude.json",
		},
		{
			// Only a server that is not root is stopped by the mode; as root
			// the command's chmod may be refused (landlock's seccomp).
			name:  "read-only directory at the state file's place in the state directory",
			plant: `rm -rf $HOME/.jail-mcp/state/claude/.claude.json && mkdir -p $HOME/.jail-mcp/state/claude/.claude.json/d && touch $HOME/.jail-mcp/state/claude/.claude.json/d/f && { chmod 500 $HOME/.jail-mcp/state/claude/.claude.json/d || true; }`,
			read:  `cat $HOME/.claude.json`,
			want:  "secret of .claude.json",
		},
		{
			name:  "read-only directory at a credential place",
			plant: `mkdir -p $HOME/.codex/d && touch $HOME/.codex/d/f && { chmod 500 $HOME/.codex/d || true; }`,
			read:  `cat $HOME/.codex/auth.json`,
			want:  "secret of .codex/auth.json",
		},
	}
	forEachBackend(t, func(t *testing.T, backend string) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				home := fakeHome(t)
				before := fingerprint(t, home)
				m, _ := buildManager(t, backend, func(c *Config) {
					c.Home = home
					c.Auth = auth.Names()
					c.Environ = fakeEnv()
				}, nil)
				s := openSession(t, m, "recover")
				// What the command made read-only must not stop the removal
				// of the test's directories when the server is not root.
				t.Cleanup(func() {
					filepath.WalkDir(s.Path, func(p string, d fs.DirEntry, err error) error {
						if err == nil && d.IsDir() {
							os.Chmod(p, 0o700)
						}
						return nil
					})
				})
				plant := tt.plant
				if backend == "bwrap" {
					// The state directory is hidden during calls; its parent
					// can be moved aside for a new one.
					plant = `mv $HOME/.jail-mcp $HOME/aside && ` + plant
				}
				res, err := s.Exec(t.Context(), Request{Command: plant, Auth: []string{"gh"}})
				if err != nil || res.ExitCode != 0 {
					t.Fatalf("plant: %v %+v %q", err, res, res.Stderr.Text)
				}
				type outcome struct {
					res *Result
					err error
				}
				ch := make(chan outcome, 1)
				go func() {
					res, err := s.Exec(context.Background(), Request{Command: tt.read})
					ch <- outcome{res, err}
				}()
				select {
				case o := <-ch:
					if o.err != nil || o.res.ExitCode != 0 || o.res.Stdout.Text != tt.want {
						t.Errorf("call after the plant: %v %+v, want %q", o.err, o.res, tt.want)
					}
				case <-time.After(15 * time.Second):
					// The session is stuck for good: leave it unclosed.
					t.Fatalf("call after the plant never returned (placing the credentials deadlocked?)")
				}
				hostUnchanged(t, m, home, before, false)
				m.Close()
			})
		}
	})
}

// copying is the bwrap backend made to take the copy path of backends that
// cannot bind host files (sandbox-exec), so that path is tested on Linux.
type copying struct{ jail.Backend }

func (copying) Credentials() jail.CredentialMode { return jail.CopyCredentials }

func TestCredentialCopies(t *testing.T) {
	home := fakeHome(t)
	before := fingerprint(t, home)
	outside := canonTempDir(t)
	m := credManager(t, "bwrap", home, auth.Names(), func(b jail.Backend) jail.Backend { return copying{b} })
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

// TestCredentialStateSettingsOnly: a session's copy of a CLI's state
// directory holds its settings only: no database, journal, log, history,
// lock, nor any file over the size bound.
func TestCredentialStateSettingsOnly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		home := fakeHome(t)
		codex := filepath.Join(home, ".codex")
		writeFile(t, filepath.Join(codex, "config.toml"), "model = \"x\"\n")
		writeFile(t, filepath.Join(codex, "history.jsonl"), "{}\n")
		writeFile(t, filepath.Join(codex, "logs_1.sqlite"), "x")
		writeFile(t, filepath.Join(codex, "logs_1.sqlite-wal"), "x")
		writeFile(t, filepath.Join(codex, "state"), "SQLite format 3\x00 and pages")
		writeFile(t, filepath.Join(codex, "codex-tui.log"), "log")
		writeFile(t, filepath.Join(codex, "big.json"), strings.Repeat("b", creds.MaxSettingsFile+1))
		m := credManager(t, backend, home, []string{"codex"}, nil)
		s := openSession(t, m, "settings")
		res, _ := s.Exec(t.Context(), Request{Command: `cd $HOME/.codex && ls -A | sort | tr '\n' ' '`})
		if want := "auth.json config.toml settings "; res.Stdout.Text != want {
			t.Errorf("state copy holds %q, want %q", res.Stdout.Text, want)
		}
	})
}

// TestCredentialStateLeftByACrash: under landlock a state copy stays in
// place between calls; a server that ended without taking it out (killed)
// leaves it in the jail, not in the state directory. The next server of
// the session takes it back with what the CLI kept in it (its top-level
// settings then refreshed from the host's, as at every open), and never
// the links to the host's secrets in it as state.
func TestCredentialStateLeftByACrash(t *testing.T) {
	home := fakeHome(t)
	before := fingerprint(t, home)
	var project, root string
	edit := func(c *Config) {
		c.Home, c.Auth, c.Environ = home, auth.Names(), fakeEnv()
		if project != "" {
			c.Project, c.Root = project, root
		}
	}
	m, p := buildManager(t, "landlock", edit, nil)
	project, root = p, m.cfg.Root
	s := openSession(t, m, "crash")
	res, err := s.Exec(t.Context(), Request{Command: `mkdir $HOME/.codex/sessions && echo s1 > $HOME/.codex/sessions/1`})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("write state: %v %+v", err, res)
	}
	jailDir := s.Path
	m.Close()
	// What a killed server leaves: the copy in place, none in the state
	// directory, the links to the host in it.
	if err := os.RemoveAll(filepath.Join(jailDir, ".codex")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(jailDir, creds.StateDir, "codex/.codex"), filepath.Join(jailDir, ".codex")); err != nil {
		t.Fatal(err)
	}
	symlink(t, filepath.Join(home, ".codex/auth.json"), filepath.Join(jailDir, ".codex/auth.json"))

	m2, _ := newManagerOn(t, "landlock", edit, nil)
	s2 := openSession(t, m2, "crash")
	if s2.Path != jailDir {
		t.Fatalf("the session's jail is %s, was %s", s2.Path, jailDir)
	}
	res, err = s2.Exec(t.Context(), Request{Command: `cat $HOME/.codex/sessions/1 $HOME/.codex/settings $HOME/.codex/auth.json`})
	if want := "s1\nsettings of .codexsecret of .codex/auth.json"; err != nil || res.Stdout.Text != want {
		t.Errorf("after the crash the session reads %q %v, want %q", res.Stdout.Text, err, want)
	}
	unplace(t, s2)
	if l := links(t, filepath.Join(s2.Path, creds.StateDir)); len(l) > 0 {
		t.Errorf("links to the host's secrets taken as state: %q", l)
	}
	hostUnchanged(t, m2, home, before, false)
}
