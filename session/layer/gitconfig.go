//go:build linux || darwin

package layer

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// What git reads as configuration, and where it runs hooks and programs
// from, for the project: found as git finds them, never by running git
// (whose configuration can name programs), so that an apply never writes
// a file git then reads as configuration (core.fsmonitor, core.pager,
// core.sshCommand run programs), runs as a hook, or runs as a program
// its configuration names.

// maxIncludeDepth is git's own bound on nested includes
// (MAX_INCLUDE_DEPTH): deeper, git dies.
const maxIncludeDepth = 10

// maxGitConfig bounds a configuration file read: no real one is this
// big; a bigger one refuses the apply.
const maxGitConfig = 4 << 20

// lookupEnv reads the server's environment, which is its user's: git run
// by that user on this host honours HOME, XDG_CONFIG_HOME, GIT_CONFIG_*
// and GIT_DIR as they are set.
var lookupEnv = os.LookupEnv

// systemConfigs are the system-wide files git reads (its ETC_GITCONFIG,
// which depends on how git was built): every one that exists is read.
var systemConfigs = map[string][]string{
	"linux":  {"/etc/gitconfig", "/usr/local/etc/gitconfig"},
	"darwin": {"/etc/gitconfig", "/usr/local/etc/gitconfig", "/opt/homebrew/etc/gitconfig", "/Library/Developer/CommandLineTools/usr/share/git-core/gitconfig", "/Applications/Xcode.app/Contents/Developer/usr/share/git-core/gitconfig"},
}

// repo is a repository git may use for the project: its git directory
// and the top of its working tree ("" for a bare one).
type repo struct{ gitdir, top string }

// runValue is a path git may run from: a core.hooksPath, or a program a
// variable names (programPaths), with the directory of the repository's
// configuration it came from ("" for the global, system or environment
// configuration, which applies to every repository).
type runValue struct{ value, repoGitdir string }

// gitScan gathers the project's paths that git reads or runs.
type gitScan struct {
	bases     []string // the project as given and as its real path
	home      string
	protected []string // relative to the project, clean
	runs      []runValue
	worktrees []string // core.worktree values, absolute
}

// newGitScan reads the configuration git reads for every repository
// (the system's, the user's, the environment's), once for all the
// repositories of the project.
func newGitScan(project string) (*gitScan, error) {
	s := &gitScan{bases: []string{filepath.Clean(project)}}
	if r := evalOr(project); r != s.bases[0] {
		s.bases = append(s.bases, r)
	}
	s.home, _ = lookupEnv("HOME")
	for _, f := range globalConfigs() {
		if err := s.file(f, "", 0); err != nil {
			return nil, err
		}
	}
	if err := s.envConfig(); err != nil {
		return nil, err
	}
	return s, nil
}

// repoAt is the project's paths that git reads as configuration or runs
// for the repository it finds from dir, a directory of the project (the
// project, or a repository nested in it): the git directory and the
// common one when they lie in the project (a .git file's gitdir:), every
// configuration file git reads for it that lies in the project
// (includes, followed as git does; a conditional one as if its
// condition held), and each directory a core.hooksPath of any of them
// names and each program a variable of them names (programPaths), or
// "**/name" for a relative one from the configuration of every
// repository (s: global, system, environment), which applies in every
// repository. A configuration file that exists but cannot be read or
// parsed is an error: what it names is unknown. s is left as it was.
func (s *gitScan) repoAt(dir string) ([]string, error) {
	repos, err := discover(filepath.Clean(dir))
	if err != nil {
		return nil, err
	}
	s = &gitScan{bases: s.bases, home: s.home, protected: slices.Clone(s.protected),
		runs: slices.Clone(s.runs), worktrees: slices.Clone(s.worktrees)}
	for _, r := range repos {
		s.protect(r.gitdir)
		common, err := commonDir(r.gitdir)
		if err != nil {
			return nil, err
		}
		s.protect(common)
		for _, f := range []string{filepath.Join(common, "config"), filepath.Join(r.gitdir, "config.worktree")} {
			if err := s.file(f, r.gitdir, 0); err != nil {
				return nil, err
			}
		}
	}
	s.runPaths(repos)
	return s.protected, nil
}

// discover finds the repositories git may use in the project: the first
// directory from the project up that holds a .git (a directory, or a
// file naming one) or is itself a repository, and GIT_DIR's when set.
func discover(project string) ([]repo, error) {
	var out []repo
	if d, ok := lookupEnv("GIT_DIR"); ok && d != "" {
		top, _ := lookupEnv("GIT_WORK_TREE")
		out = append(out, repo{gitdir: absFrom(project, d), top: top})
	}
	for d := project; ; d = filepath.Dir(d) {
		dotgit := filepath.Join(d, ".git")
		fi, err := os.Stat(dotgit)
		switch {
		case err == nil && fi.IsDir():
			return append(out, repo{dotgit, d}), nil
		case err == nil:
			gd, err := readGitFile(dotgit)
			if err != nil {
				return nil, err
			}
			return append(out, repo{absFrom(d, gd), d}), nil
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTDIR):
			return nil, fmt.Errorf("looking at %s: %w", dotgit, err)
		}
		if repoShaped(dirNames(d)) {
			return append(out, repo{d, ""}), nil
		}
		if filepath.Dir(d) == d {
			return out, nil
		}
	}
}

