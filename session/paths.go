package session

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// BaseName is the directory under the project that holds every jail.
const BaseName = ".agent-home"

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidName reports why name cannot be a session name, or nil.
func ValidName(name string) error {
	if !nameRE.MatchString(name) || name == "." || name == ".." {
		return fmt.Errorf("invalid session name %q: want 1 to 64 of A-Z a-z 0-9 . _ - other than . and .. themselves", name)
	}
	return nil
}

// ResolveProject canonicalizes the project directory: absolute, symlinks
// resolved, and an existing directory.
func ResolveProject(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve project %q: %w", dir, err)
	}
	canon, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("resolve project %q: %w", dir, err)
	}
	fi, err := os.Stat(canon)
	if err != nil {
		return "", fmt.Errorf("resolve project %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("resolve project %q: not a directory", dir)
	}
	return canon, nil
}

// ResolveRoot checks that root (empty: the default) is <project>/.agent-home
// or strictly inside it once symlinks are resolved, and that no component
// from .agent-home down is a symlink. project must be canonical already.
// root need not exist yet.
func ResolveRoot(project, root string) (string, error) {
	base := filepath.Join(project, BaseName)
	if root == "" {
		root = base
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("resolve root %q: %w", root, err)
	}
	canon, err := canonicalPrefix(abs)
	if err != nil {
		return "", fmt.Errorf("resolve root %q: %w", root, err)
	}
	if canon != base && !strings.HasPrefix(canon, base+string(filepath.Separator)) {
		return "", fmt.Errorf("root %q is not %s or inside it", root, base)
	}
	// Every component from .agent-home down, as the operator wrote the
	// path, must be a real directory or not exist yet: a symlink there is
	// refused, never followed, even when it points back inside.
	if err := noSymlinkBelow(abs, base); err != nil {
		return "", fmt.Errorf("root %q: %w", root, err)
	}
	return canon, nil
}

// noSymlinkBelow walks the components of abs: from the first prefix that
// resolves to the project on, no component may be a symlink (even one
// pointing back inside) and every existing one must be a directory. A path
// that reaches the jail base without passing through the project is
// refused.
func noSymlinkBelow(abs, base string) error {
	project := filepath.Dir(base)
	sep := string(filepath.Separator)
	p := sep
	reached := abs == project
	for _, part := range strings.Split(strings.TrimPrefix(filepath.Clean(abs), sep), sep) {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			if !reached {
				return fmt.Errorf("%s does not lead through the project %s", abs, project)
			}
			return nil
		}
		if err != nil {
			return err
		}
		if !reached {
			if c, err := filepath.EvalSymlinks(p); err == nil && c == project {
				reached = true
			}
			continue
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symlink", p)
		case !fi.IsDir():
			return fmt.Errorf("%s is not a directory", p)
		}
	}
	if !reached {
		return fmt.Errorf("%s does not lead through the project %s", abs, project)
	}
	return nil
}

// canonicalPrefix resolves symlinks in the longest existing prefix of abs
// and appends the rest unchanged.
func canonicalPrefix(abs string) (string, error) {
	rest := ""
	p := abs
	for {
		c, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(c, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", err
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// within reports whether path is dir or lies inside it; both are clean and
// absolute.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}
