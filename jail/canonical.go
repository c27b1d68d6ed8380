package jail

import (
	"os"
	"path/filepath"
	"strings"
)

// CanonicalPath resolves the symlinks of p's deepest existing directory
// (of p itself when it exists) and keeps the rest as named: a path made
// later is still named where it will be, and a pattern in the last
// element stays one.
func CanonicalPath(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for cur := p; ; cur = filepath.Dir(cur) {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			if fi, err := os.Lstat(r); err == nil && (fi.IsDir() || rest == "") {
				return filepath.Join(r, rest)
			}
		}
		if cur == "/" || cur == "." {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

// isPattern reports whether a path's last element is a pattern
// (filepath.Match): Spec.Unread's may be.
func isPattern(elem string) bool { return strings.ContainsAny(elem, "*?[\\") }

// RegistryEntry is a project's jails named in the registry of this
// user's servers (Spec.Jails): the symlink, and the directory it names.
type RegistryEntry struct{ Link, Jails string }

// ReadRegistry lists the registry dir's entries that name an absolute
// path.
func ReadRegistry(dir string) []RegistryEntry {
	entries, _ := os.ReadDir(dir)
	var out []RegistryEntry
	for _, e := range entries {
		link := filepath.Join(dir, e.Name())
		if to, err := os.Readlink(link); err == nil && filepath.IsAbs(to) {
			out = append(out, RegistryEntry{Link: link, Jails: to})
		}
	}
	return out
}
