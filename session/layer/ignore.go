package layer

import (
	"bytes"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// maxIgnoreFile is the largest .gitignore (or info/exclude) read; a larger
// one is skipped whole, as git skips one over 100 MiB: its paths are then
// listed rather than summarised, the side that hides nothing.
const maxIgnoreFile = 1 << 20

// ignorer decides which paths .gitignore ignores, as git would in the
// view: each directory's .gitignore applies below it, a deeper one and a
// later line win, .git/info/exclude loses to all of them, and nothing
// below an ignored directory is taken back by a negation (git does not
// look into an ignored directory). The walk pushes a directory's patterns
// on the way down and pops them on the way up.
type ignorer struct {
	patterns []gitignore.Pattern
}

// parseIgnore parses the lines of an ignore file found in the directory
// domain (its path's components).
func parseIgnore(data []byte, domain []string) []gitignore.Pattern {
	var ps []gitignore.Pattern
	for line := range bytes.Lines(data) {
		s := strings.TrimSuffix(strings.TrimSuffix(string(line), "\n"), "\r")
		if strings.HasPrefix(s, "#") || strings.TrimSpace(s) == "" {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(s, domain))
	}
	return ps
}

// push adds the patterns of a directory's ignore file and returns what
// pop takes back to.
func (ig *ignorer) push(ps []gitignore.Pattern) int {
	n := len(ig.patterns)
	ig.patterns = append(ig.patterns, ps...)
	return n
}

func (ig *ignorer) pop(n int) { ig.patterns = ig.patterns[:n] }

// ignored reports whether path (its components) is ignored, given that
// no directory above it is. A .git at any depth is, as git never lists
// one: its churn (objects, index) is summarised, not listed.
func (ig *ignorer) ignored(path []string, isDir bool) bool {
	if strings.EqualFold(path[len(path)-1], ".git") {
		return true
	}
	for i := len(ig.patterns) - 1; i >= 0; i-- {
		if m := ig.patterns[i].Match(path, isDir); m != gitignore.NoMatch {
			return m == gitignore.Exclude
		}
	}
	return false
}
