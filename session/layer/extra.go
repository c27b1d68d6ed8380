//go:build linux || darwin

package layer

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/config"
)

// Extra are the further protected paths of project (Protected's extra),
// relative and clean: what git reads or runs for it (repoAt: its
// git directory when it lies in the project, included configuration,
// the hooks directories and the programs every configuration git reads
// names), and the .git of each submodule its .gitmodules names, which
// git status enters, running what the submodule's configuration names.
// An error is a configuration git would read that cannot be read: what
// it names is not known.
func Extra(project string) ([]string, error) {
	s, err := newGitScan(project)
	if err != nil {
		return nil, err
	}
	return extraOf(s, project)
}

// extraOf is Extra, with the configuration of every repository read
// (s).
func extraOf(s *gitScan, project string) ([]string, error) {
	extra, err := s.repoAt(project)
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

// maxNestedDirs bounds the directories applyExtra looks in for the
// repositories nested in the project: enough for a large project, and
// a bound on the time each apply takes to look.
var maxNestedDirs = 50_000

// applyExtra is Extra with what the configuration of every repository
// nested in project names (nestedRepos, skip's directories aside): git
// run there reads it, and it may name project files outside its
// repository (an include, a core.hooksPath or a program by ".."),
// whatever paths an apply writes. The configuration of every repository
// is read once. unknown says, when not "", why what they name is not
// all known: the look for nested repositories stopped at
// maxNestedDirs, or a nested repository's configuration cannot be read
// (its owner's, or a jail's doing: that fails no apply but of files,
// unchecked). An error is the project's own configuration unread.
func applyExtra(project string, skip []string) (extra []string, unknown string, err error) {
	s, err := newGitScan(project)
	if err != nil {
		return nil, "", err
	}
	if extra, err = extraOf(s, project); err != nil {
		return nil, "", err
	}
	dirs, complete := nestedRepos(project, skip)
	if !complete {
		unknown = fmt.Sprintf("the project has more than %d directories (.git, node_modules, .agent-home and the --writable directories aside), "+
			"too many to find every git repository nested in it", maxNestedDirs)
	}
	merged := &gitScan{}
	for _, d := range dirs {
		// Protected by its name already, but named here so that a
		// directory that holds it is known to (ExtraNested).
		extra = append(extra, d+"/.git")
		more, err := s.repoAt(filepath.Join(project, filepath.FromSlash(d)))
		if err != nil {
			if unknown == "" {
				unknown = fmt.Sprintf("the configuration of the repository at %s cannot be read (%v)", shown(d), err)
			}
			continue
		}
		for _, p := range more {
			merged.add(p) // once, not once a repository
		}
	}
	return append(extra, merged.protected...), unknown, nil
}

// ExtraNested is Extra with what every repository nested in project
// names and their .git (applyExtra), as far as they are known: the paths
// a --writable directory may not be, hold or lie in.
func ExtraNested(project string) ([]string, error) {
	extra, _, err := applyExtra(project, nil)
	return extra, err
}

// nestedRepos are the directories below project's top (relative, clean)
// that git takes for a repository's top or a repository: holding a .git
// (in any letter case, as a case-insensitive file system finds it), or
// repository-shaped. The look follows no link, enters no .git (a
// repository's own files), no node_modules and no .agent-home (the
// jails), nor skip's (absolute: the --writable directories, where
// commands write the host directly and so could plant a repository
// whose configuration no apply can vouch for), and visits at most
// maxNestedDirs directories: complete is
// false when it stopped there. A directory that cannot be listed is
// looked at only for a .git of its own, by name: what lies deeper is
// not looked for (git reaches it only through a directory searchable
// but not readable, which is rare).
func nestedRepos(project string, skip []string) (found []string, complete bool) {
	todo := []string{"."}
	for n := 0; len(todo) > 0; n++ {
		if n == maxNestedDirs {
			return found, false
		}
		d := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		abs := filepath.Join(project, filepath.FromSlash(d))
		f, err := os.Open(abs)
		if err != nil {
			if _, err := os.Lstat(filepath.Join(abs, ".git")); err == nil && d != "." {
				found = append(found, d)
			}
			continue
		}
		ents, _ := f.ReadDir(-1)
		f.Close()
		names, repo := make([]string, 0, len(ents)), false
		for _, e := range ents {
			name := e.Name()
			names = append(names, name)
			switch {
			case strings.EqualFold(name, ".git"):
				repo = true
			case e.IsDir() && !strings.EqualFold(name, "node_modules") && !strings.EqualFold(name, ".agent-home") &&
				!slices.Contains(skip, filepath.Join(abs, name)):
				todo = append(todo, path.Join(d, name))
			}
		}
		if d != "." && (repo || repoShaped(names)) {
			found = append(found, d)
		}
	}
	return found, true
}
