package session

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/jail"
)

// Fuzz targets over path containment. `go test` runs only their seeds (the
// f.Add calls and testdata/fuzz/<Fuzz>/); .ci/fuzz runs each with -fuzz.
// Every body is host-side file work only: no jailed process per input.

// fuzzProject is a canonical project for the ResolveRoot target:
//
//	.agent-home/            real directory, the jail base
//	.agent-home/real/sub/   real directories
//	.agent-home/link     -> ../elsewhere  (out of the base)
//	.agent-home/inner    -> real          (back inside the base)
//	.agent-home/dangling -> ../missing
//	.agent-home/file        a file
//	elsewhere/              a real directory beside the base
//	elsewhere/back       -> ../.agent-home
//	to-base              -> .agent-home   (a repository may hold such a link)
//	file                    a file
func fuzzProject(t testing.TB) string {
	t.Helper()
	p := canonTempDir(t)
	mkdirs(t, p+"/.agent-home/real/sub", p+"/elsewhere")
	symlink(t, "../elsewhere", p+"/.agent-home/link")
	symlink(t, "real", p+"/.agent-home/inner")
	symlink(t, "../missing", p+"/.agent-home/dangling")
	writeFile(t, p+"/.agent-home/file", "f")
	symlink(t, "../.agent-home", p+"/elsewhere/back")
	symlink(t, ".agent-home", p+"/to-base")
	writeFile(t, p+"/file", "f")
	return p
}

func FuzzResolveRoot(f *testing.F) {
	for _, s := range []string{
		"", ".", "..", "x", "sub", "../inner", "../link", "../dangling", "../file/x",
		".agent-home", ".agent-home/", ".agent-home//s", ".agent-home/./s", ".agent-home/s/..",
		".agent-home/..", ".agent-home/../.agent-home/s", ".agent-home2", "/", "//", "/.agent-home",
		".agent-home/real", ".agent-home/real/sub/new/deeper", ".agent-home/inner", ".agent-home/inner/sub",
		".agent-home/link", ".agent-home/link/x", ".agent-home/link/back/real", ".agent-home/dangling",
		".agent-home/dangling/x", ".agent-home/file", ".agent-home/file/x",
		"to-base", "to-base/real", "to-base/s", "elsewhere/back", "elsewhere/back/s",
		".agent-home/real/../inner", ".agent-home/\x00", ".agent-home/a\x00b", ".agent-home/" + strings.Repeat("n", 256),
		".agent-home/" + strings.Repeat("d/", 2100), ".agent-home/ä/\u2024\u2024", ".agent-home/\uff0e\uff0e/x",
		".agent-home/\xff", "/proc/self/cwd", "/proc/self/cwd/x",
	} {
		f.Add(s)
	}
	project := fuzzProject(f)
	base := filepath.Join(project, BaseName)
	// Relative roots resolve against the working directory: put it inside
	// the base so that short inputs reach interesting places.
	f.Chdir(filepath.Join(base, "real"))
	f.Fuzz(func(t *testing.T, rel string) {
		for _, root := range []string{rel, filepath.Join(project, rel)} {
			got, err := ResolveRoot(project, root)
			if err != nil {
				continue
			}
			if !filepath.IsAbs(got) || filepath.Clean(got) != got {
				t.Fatalf("ResolveRoot(%q) = %q: not absolute and clean", root, got)
			}
			if !jail.Within(got, base) {
				t.Fatalf("ResolveRoot(%q) = %q: not %s or inside it", root, got, base)
			}
			if p, why := badComponent(base, got); p != "" {
				t.Fatalf("ResolveRoot(%q) = %q: %s %s", root, got, p, why)
			}
			if p := followedBelow(base, root); p != "" {
				t.Fatalf("ResolveRoot(%q) = %q: the path follows %s, a symlink inside %s", root, got, p, base)
			}
		}
	})
}

// badComponent walks the components of p from dir down as long as they
// exist and returns the first that is a symlink or not a directory, with
// why.
func badComponent(dir, p string) (string, string) {
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return p, "is not below " + dir
	}
	q := dir
	parts := []string{}
	if rel != "." {
		parts = strings.Split(rel, string(filepath.Separator))
	}
	for _, part := range append([]string{""}, parts...) {
		q = filepath.Join(q, part)
		fi, err := os.Lstat(q)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", ""
		case err != nil:
			return q, err.Error()
		case fi.Mode()&fs.ModeSymlink != 0:
			return q, "is a symlink"
		case !fi.IsDir():
			return q, "is not a directory"
		}
	}
	return "", ""
}

