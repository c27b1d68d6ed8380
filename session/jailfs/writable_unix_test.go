//go:build linux || darwin

package jailfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenWritable: a writable directory is opened, and made, without
// following a link at any component, even one placed after start-up.
func TestOpenWritable(t *testing.T) {
	project, outside := canonTempDir(t), canonTempDir(t)
	mkdirs(t, filepath.Join(project, "a"), filepath.Join(outside, "x"))
	symlink(t, outside, filepath.Join(project, "a", "link"))
	symlink(t, filepath.Join(project, "a"), filepath.Join(project, "inside"))
	if err := os.WriteFile(filepath.Join(project, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		dir    string
		create bool
		ok     bool
	}{
		{"a", false, true},
		{"a/new/deep", true, true},
		{"a/missing", false, false},
		{"a/link", true, false},
		{"a/link/x", true, false},
		{"a/link/made", true, false},
		{"inside/b", true, false},
		{"file", true, false},
		{"file/x", true, false},
	} {
		t.Run(tt.dir, func(t *testing.T) {
			f, err := OpenWritable(project, filepath.Join(project, tt.dir), tt.create)
			if f != nil {
				f.Close()
			}
			if (err == nil) != tt.ok {
				t.Fatalf("OpenWritable(%s, create %t): %v, want ok %t", tt.dir, tt.create, err, tt.ok)
			}
			if tt.ok {
				if fi, err := os.Lstat(filepath.Join(project, tt.dir)); err != nil || !fi.IsDir() {
					t.Errorf("%s: %v", tt.dir, err)
				}
			}
		})
	}
	// Nothing was made through the links.
	for _, p := range []string{filepath.Join(outside, "made"), filepath.Join(project, "a", "b")} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was made through a link: %v", p, err)
		}
	}
}
