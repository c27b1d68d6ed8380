package layer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestExtra(t *testing.T) {
	for _, tt := range []struct {
		name   string
		files  map[string]string // relative to the project
		want   string
		absDir string // a hooksPath of this directory below the project, absolute
	}{
		{name: "no repository"},
		{name: "none set", files: map[string]string{".git/config": "[core]\n\tbare = false\n"}},
		{name: "relative", files: map[string]string{".git/config": "[core]\n\thooksPath = .githooks\n"}, want: ".githooks"},
		{name: "case and spaces", files: map[string]string{".git/config": "[CORE]\n  HooksPath=scripts/hooks  # ours\n"}, want: "scripts/hooks"},
		{name: "quoted", files: map[string]string{".git/config": "[core]\n\thookspath = \"tools/git hooks\" ; comment\n"}, want: "tools/git hooks"},
		{name: "every one seen", files: map[string]string{".git/config": "[core]\nhooksPath = a\n[core]\nhooksPath = b/c\n"}, want: "a,b/c"},
		{name: "subsection is not core", files: map[string]string{".git/config": "[core \"x\"]\nhooksPath = a\n"}},
		{name: "other section", files: map[string]string{".git/config": "[alias]\nhooksPath = a\n"}},
		{name: "dot dot stays in", files: map[string]string{".git/config": "[core]\nhooksPath = a/../b\n"}, want: "b"},
		{name: "outside", files: map[string]string{".git/config": "[core]\nhooksPath = ../elsewhere\n"}},
		{name: "absolute inside", absDir: "abs/hooks", want: "abs/hooks"},
		// A .git file's repository is followed, and protected whole.
		{name: "gitdir file", files: map[string]string{".git": "gitdir: .repo\n", ".repo/config": "[core]\nhooksPath = h\n"}, want: ".repo,h"},
		{name: "hooks naming the project", files: map[string]string{".git/config": "[core]\n\thooksPath = .\n"}, want: "."},
		{name: "trailing slash", files: map[string]string{".git/config": "[core]\n\thooksPath = a\n[core]\n\thookspath = tools/hooks/\n"}, want: "a,tools/hooks"},
		{name: "submodules", files: map[string]string{
			".git/config": "[core]\nhooksPath = .husky\n",
			".gitmodules": "[submodule \"lib\"]\n\tpath = vendor/lib\n\turl = https://example.com/lib\n[submodule \"up\"]\n\tpath = ../up\n",
		}, want: "vendor/lib/.git"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			project := t.TempDir()
			if tt.absDir != "" {
				tt.files = map[string]string{".git/config": "[core]\nhooksPath = " + filepath.Join(project, tt.absDir) + "\n"}
			}
			for name, content := range tt.files {
				p := filepath.Join(project, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var want []string
			if tt.want != "" {
				want = strings.Split(tt.want, ",")
			}
			got, err := Extra(project)
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("Extra = %q, %v, want %q", got, err, want)
			}
		})
	}
}
