package jail

import (
	"os"
	"path/filepath"
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
			fd, _, err := viewRuleset(v, nil)
			if err != nil {
				b.Fatal(err)
			}
			unix.Close(fd)
		}
	})
	b.Run("hit", func(b *testing.B) {
		v := benchView(b)
		var c viewCache
		for b.Loop() {
			fd, err := c.ruleset(v, callShown(v, []string{"PATH=/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin"}, nil))
			if err != nil {
				b.Fatal(err)
			}
			unix.Close(fd)
		}
	})
}
