package session

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
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

// snapshot lists every entry under dir but the subtree skip with its
// mode, size, modification time and symlink target: cheaper than reading
// content, and a directory's time moves when an entry appears in it.
func snapshot(dir, skip string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			out = append(out, p+" error "+err.Error())
			return nil
		}
		if p == skip {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			out = append(out, p+" error "+err.Error())
			return nil
		}
		line := fmt.Sprintf("%s %v %d %d", p, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			line += " -> " + target
		}
		out = append(out, line)
		return nil
	})
	return out
}

// maxDepth bounds the depth of the paths FuzzEnsureDirs tries.
const maxDepth = 64

func FuzzEnsureDirs(f *testing.F) {
	m, project := newManager(f, nil, nil)
	s, other := openSession(f, m, "s"), openSession(f, m, "t")
	outside := canonTempDir(f)
	mkdirs(f, outside+"/sub/deep")
	writeFile(f, outside+"/keep", "keep")
	writeFile(f, outside+"/sub/keep", "keep")
	writeFile(f, other.Path+"/keep", "keep")
	// What a previous command may have left in the jail: every entry of
	// the jail, slash-separated, as "dir", "file:<content>" or
	// "link:<target>". Put back before every call, so that each input
	// meets every symlink.
	want := map[string]string{}
	for _, d := range skeleton {
		for p := d; p != "."; p = path.Dir(p) {
			want[p] = "dir"
		}
	}
	for rel, e := range map[string]string{
		".codex":       "link:" + outside,
		".config/gh":   "link:" + outside + "/sub",
		".config/file": "file:file",
		".local/share": "link:" + outside + "/sub/deep",
		".jail-mcp":    "link:../t",
		"a":            "link:" + outside + "/missing",
		"b":            "link:../../..",
		"c":            "link:" + project,
		"d":            "link:" + other.Path,
		"e":            "link:..",
		"f":            "file:file",
		"g":            "dir",
		"g/h":          "link:" + outside + "/keep",
		"g/i":          "link:../../t/keep",
		"loop":         "link:loop",
	} {
		want[rel] = e
	}
	// restore puts the jail back as want says, touching only what differs:
	// on some disks a mkdir or a symlink costs a tenth of a millisecond.
	restore := func(t testing.TB) {
		have := jailEntries(t, s.Path)
		var removed []string
		under := func(p string) bool {
			return slices.ContainsFunc(removed, func(r string) bool { return strings.HasPrefix(p, r+"/") })
		}
		for _, p := range slices.Sorted(maps.Keys(have)) {
			if have[p] != want[p] && !under(p) {
				if err := s.root.RemoveAll(p); err != nil {
					t.Fatal(err)
				}
				removed = append(removed, p)
			}
		}
		// Sorted, a directory comes before what it holds.
		for _, p := range slices.Sorted(maps.Keys(want)) {
			if have[p] == want[p] && !under(p) {
				continue
			}
			var err error
			switch e := want[p]; {
			case e == "dir":
				err = s.root.Mkdir(p, 0o700)
			case strings.HasPrefix(e, "file:"):
				err = s.root.WriteFile(p, []byte(strings.TrimPrefix(e, "file:")), 0o600)
			default:
				err = s.root.Symlink(strings.TrimPrefix(e, "link:"), p)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	restore(f)
	before := snapshot(filepath.Dir(project), s.Path)
	if !slices.ContainsFunc(before, func(l string) bool { return strings.HasPrefix(l, outside+"/sub/keep ") }) {
		f.Fatalf("snapshot misses the files it guards: %q", before)
	}
	if got := jailEntries(f, s.Path); !maps.Equal(got, want) {
		f.Fatalf("jail holds %q, want %q", got, want)
	}
	for _, rel := range slices.Sorted(maps.Keys(want)) {
		f.Add(rel, true)
		f.Add(rel+"/x/y", false)
	}
	for _, rel := range []string{
		".", "", "/", "..", "../t", "a/../..", "/etc/x", "x//y", "./x", "x/./y", "x/", "x\x00y",
		".config/gh/hosts.yml", ".jail-mcp/state/gh/.config/gh", ".codex/auth.json", "b/s", "c/.agent-home/t/x",
		"g/h/x", "g/i", ".tmp", ".runtime", "f/x", "loop/x", strings.Repeat("n", 256), strings.Repeat("d/", maxDepth),
		"\u2024\u2024/x", "\xff/x",
	} {
		f.Add(rel, true)
		f.Add(rel, false)
	}
	f.Fuzz(func(t *testing.T, rel string, dir bool) {
		if strings.Count(rel, "/") > maxDepth {
			// os.Root walks every component on every call, so ensureDirs
			// costs depth² lookups: seconds at a depth of a thousand.
			// Registry paths are a few components deep.
			return
		}
		restore(t)
		clean := path.Clean(rel)
		valid := !path.IsAbs(rel) && !strings.Contains(rel, "..") && !strings.Contains(rel, "\x00") && clean != "."
		// Registry paths are clean, relative and below the jail; anything
		// else must still neither panic nor escape.
		arg := rel
		if valid {
			arg = clean
		}
		s.ensureDirs(arg)
		after := snapshot(filepath.Dir(project), s.Path)
		if !slices.Equal(before, after) {
			t.Fatalf("ensureDirs(%q) changed the host outside the jail:\nbefore %q\nafter  %q", arg, before, after)
		}
		restore(t)
		s.mountPoint(arg, dir)
		after = snapshot(filepath.Dir(project), s.Path)
		if !slices.Equal(before, after) {
			t.Fatalf("mountPoint(%q, %t) changed the host outside the jail:\nbefore %q\nafter  %q", arg, dir, before, after)
		}
	})
}

// jailEntries describes every entry below dir, keyed by its slash-separated
// path: "dir", "file:<content>" or "link:<target>".
func jailEntries(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link:" + target
		case d.IsDir():
			out[rel] = "dir"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = "file:" + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