// readGitFile is the gitdir a .git file names.
func readGitFile(name string) (string, error) {
	data, err := readConfigFile(name)
	if err != nil {
		return "", fmt.Errorf("reading the .git file %s: %w", name, err)
	}
	gd, ok := strings.CutPrefix(strings.TrimRight(data, "\r\n"), "gitdir: ")
	if !ok || gd == "" {
		return "", fmt.Errorf("reading the .git file %s: no gitdir: line", name)
	}
	return gd, nil
}

// commonDir is the repository's common directory: what its commondir
// file names (a linked worktree's main repository), or gitdir itself.
func commonDir(gitdir string) (string, error) {
	data, err := readConfigFile(filepath.Join(gitdir, "commondir"))
	if errors.Is(err, fs.ErrNotExist) {
		return gitdir, nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", filepath.Join(gitdir, "commondir"), err)
	}
	return absFrom(gitdir, strings.TrimRight(data, "\r\n")), nil
}

// globalConfigs are the files git reads before the repository's, in its
// order: the system's (unless GIT_CONFIG_NOSYSTEM), then the user's
// (GIT_CONFIG_GLOBAL, or the XDG file and ~/.gitconfig).
func globalConfigs() []string {
	var out []string
	if v, _ := lookupEnv("GIT_CONFIG_NOSYSTEM"); !gitTrue(v) {
		if f, ok := lookupEnv("GIT_CONFIG_SYSTEM"); ok {
			out = append(out, f)
		} else {
			out = append(out, systemConfigs[runtime.GOOS]...)
		}
	}
	if f, ok := lookupEnv("GIT_CONFIG_GLOBAL"); ok {
		return append(out, f)
	}
	home, hasHome := lookupEnv("HOME")
	if x, _ := lookupEnv("XDG_CONFIG_HOME"); x != "" {
		out = append(out, filepath.Join(x, "git", "config"))
	} else if hasHome {
		out = append(out, filepath.Join(home, ".config", "git", "config"))
	}
	if hasHome {
		out = append(out, filepath.Join(home, ".gitconfig"))
	}
	return out
}

// gitTrue is git's reading of a boolean variable of the environment.
func gitTrue(v string) bool {
	switch strings.ToLower(v) {
	case "", "0", "false", "no", "off":
		return false
	}
	return true
}

