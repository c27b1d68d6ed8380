package jail

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// benchView is a view like a session's: a project with its jails, under
// a temporary directory (hidden /tmp, the project shown).
func benchView(b *testing.B) readView {
	project := b.TempDir()
	jail := filepath.Join(project, ".agent-home", "s")
	if err := os.MkdirAll(jail, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, n := range []string{"go.mod", "main.go", "README.md", "src", "docs"} {
		os.WriteFile(filepath.Join(project, n), nil, 0o644)
	}
	return readView{hidden: viewHidden("landlock", filepath.Join(project, ".agent-home")), shown: viewShown("landlock", jail, []string{project}), jail: jail}
}

// BenchmarkViewRuleset: a call's ruleset made anew (the listed
// directories changed), and taken from the cache (the usual call).
//
//	go test ./jail -run '^$' -bench ViewRuleset
func BenchmarkViewRuleset(b *testing.B) {
	b.Run("miss", func(b *testing.B) {
		v := benchView(b)
		for b.Loop() {
			fd, _, held, err := viewRuleset(v, nil)
			if err != nil {
				b.Fatal(err)
			}
			unix.Close(fd)
			held.release()
		}
	})
	hit := func(b *testing.B, v readView) {
		var c viewCache
		for b.Loop() {
			fd, _, held, err := c.ruleset(v, callShown(v, []string{"PATH=/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin"}, nil))
			if err != nil {
				b.Fatal(err)
			}
			unix.Close(fd)
			held.release()
		}
	}
	b.Run("hit", func(b *testing.B) { hit(b, benchView(b)) })
	b.Run("hit-deny", func(b *testing.B) {
		// The same with the server user's home shown and 60 paths in it
		// hidden, one a pattern, as the default --deny-read list does:
		// what each call pays for the list when nothing changed.
		v := benchView(b)
		home, err := filepath.EvalSymlinks(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		v.shown = append(v.shown, home)
		for i := range 60 {
			os.WriteFile(filepath.Join(home, fmt.Sprintf(".secret%02d", i)), nil, 0o600)
			v.hidden = append(v.hidden, filepath.Join(home, fmt.Sprintf(".secret%02d", i)))
		}
		v.hidden = append(v.hidden, filepath.Join(home, ".cargo", "credentials*"))
		hit(b, v)
	})
}

// TestUnder: a hidden path covers itself and what lies below it, a
// pattern in its last element the names it matches and what lies below
// them, never a name it only begins.
func TestUnder(t *testing.T) {
	for _, tc := range []struct {
		p, h string
		want bool
	}{
		{"/h/.ssh", "/h/.ssh", true},
		{"/h/.ssh/id_ed25519", "/h/.ssh", true},
		{"/h/.sshx", "/h/.ssh", false},
		{"/h", "/h/.ssh", false},
		{"/usr/bin", "/h/.ssh", false},
		{"/usr/bin", "/", true},
		{"/", "/", true},
		{"/h/.cargo/credentials.toml", "/h/.cargo/credentials*", true},
		{"/h/.cargo/credentials/x", "/h/.cargo/credentials*", true},
		{"/h/.cargo/config.toml", "/h/.cargo/credentials*", false},
		{"/h/.cargo", "/h/.cargo/credentials*", false},
		{"/h/.cargox/credentials", "/h/.cargo/credentials*", false},
	} {
		if got := under(tc.p, tc.h); got != tc.want {
			t.Errorf("under(%q, %q) = %t, want %t", tc.p, tc.h, got, tc.want)
		}
		if !strings.ContainsAny(tc.h, "*") {
			if got := Within(tc.p, tc.h); got != tc.want {
				t.Errorf("Within(%q, %q) = %t, want %t", tc.p, tc.h, got, tc.want)
			}
		}
	}
}

// TestCallShownPath: a call's PATH shows the directories a shadowed host
// directory holds, never another session's jail, whether named or
// reached through a link in the call's own jail.
func TestCallShownPath(t *testing.T) {
	project, err := filepath.EvalSymlinks(t.TempDir()) // under /tmp, which is hidden
	if err != nil {
		t.Fatal(err)
	}
	jails := filepath.Join(project, ".agent-home")
	own, other := filepath.Join(jails, "s"), filepath.Join(jails, "o")
	tool := filepath.Join(filepath.Dir(project), "tool-"+filepath.Base(project), "bin")
	for _, d := range []string{own, filepath.Join(other, "bin"), tool} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(tool)) })
	if err := os.Symlink(other, filepath.Join(own, "link")); err != nil {
		t.Fatal(err)
	}
	v := readView{hidden: viewHidden("landlock", jails), shown: viewShown("landlock", own, nil), jail: own}
	path := "PATH=" + filepath.Join(other, "bin") + ":" + other + ":" + filepath.Join(own, "link") + ":" + tool + ":/usr/bin"
	got := callShown(v, []string{path}, nil)
	if len(got) != 1 || !Within(tool, got[0]) {
		t.Fatalf("shown for %s: %v, want only %s (or its parent)", path, got, tool)
	}
}

// TestLinkedHidden: a hidden path that became a link since it was
// resolved hides what it leads to, a pattern what its matches lead to;
// never a place that holds what the view shows, nor a link that was
// already resolved.
func TestLinkedHidden(t *testing.T) {
	home, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"dotfiles/aws", "dotfiles/cargo", ".cargo", "jails/s"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "dotfiles/cargo/credentials"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		".aws":                    "dotfiles/aws",
		".cargo/credentials.toml": "../dotfiles/cargo/credentials",
		".netrc":                  home,
		".kube":                   "jails",
	} {
		if err := os.Symlink(target, filepath.Join(home, link)); err != nil {
			t.Fatal(err)
		}
	}
	v := readView{
		hidden: []string{filepath.Join(home, ".aws"), filepath.Join(home, ".cargo/credentials*"), filepath.Join(home, ".netrc"), filepath.Join(home, ".kube"), filepath.Join(home, ".gnupg")},
		shown:  []string{home + "/jails/s"},
	}
	got := v.linkedHidden()
	want := []string{filepath.Join(home, "dotfiles/aws"), filepath.Join(home, "dotfiles/cargo/credentials")}
	if !slices.Equal(got, want) {
		t.Errorf("linkedHidden = %v, want %v", got, want)
	}
}
