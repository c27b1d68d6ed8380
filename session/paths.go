package session

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/layer"
)

// BaseName is the directory under the project that holds every jail.
const BaseName = ".agent-home"

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

// ResolveWritable checks the --writable paths, each relative to project
// (canonical), and returns them as absolute paths. Each must be clean
// (layer.Clean) and not the project itself; it must not be, lie in or
// hold a protected path (layer.Protected, with the project's own and its
// nested repositories': layer.ExtraNested), nor the jail base root; none may lie in another. No
// component may be a symlink, even one that leads back into the project:
// the directory written is the one the operator named, never where a link
// leads that a command may have planted (in another writable directory),
// and a link out of the project would make the host writable. What exists
// of it must be directories; what is missing, New makes.
func ResolveWritable(project, root string, rels []string) ([]string, error) {
	if len(rels) > jail.MaxWritable {
		return nil, fmt.Errorf("%d paths, more than %d", len(rels), jail.MaxWritable)
	}
	extra, err := layer.ExtraNested(project)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, rel := range rels {
		c, err := layer.Clean(rel)
		if err != nil {
			return nil, fmt.Errorf("%q: %w (relative, without . or ..)", rel, err)
		}
		if c == "." {
			return nil, fmt.Errorf("%q: the project itself, which holds protected paths (.git and the like)", rel)
		}
		if name, ok := layer.Protected(c, extra...); ok {
			return nil, fmt.Errorf("%q: protected path %s is it, holds it or lies in it: the host runs or trusts what is there", rel, name)
		}
		abs := filepath.Join(project, filepath.FromSlash(c))
		if jail.Within(abs, root) || jail.Within(root, abs) {
			return nil, fmt.Errorf("%q: the jails' directory %s is it, holds it or lies in it", rel, root)
		}
		if err := realDirs(project, c); err != nil {
			return nil, fmt.Errorf("%q: %w", rel, err)
		}
		for _, o := range out {
			if jail.Within(abs, o) || jail.Within(o, abs) {
				return nil, fmt.Errorf("%q: lies in or holds %s, also writable: name one", rel, o)
			}
		}
		out = append(out, abs)
	}
	return out, nil
}

// realDirs checks each component of rel below project, as far as it
// exists: a directory, not a symlink.
func realDirs(project, rel string) error {
	p := project
	for _, part := range strings.Split(rel, "/") {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			to, err := filepath.EvalSymlinks(p)
			switch {
			case err != nil:
				return fmt.Errorf("%s is a symlink that leads nowhere", p)
			case !jail.Within(to, project):
				return fmt.Errorf("%s is a symlink to %s, outside the project", p, to)
			}
			return fmt.Errorf("%s is a symlink (to %s): name the directory itself", p, to)
		case !fi.IsDir():
			return fmt.Errorf("%s is not a directory", p)
		}
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
