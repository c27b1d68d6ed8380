package jailfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/session/jailfs/jailfstest"
)

func TestValidName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"A-b_c.9", true},
		{strings.Repeat("x", 64), true},
		{"...", true},
		{".hidden", true},
		{"", false},
		{".", false},
		{"..", false},
		{"a/b", false},
		{strings.Repeat("x", 65), false},
		{"ä", false},
		{" a", false},
		{"a\n", false},
		{"a\x00", false},
		{"a b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := ValidName(tt.name); (err == nil) != tt.ok {
				t.Errorf("ValidName(%q) = %v, want ok %t", tt.name, err, tt.ok)
			}
		})
	}
}

// jailOf makes the jail name under a new base, and returns the base open
// as a root, the jail's path and the jail open as a root.
func jailOf(t testing.TB, name string) (base *os.Root, path string, jail *os.Root) {
	t.Helper()
	dir := canonTempDir(t)
	path = filepath.Join(dir, name)
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	base, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { base.Close() })
	jail, err = base.OpenRoot(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jail.Close() })
	return base, path, jail
}

// mkdirs, symlink and canonTempDir are jailfstest's, named short for the
// tables above.
var (
	mkdirs       = jailfstest.Mkdirs
	symlink      = jailfstest.Symlink
	canonTempDir = jailfstest.CanonTempDir
)
