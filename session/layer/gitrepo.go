//go:build linux || darwin

package layer

import (
	"path"
	"strings"
)

// repoShaped reports whether a directory holding names is one git takes
// for a repository (setup.c's is_git_directory): a HEAD beside objects
// and refs, or beside a commondir naming where they are. Letter case
// aside, as a case-insensitive file system opens them so. git's
// discovery takes such a directory for a bare repository
// (safe.bareRepository defaults to "all"), and git run there or below
// runs what its config names (core.fsmonitor, at git status).
func repoShaped(names []string) bool {
	var head, objects, refs, common bool
	for _, n := range names {
		switch strings.ToLower(n) {
		case "head":
			head = true
		case "objects":
			objects = true
		case "refs":
			refs = true
		case "commondir":
			common = true
		}
	}
	return head && (objects && refs || common)
}

// repoCheck is what an apply leaves in each directory it writes in, to
// find one git would take for a repository.
type repoCheck struct {
	children map[string][]*entry // the selected changes, by their directory
	removed  map[string]bool     // host directories the apply removes or replaces
	shaped   map[string]bool
}

// makesRepo is why writing the selected change e is refused for leaving
// a repository-shaped directory (e itself, or one above it) in the
// project outside a protected path, "" when it does not: the apply's
// result is judged, what it writes with what the host keeps.
func (a *applier) makesRepo(e *entry, sel []int) string {
	if e.Change.Change == deleted {
		return ""
	}
	if a.repos == nil {
		a.repos = &repoCheck{children: map[string][]*entry{}, removed: map[string]bool{}, shaped: map[string]bool{}}
		for _, i := range sel {
			c := &a.w.entries[i]
			a.repos.children[path.Dir(c.rel)] = append(a.repos.children[path.Dir(c.rel)], c)
			if removesHostDir(c) {
				a.repos.removed[c.rel] = true
			}
		}
	}
	d := e.rel
	if e.Type != "dir" {
		d = path.Dir(d)
	}
	for {
		if a.shapedAfter(d) {
			where := shown(d)
			if d == "." {
				where = "the project's top"
			}
			return "makes a git repository of " + where + ": a HEAD beside objects/ and refs/ (or a commondir) is one to git, " +
				"and git run in it runs what its config names (core.fsmonitor at git status); apply without its HEAD, objects, refs or commondir"
		}
		if d == "." {
			return ""
		}
		d = path.Dir(d)
	}
}

// shapedAfter reports whether the directory d would be repository-shaped
// once the apply is done.
func (a *applier) shapedAfter(d string) bool {
	if s, ok := a.repos.shaped[d]; ok {
		return s
	}
	has := map[string]bool{}
	if !a.repos.removed[d] {
		if f, err := a.root.Open(d); err == nil {
			names, _ := f.Readdirnames(-1)
			f.Close()
			for _, n := range names {
				has[n] = true
			}
		}
	}
	for _, c := range a.repos.children[d] {
		has[path.Base(c.rel)] = c.Change.Change != deleted
	}
	var names []string
	for n, ok := range has {
		if ok {
			names = append(names, n)
		}
	}
	s := repoShaped(names)
	if _, prot := Protected(d); prot {
		s = false // in .git, say: refused as protected already
	}
	a.repos.shaped[d] = s
	return s
}
