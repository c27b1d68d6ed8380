package layer

import (
	"os"
	"path/filepath"
	"strings"
)

// Extra are the further protected paths of project (Protected's extra),
// relative and clean: the directory its git configuration names as
// core.hooksPath, where it lies in the project, and the .git of each of
// its submodules (which git status enters, running what their
// configuration names). They come from the project's own repository (a
// .git directory, or a file naming one, as linked work trees have) and
// its .gitmodules, not from the user's or the system's configuration,
// nor from files a configuration includes.
func Extra(project string) []string {
	var extra []string
	if h := hooksPath(project); h != "" {
		extra = append(extra, h)
	}
	if b, err := os.ReadFile(filepath.Join(project, ".gitmodules")); err == nil {
		for _, e := range configEntries(string(b)) {
			if e.section == "submodule" && e.key == "path" {
				if rel, ok := inProject(project, e.value); ok {
					extra = append(extra, rel+"/.git")
				}
			}
		}
	}
	return extra
}

// hooksPath is the directory the project's git configuration names as
// core.hooksPath, relative to the project, when it lies in the project;
// "" when there is none or it lies outside.
func hooksPath(project string) string {
	value := ""
	for _, f := range gitConfigs(project) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, e := range configEntries(string(b)) {
			if e.section == "core" && !e.sub && e.key == "hookspath" {
				value = e.value
			}
		}
	}
	if strings.HasPrefix(value, "~") {
		return ""
	}
	rel, _ := inProject(project, value)
	return rel
}

// inProject is p (relative paths taken from the top of the work tree),
// relative to project and clean, when it lies strictly inside it.
func inProject(project, p string) (string, bool) {
	if p == "" {
		return "", false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(project, p)
	}
	rel, err := filepath.Rel(project, filepath.Clean(p))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return filepath.ToSlash(rel), true
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

// configEntry is one key of a git configuration file: its section and
// key in lower case, whether the section has a subsection ([submodule
// "x"]), and its value.
type configEntry struct {
	section, key, value string
	sub                 bool
}

// configEntries are the keys of a git configuration file's text, in order.
func configEntries(text string) []configEntry {
	var out []configEntry
	var section string
	var sub bool
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "["), "]")
			name, rest, _ := strings.Cut(strings.TrimSpace(name), " ")
			section, sub = strings.ToLower(name), strings.TrimSpace(rest) != ""
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			continue
		}
		out = append(out, configEntry{section: section, sub: sub, key: strings.ToLower(strings.TrimSpace(k)), value: configString(strings.TrimSpace(v))})
	}
	return out
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