// followedBelow returns the first component of root, as written, that is a
// symlink whose own location (its parent resolved) is base or inside it:
// the doc of ResolveRoot says such a symlink is refused, never followed,
// however the path reached it.
func followedBelow(base, root string) string {
	if root == "" {
		root = base
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return ""
	}
	q := string(filepath.Separator)
	for _, part := range strings.Split(strings.TrimPrefix(abs, q), string(filepath.Separator)) {
		q = filepath.Join(q, part)
		fi, err := os.Lstat(q)
		if err != nil {
			return ""
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		parent, err := filepath.EvalSymlinks(filepath.Dir(q))
		if err != nil {
			return ""
		}
		if jail.Within(filepath.Join(parent, part), base) {
			return q
		}
	}
	return ""
}

func FuzzResolveCwd(f *testing.F) {
	m, project := newManager(f, nil, nil)
	s, other := openSession(f, m, "s"), openSession(f, m, "t")
	outside := canonTempDir(f)
	mkdirs(f, project+"/sub/deep", s.Path+"/work", outside+"/dir")
	writeFile(f, project+"/file", "")
	writeFile(f, s.Path+"/file", "")
	symlink(f, "sub", project+"/link-sub")
	symlink(f, s.Path+"/work", project+"/to-s")
	symlink(f, other.Path, project+"/to-t")
	symlink(f, outside, s.Path+"/out")
	symlink(f, "/etc", s.Path+"/etc")
	symlink(f, other.Path, s.Path+"/to-t")
	symlink(f, "../t", s.Path+"/rel-t")
	symlink(f, project, s.Path+"/to-project")
	symlink(f, "..", s.Path+"/to-base")
	symlink(f, "missing", s.Path+"/dangling")
	symlink(f, "loop", s.Path+"/loop")
	for _, c := range []string{
		"", ".", "./", "..", "/", "//", "sub", "sub/", "sub//deep", "sub/../..", "sub/deep/../../..",
		"link-sub", "link-sub/deep", "to-s", "to-t", "file", "missing", "sub\x00", "\x00",
		".agent-home", ".agent-home/", ".agent-home/s", ".agent-home/s/work", ".agent-home/t", ".agent-home/s/../t",
		".agent-home/s/out", ".agent-home/s/out/dir", ".agent-home/s/etc", ".agent-home/s/to-t",
		".agent-home/s/rel-t", ".agent-home/s/to-project", ".agent-home/s/to-project/sub",
		".agent-home/s/to-project/.agent-home/t", ".agent-home/s/to-base", ".agent-home/s/to-base/t",
		".agent-home/s/to-base/s", ".agent-home/s/dangling", ".agent-home/s/loop", ".agent-home/s/file",
		".agent-home/s2", ".agent-home/s/" + strings.Repeat("x", 256), strings.Repeat("sub/./", 800),
		s.Path, s.Path + "/work", s.Path + "/out", s.Path + "/../t", other.Path, project, outside,
		project + "/sub", "/proc/self/cwd", "/proc/self/root" + project, "/proc/self/root" + s.Path + "/to-t",
		".agent-home/s/\u2024\u2024", "sub/\xff",
	} {
		f.Add(c)
	}
	jailBase := filepath.Join(project, BaseName)
	f.Fuzz(func(t *testing.T, cwd string) {
		got, err := s.resolveCwd(cwd)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("resolveCwd(%q): %v, want an *InputError", cwd, err)
			}
			return
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got {
			t.Fatalf("resolveCwd(%q) = %q: not absolute and clean", cwd, got)
		}
		if p, why := badComponent("/", got); p != "" {
			t.Fatalf("resolveCwd(%q) = %q: %s %s", cwd, got, p, why)
		}
		if fi, err := os.Lstat(got); err != nil || !fi.IsDir() {
			t.Fatalf("resolveCwd(%q) = %q: not an existing directory (%v)", cwd, got, err)
		}
		switch {
		case jail.Within(got, s.Path):
		case jail.Within(got, jailBase):
			t.Fatalf("resolveCwd(%q) = %q: inside the jail base but not the session's jail %s", cwd, got, s.Path)
		case jail.Within(got, project):
		default:
			t.Fatalf("resolveCwd(%q) = %q: outside the project %s", cwd, got, project)
		}
	})
}
