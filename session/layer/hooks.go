package layer

import (
	"os"
	"path/filepath"
	"strings"
)

// HooksPath is the directory the project's git configuration names as
// core.hooksPath, relative to the project and clean, when it lies in the
// project (a further protected path: Protected's extra); "" when there is
// none or it lies outside. It reads the repository of the project's own
// .git (a directory, or a file naming one, as worktrees and submodules
// have), not the user's or the system's configuration, nor files that
// configuration includes.
func HooksPath(project string) string {
	value := ""
	for _, f := range gitConfigs(project) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if v, ok := configValue(string(b), "core", "hookspath"); ok {
			value = v
		}
	}
	if value == "" || strings.HasPrefix(value, "~") {
		return ""
	}
	// A relative hooksPath is taken from the top of the work tree.
	p := value
	if !filepath.IsAbs(p) {
		p = filepath.Join(project, p)
	}
	rel, err := filepath.Rel(project, filepath.Clean(p))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return ""
	}
	return filepath.ToSlash(rel)
}

// gitConfigs are the configuration files of the project's repository, in
// the order git reads them.
func gitConfigs(project string) []string {
	dot := filepath.Join(project, ".git")
	fi, err := os.Stat(dot)
	if err != nil {
		return nil
	}
	if fi.IsDir() {
		return []string{filepath.Join(dot, "config")}
	}
	b, err := os.ReadFile(dot)
	if err != nil {
		return nil
	}
	gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return nil
	}
	gitdir = strings.TrimSpace(gitdir)
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(project, gitdir)
	}
	// A linked work tree: the repository's configuration is in the common
	// directory, the work tree's own beside it.
	if c, err := os.ReadFile(filepath.Join(gitdir, "commondir")); err == nil {
		common := strings.TrimSpace(string(c))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitdir, common)
		}
		return []string{filepath.Join(common, "config"), filepath.Join(gitdir, "config.worktree")}
	}
	return []string{filepath.Join(gitdir, "config")}
}

// configValue is the last value of section.key (both lower case) in a git
// configuration file's text.
func configValue(text, section, key string) (string, bool) {
	var value string
	found, in := false, false
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "["), "]")
			// [core "sub"] is a subsection, not core itself.
			in = strings.EqualFold(strings.TrimSpace(name), section)
			continue
		}
		if !in {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), key) {
			continue
		}
		value, found = configString(strings.TrimSpace(v)), true
	}
	return value, found
}

// configString is a git configuration value without its quotes, escapes
// and trailing comment.
func configString(v string) string {
	var b strings.Builder
	quoted := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			quoted = !quoted
		case c == '\\' && i+1 < len(v):
			i++
			switch v[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(v[i])
			}
		case (c == '#' || c == ';') && !quoted:
			return strings.TrimSpace(b.String())
		default:
			b.WriteByte(c)
		}
	}
	return strings.TrimSpace(b.String())
}
