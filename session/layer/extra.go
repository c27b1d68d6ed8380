//go:build linux || darwin

package layer

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing/format/config"
)

// Extra are the further protected paths of project (Protected's extra),
// relative and clean: what git reads or runs for it (gitProtected: its
// git directory when it lies in the project, included configuration,
// the hooks directories and the programs every configuration git reads
// names), and the .git of each submodule its .gitmodules names, which
// git status enters, running what the submodule's configuration names.
// An error is a configuration git would read that cannot be read: what
// it names is not known.
func Extra(project string) ([]string, error) {
	extra, err := gitProtected(project)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(project)
	if err != nil {
		return extra, nil
	}
	defer root.Close()
	if cfg := gitConfig(root, ".gitmodules"); cfg != nil {
		for _, sub := range cfg.Section("submodule").Subsections {
			p, err := Clean(path.Clean(filepath.ToSlash(sub.Option("path"))))
			if err == nil && p != "." {
				extra = append(extra, p+"/.git")
			}
		}
	}
	return extra, nil
}

// gitConfig is the git configuration file name of root, decoded with
// go-git's decoder, never by running git, whose configuration can name
// programs; nil when it cannot be read.
func gitConfig(root *os.Root, name string) *config.Config {
	f, err := root.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil
	}
	cfg := config.New()
	if err := config.NewDecoder(bytes.NewReader(data)).Decode(cfg); err != nil {
		return nil
	}
	return cfg
}

func evalOr(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// NestedExtra are the further protected paths of the repositories nested
// in project that hold any of the paths rel (relative, clean): for each
// directory above one that holds a .git on the host, what its
// configuration names (gitProtectedFrom), as git run there reads it. An
// error is a configuration that cannot be read.
func NestedExtra(project string, rel []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, p := range rel {
		for d := path.Dir(p); d != "." && d != "/" && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			if _, err := os.Lstat(filepath.Join(project, filepath.FromSlash(d), ".git")); err != nil {
				continue
			}
			more, err := gitProtectedFrom(project, filepath.Join(project, filepath.FromSlash(d)))
			if err != nil {
				return nil, fmt.Errorf("the repository at %s: %w", d, err)
			}
			out = append(out, more...)
		}
	}
	return out, nil
}