// file reads the configuration file name (repoGitdir "" for one of every
// repository) and what it includes. name is protected when it lies in
// the project, whether it exists or not: a file the apply made there
// would be read next time.
func (s *gitScan) file(name, repoGitdir string, depth int) error {
	if depth > maxIncludeDepth {
		return fmt.Errorf("reading the git configuration %s: more than %d includes deep", name, maxIncludeDepth)
	}
	if name == "" {
		return nil // git reads nothing for an empty GIT_CONFIG_GLOBAL
	}
	s.protect(name)
	data, err := readConfigFile(name)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the git configuration %s: %w", name, err)
	}
	vars, err := parseGitConfig(data)
	if err != nil {
		return fmt.Errorf("reading the git configuration %s: %w", name, err)
	}
	for _, v := range vars {
		if !s.note(v, repoGitdir) {
			continue
		}
		inc, err := s.expand(v.value)
		if err != nil {
			return fmt.Errorf("reading the git configuration %s: %w", name, err)
		}
		if err := s.file(absFrom(filepath.Dir(name), inc), repoGitdir, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// note records v when it names hooks, a program or a working tree, and
// reports whether it is an include (include.path,
// includeIf.<condition>.path: every condition taken as holding).
func (s *gitScan) note(v gitVar, repoGitdir string) bool {
	switch {
	case v.section == "core" && v.subsection == "" && v.key == "hookspath":
		s.runs = append(s.runs, runValue{v.value, repoGitdir})
	case v.section == "core" && v.subsection == "" && v.key == "worktree" && repoGitdir != "":
		if w, err := s.expand(v.value); err == nil {
			s.worktrees = append(s.worktrees, absFrom(repoGitdir, w))
		}
	case v.key == "path" && (v.section == "include" && v.subsection == "" || v.section == "includeif"):
		return v.value != ""
	default:
		for _, p := range programPaths(v) {
			s.runs = append(s.runs, runValue{p, repoGitdir})
		}
	}
	return false
}

// envConfig reads GIT_CONFIG_COUNT and its GIT_CONFIG_KEY_<n> /
// GIT_CONFIG_VALUE_<n> pairs, which git takes as configuration of every
// repository.
func (s *gitScan) envConfig() error {
	c, ok := lookupEnv("GIT_CONFIG_COUNT")
	if !ok || c == "" {
		return nil
	}
	n, err := strconv.Atoi(c)
	if err != nil || n < 0 || n > 1<<16 {
		return fmt.Errorf("reading GIT_CONFIG_COUNT %q: not a count git takes", c)
	}
	for i := range n {
		key, _ := lookupEnv("GIT_CONFIG_KEY_" + strconv.Itoa(i))
		value, _ := lookupEnv("GIT_CONFIG_VALUE_" + strconv.Itoa(i))
		first := strings.Index(key, ".")
		last := strings.LastIndex(key, ".")
		if first < 0 {
			continue
		}
		v := gitVar{section: strings.ToLower(key[:first]), key: strings.ToLower(key[last+1:]), value: value}
		if last > first {
			v.subsection = key[first+1 : last]
		}
		if !s.note(v, "") {
			continue
		}
		inc, err := s.expand(value)
		if err != nil {
			return fmt.Errorf("reading GIT_CONFIG_KEY_%d: %w", i, err)
		}
		if filepath.IsAbs(inc) { // git refuses a relative one here
			if err := s.file(inc, "", 1); err != nil {
				return err
			}
		}
	}
	return nil
}

// expand is a path value as git interpolates it: "~/" is HOME,
// "~user/" that user's home.
func (s *gitScan) expand(v string) (string, error) {
	if !strings.HasPrefix(v, "~") {
		return v, nil
	}
	name, rest, _ := strings.Cut(v[1:], "/")
	if name == "" {
		if s.home == "" {
			return "", fmt.Errorf("expanding %q: no HOME", v)
		}
		return filepath.Join(s.home, rest), nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return "", fmt.Errorf("expanding %q: %w", v, err)
	}
	return filepath.Join(u.HomeDir, rest), nil
}

// runPaths protects each directory a core.hooksPath names and each
// program a variable names. A relative one is taken from where git runs
// hooks and programs, the top of the working tree (the project, the
// repository's top, its core.worktree; the git directory of a bare
// repository); one of every repository also at any depth, for the
// repositories nested in the project. Its leading ".." are dropped
// there: what is left names the path wherever it lands.
func (s *gitScan) runPaths(repos []repo) {
	tops := slices.Clone(s.bases)
	for _, r := range repos {
		if r.top != "" {
			tops = append(tops, absFrom(s.bases[0], r.top))
		} else {
			tops = append(tops, r.gitdir)
		}
	}
	tops = append(tops, s.worktrees...)
	for _, h := range s.runs {
		v, err := s.expand(h.value)
		if err != nil || v == "" {
			continue
		}
		if filepath.IsAbs(v) {
			s.protect(v)
			continue
		}
		for _, t := range tops {
			s.protect(filepath.Join(t, v))
		}
		if h.repoGitdir != "" {
			continue
		}
		rest := path.Clean(filepath.ToSlash(v))
		for rest == ".." || strings.HasPrefix(rest, "../") {
			rest = strings.TrimPrefix(strings.TrimPrefix(rest, ".."), "/")
		}
		if rest == "" || rest == "." {
			s.add(".")
		} else if c, err := Clean(rest); err == nil {
			s.add(anyDepth + c)
		}
	}
}

// protect adds the absolute path p when it lies in the project, as
// written and as its real path.
func (s *gitScan) protect(p string) {
	if !filepath.IsAbs(p) {
		return
	}
	for _, q := range []string{filepath.Clean(p), realPrefix(p)} {
		for _, b := range s.bases {
			rel, err := filepath.Rel(b, q)
			if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				continue
			}
			if c, err := Clean(filepath.ToSlash(rel)); err == nil {
				s.add(c)
			}
		}
	}
}

// add protects rel once: not when a protected name (.git) or a path
// already protected holds it, and in place of the paths it holds.
func (s *gitScan) add(rel string) {
	if _, ok := Protected(rel); ok && !strings.HasPrefix(rel, anyDepth) {
		return
	}
	holds := func(p, q string) bool { // p holds q
		return p == q || p == "." && !strings.HasPrefix(q, anyDepth) || below(q, p)
	}
	for _, p := range s.protected {
		if holds(p, rel) {
			return
		}
	}
	s.protected = slices.DeleteFunc(s.protected, func(p string) bool { return holds(rel, p) })
	s.protected = append(s.protected, rel)
}

// readConfigFile reads a file git reads as configuration, following
// links as git does, but never blocking on a FIFO nor reading a device.
// A missing file is an fs.ErrNotExist.
func readConfigFile(name string) (string, error) {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", errNotRegular
	}
	data, err := io.ReadAll(io.LimitReader(f, maxGitConfig+1))
	if err != nil {
		return "", err
	}
	if len(data) > maxGitConfig {
		return "", fmt.Errorf("more than %d bytes", maxGitConfig)
	}
	return string(data), nil
}

// absFrom is p, taken relative to dir when it is not absolute.
func absFrom(dir, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}

// realPrefix is p with the links of its longest existing prefix
// resolved.
func realPrefix(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest)
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// dirNames is the names in the directory d, none when it cannot be
// listed.
func dirNames(d string) []string {
	f, err := os.Open(d)
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	return names
}
