package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/session/jailfs/jailfstest"
)

func TestResolveProject(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares tmp and returns the argument and the wanted result
		// ("" for an error).
		setup func(t *testing.T, tmp string) (arg, want string)
	}{
		{"directory", func(t *testing.T, tmp string) (string, string) {
			mkdirs(t, tmp+"/p")
			return tmp + "/p", tmp + "/p"
		}},
		{"unclean path", func(t *testing.T, tmp string) (string, string) {
			mkdirs(t, tmp+"/p/sub")
			return tmp + "/p/sub/../", tmp + "/p"
		}},
		{"symlink is canonicalized", func(t *testing.T, tmp string) (string, string) {
			mkdirs(t, tmp+"/real")
			symlink(t, tmp+"/real", tmp+"/link")
			return tmp + "/link", tmp + "/real"
		}},
		{"symlinked parent is canonicalized", func(t *testing.T, tmp string) (string, string) {
			mkdirs(t, tmp+"/real/p")
			symlink(t, "real", tmp+"/link")
			return tmp + "/link/p", tmp + "/real/p"
		}},
		{"relative", func(t *testing.T, tmp string) (string, string) {
			mkdirs(t, tmp+"/p")
			t.Chdir(tmp)
			return "p", tmp + "/p"
		}},
		{"file refused", func(t *testing.T, tmp string) (string, string) {
			if err := os.WriteFile(tmp+"/f", nil, 0o644); err != nil {
				t.Fatal(err)
			}
			return tmp + "/f", ""
		}},
		{"symlink to file refused", func(t *testing.T, tmp string) (string, string) {
			if err := os.WriteFile(tmp+"/f", nil, 0o644); err != nil {
				t.Fatal(err)
			}
			symlink(t, tmp+"/f", tmp+"/link")
			return tmp + "/link", ""
		}},
		{"missing refused", func(t *testing.T, tmp string) (string, string) {
			return tmp + "/missing", ""
		}},
		{"dangling symlink refused", func(t *testing.T, tmp string) (string, string) {
			symlink(t, tmp+"/missing", tmp+"/link")
			return tmp + "/link", ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			arg, want := tt.setup(t, canonTempDir(t))
			got, err := ResolveProject(arg)
			switch {
			case want == "" && err == nil:
				t.Errorf("ResolveProject(%q) = %q, want error", arg, got)
			case want != "" && (err != nil || got != want):
				t.Errorf("ResolveProject(%q) = %q, %v; want %q", arg, got, err, want)
			}
		})
	}
}

func TestResolveRoot(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares the project p (canonical, existing) and returns the
		// root argument and the wanted result ("" for an error).
		setup func(t *testing.T, p, outside string) (root, want string)
	}{
		{"default", func(t *testing.T, p, outside string) (string, string) {
			return "", p + "/.agent-home"
		}},
		{"default existing", func(t *testing.T, p, outside string) (string, string) {
			mkdirs(t, p+"/.agent-home")
			return "", p + "/.agent-home"
		}},
		{"explicit base", func(t *testing.T, p, outside string) (string, string) {
			return p + "/.agent-home", p + "/.agent-home"
		}},
		{"nested, missing", func(t *testing.T, p, outside string) (string, string) {
			return p + "/.agent-home/team/a", p + "/.agent-home/team/a"
		}},
		{"nested, existing", func(t *testing.T, p, outside string) (string, string) {
			mkdirs(t, p+"/.agent-home/team/a")
			return p + "/.agent-home/team/a/", p + "/.agent-home/team/a"
		}},
		{"relative", func(t *testing.T, p, outside string) (string, string) {
			t.Chdir(p)
			return ".agent-home/x", p + "/.agent-home/x"
		}},
		{"project refused", func(t *testing.T, p, outside string) (string, string) {
			return p, ""
		}},
		{"sibling refused", func(t *testing.T, p, outside string) (string, string) {
			return p + "/other", ""
		}},
		{"name prefix refused", func(t *testing.T, p, outside string) (string, string) {
			return p + "/.agent-home2", ""
		}},
		{"outside refused", func(t *testing.T, p, outside string) (string, string) {
			return outside + "/.agent-home", ""
		}},
		{"dotdot escape refused", func(t *testing.T, p, outside string) (string, string) {
			return p + "/.agent-home/../x", ""
		}},
		{"dotdot escape from existing refused", func(t *testing.T, p, outside string) (string, string) {
			mkdirs(t, p+"/.agent-home/a")
			return p + "/.agent-home/a/../../../x", ""
		}},
		{"agent-home symlink inside project refused", func(t *testing.T, p, outside string) (string, string) {
			mkdirs(t, p+"/real")
			symlink(t, p+"/real", p+"/.agent-home")
			return "", ""
		}},
		{"agent-home relative symlink inside project refused", func(t *testing.T, p, outside string) (string, string) {
			mkdirs(t, p+"/real")
			symlink(t, "real", p+"/.agent-home")
			return p + "/.agent-home/s", ""
		}},
		{"agent-home symlink outside refused", func(t *testing.T, p, outside string) (string, string) {
			symlink(t, outside, p+"/.agent-home")
			return "", ""
		}},
		{"agent-home dangling symlink refused", func(t *testing.T, p, outside string) (string, string) {
			symlink(t, outside+"/missing", p+"/.agent-home")
			return "", ""
		}},
		{"nested dangling symlink refused", func(t *testing.T, p, outside string) (string, string) {
			mkdirs(t, p+"/.agent-home")
			symlink(t, outside+"/missing", p+"/.agent-home/team")
			return p + "/.agent-home/team", ""
		}},
		{"intermediate symlink outside refused", func(t *testing.T, p, outside string) (string, string) {
			mkdirs(t, p+"/.agent-home")
			symlink(t, outside, p+"/.agent-home/team")
			return p + "/.agent-home/team/a", ""
		}},
		{"intermediate symlink inside agent-home refused", func(t *testing.T, p, outside string) (string, string) {
			mkdirs(t, p+"/.agent-home/real")
			symlink(t, "real", p+"/.agent-home/team")
			return p + "/.agent-home/team/a", ""
		}},
		{"last component symlink inside agent-home refused", func(t *testing.T, p, outside string) (string, string) {
			mkdirs(t, p+"/.agent-home/real")
			symlink(t, "real", p+"/.agent-home/team")
			return p + "/.agent-home/team", ""
		}},
		{"through symlinked project, missing", func(t *testing.T, p, outside string) (string, string) {
			symlink(t, p, outside+"/plink")
			return outside + "/plink/.agent-home", p + "/.agent-home"
		}},
		{"through symlinked project, existing", func(t *testing.T, p, outside string) (string, string) {
			mkdirs(t, p+"/.agent-home/a")
			symlink(t, p, outside+"/plink")
			return outside + "/plink/.agent-home/a", p + "/.agent-home/a"
		}},
		{"agent-home is a file refused", func(t *testing.T, p, outside string) (string, string) {
			if err := os.WriteFile(p+"/.agent-home", nil, 0o644); err != nil {
				t.Fatal(err)
			}
			return "", ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, outside := canonTempDir(t), canonTempDir(t)
			root, want := tt.setup(t, p, outside)
			got, err := ResolveRoot(p, root)
			switch {
			case want == "" && err == nil:
				t.Errorf("ResolveRoot(%q, %q) = %q, want error", p, root, got)
			case want != "" && (err != nil || got != want):
				t.Errorf("ResolveRoot(%q, %q) = %q, %v; want %q", p, root, got, err, want)
			}
		})
	}
}

