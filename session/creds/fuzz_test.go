package creds

import (
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/session/jailfs/jailfstest"
)

// A fuzz target over path containment. `go test` runs only its seeds (the
// f.Add calls and testdata/fuzz/<Fuzz>/); .ci/fuzz runs it with -fuzz.
// Its body is host-side file work only: no jailed process per input.

// skeleton are the directories a session makes in every jail (session's
// skeleton): a command may have replaced any of them.
var skeleton = []string{".tmp", ".config", ".cache", ".local/share", ".local/state", ".runtime"}

// openJail makes the jail name in project's jail base and returns its
// credentials, nothing enabled.
func openJail(t testing.TB, project, name string) *Jail {
	t.Helper()
	dir := filepath.Join(project, ".agent-home", name)
	mkdirs(t, dir)
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	h, err := New(Config{Home: canonTempDir(t), Getenv: func(string) string { return "" }, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return h.Open(root, dir, name)
}

// maxDepth bounds the depth of the paths FuzzEnsureDirs tries.
const maxDepth = 64

func FuzzEnsureDirs(f *testing.F) {
	project, outside := canonTempDir(f), canonTempDir(f)
	s, other := openJail(f, project, "s"), filepath.Join(project, ".agent-home", "t")
	mkdirs(f, outside+"/sub/deep", other)
	writeFile(f, outside+"/keep", "keep")
	writeFile(f, outside+"/sub/keep", "keep")
	writeFile(f, other+"/keep", "keep")
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
		"d":            "link:" + other,
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
		have := jailEntries(t, s.path)
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
	before := snapshot(filepath.Dir(project), s.path)
	if !slices.ContainsFunc(before, func(l string) bool { return strings.HasPrefix(l, outside+"/sub/keep ") }) {
		f.Fatalf("snapshot misses the files it guards: %q", before)
	}
	if got := jailEntries(f, s.path); !maps.Equal(got, want) {
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
		after := snapshot(filepath.Dir(project), s.path)
		if !slices.Equal(before, after) {
			t.Fatalf("ensureDirs(%q) changed the host outside the jail:\nbefore %q\nafter  %q", arg, before, after)
		}
		restore(t)
		s.mountPoint(arg, dir)
		after = snapshot(filepath.Dir(project), s.path)
		if !slices.Equal(before, after) {
			t.Fatalf("mountPoint(%q, %t) changed the host outside the jail:\nbefore %q\nafter  %q", arg, dir, before, after)
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

// canonTempDir, mkdirs and writeFile are jailfstest's, named short for
// the tests of this package.
var (
	canonTempDir = jailfstest.CanonTempDir
	mkdirs       = jailfstest.Mkdirs
	writeFile    = jailfstest.WriteFile
)
