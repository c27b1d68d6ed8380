package jail

import (
	"os"
	"path/filepath"
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
