// Package jailfstest holds what tests of a jail on disk share across
// packages: trees made and removed the way a hostile command leaves them
// (chains deeper than a path may be), and the host's own count of a tree
// to hold a jail's counting against. It imports nothing of the server, so
// the packages it helps test may use it from their own tests.
package jailfstest

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Mkdirs makes each of dirs with its parents; the test fails on an error.
func Mkdirs(t testing.TB, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// Symlink makes link point to target; the test fails on an error.
func Symlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// CanonTempDir is t.TempDir with its own symlinks (a symlinked /tmp, say)
// resolved, so that expectations compare canonical paths.
func CanonTempDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Tree maps every path under root, root included ("."), by its path
// relative to root, to what of makes of it; the test fails on an error.
func Tree[V any](t testing.TB, root string, of func(path string, fi fs.FileInfo) (V, error)) map[string]V {
	t.Helper()
	out := map[string]V{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[rel], err = of(p, fi)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// WriteFile writes content to name, making its directory first; the test
// fails on an error.
func WriteFile(t testing.TB, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