// TestResolveWritable: the --writable paths the server accepts, and why
// it refuses the others.
func TestResolveWritable(t *testing.T) {
	project := canonTempDir(t)
	outside := canonTempDir(t)
	mkdirs(t, filepath.Join(project, "node_modules", "pkg"), filepath.Join(project, "out", "build"), filepath.Join(project, ".git"), filepath.Join(project, "scripts", "hooks"), filepath.Join(project, "vendor", "lib"), filepath.Join(project, "third", "dep", ".git"))
	symlink(t, outside, filepath.Join(project, "escape"))
	symlink(t, filepath.Join(project, "out", "build"), filepath.Join(project, "build"))
	symlink(t, filepath.Join(outside, "missing"), filepath.Join(project, "dangling"))
	for name, content := range map[string]string{
		"file":        "x",
		".git/config": "[core]\n\thooksPath = scripts/hooks\n",
		".gitmodules": "[submodule \"lib\"]\n\tpath = vendor/lib\n",
	} {
		if err := os.WriteFile(filepath.Join(project, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(project, BaseName)
	for _, tt := range []struct {
		rels []string
		want string // a part of the error; "" for none
	}{
		{[]string{"node_modules", "new/deep", "out/build"}, ""},
		{[]string{"node_modules/"}, ""},
		{[]string{"."}, "the project itself"},
		{[]string{""}, "not a clean path"},
		{[]string{"/etc"}, "not a clean path"},
		{[]string{"a/../.."}, "not a clean path"},
		{[]string{"./node_modules"}, "not a clean path"},
		{[]string{".git"}, "protected path .git"},
		{[]string{".GIT/hooks"}, "protected path .git"},
		{[]string{".claude/x"}, "protected path .claude"},
		{[]string{"src/.envrc"}, "protected path .envrc"},
		{[]string{BaseName}, "protected path .agent-home"},
		{[]string{"scripts"}, "protected path scripts/hooks"},
		{[]string{"scripts/hooks/x"}, "protected path scripts/hooks"},
		{[]string{"vendor"}, "protected path vendor/lib/.git"},
		{[]string{"third"}, "protected path third/dep/.git"}, // a nested repository no .gitmodules names
		{[]string{"escape"}, "outside the project"},
		{[]string{"escape/sub"}, "outside the project"},
		{[]string{"dangling"}, "leads nowhere"},
		{[]string{"build"}, "name the directory itself"},
		{[]string{"file"}, "not a directory"},
		{[]string{"file/sub"}, "not a directory"},
		{[]string{"node_modules", "node_modules/pkg"}, "also writable"},
		{[]string{"node_modules", "node_modules"}, "also writable"},
		{strings.Split(strings.Repeat("d,", 17), ",")[:17], "more than 16"},
	} {
		t.Run(strings.Join(tt.rels, ","), func(t *testing.T) {
			got, err := ResolveWritable(project, root, tt.rels)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want == "":
				for i, g := range got {
					if want := filepath.Join(project, strings.TrimSuffix(tt.rels[i], "/")); g != want {
						t.Errorf("path %d: %s, want %s", i, g, want)
					}
				}
			case err == nil || !strings.Contains(err.Error(), tt.want):
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
	// The jail base, when it is not .agent-home itself: refused as the
	// jails' directory whatever its name.
	if _, err := ResolveWritable(project, filepath.Join(project, "jails"), []string{"jails/x"}); err == nil || !strings.Contains(err.Error(), "the jails' directory") {
		t.Errorf("a path in the jail base: %v", err)
	}
}

// mkdirs, symlink and canonTempDir are jailfstest's, named short for the
// tables above.
var (
	mkdirs       = jailfstest.Mkdirs
	symlink      = jailfstest.Symlink
	canonTempDir = jailfstest.CanonTempDir
)
