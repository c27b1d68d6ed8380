package layer

import (
	"bytes"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/config"
)

// Extra are the further protected paths of project (Protected's extra),
// relative and clean: the directory its .git/config names as
// core.hooksPath (hooksDir), and the .git of each submodule its
// .gitmodules names, which git status enters, running what the
// submodule's configuration names.
func Extra(project string) []string {
	root, err := os.OpenRoot(project)
	if err != nil {
		return nil
	}
	defer root.Close()
	extra := hooksDir(root, project)
	if cfg := gitConfig(root, ".gitmodules"); cfg != nil {
		for _, sub := range cfg.Section("submodule").Subsections {
			p, err := Clean(path.Clean(filepath.ToSlash(sub.Option("path"))))
			if err == nil && p != "." {
				extra = append(extra, p+"/.git")
			}
		}
	}
	return extra
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

// hooksDir is the project's directory that its .git/config names as
// core.hooksPath, as a protected path: git runs what is there. None when
// the config has none, names one outside the project, or cannot be read
// ([include] files and a .git file's repository are not followed).
func hooksDir(root *os.Root, project string) []string {
	cfg := gitConfig(root, ".git/config")
	if cfg == nil {
		return nil
	}
	v := cfg.Section("core").Option("hooksPath")
	if v == "" {
		return nil
	}
	if !filepath.IsAbs(v) {
		// Relative to where hooks run: the top of the working tree.
		v = filepath.Join(project, v)
	}
	var out []string
	for _, p := range []string{project, evalOr(project)} {
		rel, err := filepath.Rel(p, filepath.Clean(v))
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		if rel = filepath.ToSlash(rel); !slices.Contains(out, rel) {
			out = append(out, rel)
		}
	}
	return out
}

func evalOr(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}
