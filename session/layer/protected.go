// Package layer is the session's copy-on-write view of the project under
// --overlay: what its upper layer changes against the live project (Diff),
// and how those changes reach the project (Apply), never through a path a
// command could redirect. It also holds the protected paths, which no apply
// and no --writable path may touch.
package layer

import (
	"errors"
	"path"
	"strings"
	"unicode"
)

// ProtectedNames are the names that make a project path protected, at any
// depth and in any letter case (a case-insensitive file system opens
// .GIT as .git): what the host runs or trusts without a review, so that a
// change made in the view can never reach it by jail_apply or a
// --writable path.
//
//   - .git: the repository itself (hooks, config naming programs git runs:
//     core.fsmonitor, core.hooksPath, filters); a commit made in the view
//     stays in the view, its patch is what gets applied. A .git file
//     (worktrees, submodules) too.
//   - .gitmodules: submodule URLs and update commands git runs.
//   - .husky: hooks git runs where core.hooksPath names it (husky's setup).
//   - .pre-commit-config.yaml: what pre-commit runs at the next commit.
//   - .mcp.json, .claude, .codex, .gemini, .cursor, .vscode, .idea: the
//     configuration of the assistants and editors on the host (MCP
//     servers, hooks, tasks that run when a folder opens).
//   - .envrc: direnv runs it when a shell enters the directory.
//   - .agent-home: the sessions' jails.
var ProtectedNames = []string{
	".git", ".gitmodules", ".husky", ".pre-commit-config.yaml",
	".mcp.json", ".claude", ".codex", ".gemini", ".cursor", ".vscode", ".idea",
	".envrc", ".agent-home",
}

// ErrBadPath is a project path that is not a clean relative path.
var ErrBadPath = errors.New("not a clean path inside the project")

// Clean checks rel, a path relative to the project with / separators, and
// returns it clean: not absolute, no empty, "." or ".." component, no
// control character (a newline in a name forges lines of a listing), no
// format character or line separator (a bidi override or a U+2028 in a
// name disguises one), only UTF-8. "." alone is the project itself.
func Clean(rel string) (string, error) {
	if rel == "." {
		return rel, nil
	}
	if rel == "" || strings.HasPrefix(rel, "/") || strings.HasSuffix(rel, "/") && len(rel) > 1 {
		rel = strings.TrimSuffix(rel, "/")
		if rel == "" || strings.HasPrefix(rel, "/") {
			return "", ErrBadPath
		}
	}
	for _, r := range rel {
		if unicode.IsControl(r) || r == unicode.ReplacementChar ||
			unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			return "", ErrBadPath
		}
	}
	for _, c := range strings.Split(rel, "/") {
		if c == "" || c == "." || c == ".." {
			return "", ErrBadPath
		}
	}
	if path.Clean(rel) != rel {
		return "", ErrBadPath
	}
	return rel, nil
}

// Protected reports whether rel (clean, relative to the project) is or
// lies in a protected path, and names it. extra are further protected
// paths of this project (the directory its .git/config names as
// core.hooksPath), clean and relative, "." for the whole project; rel
// holding one of them (a directory whose removal or replacement would take
// it along) is protected too. Whether a directory holds a protected name
// is for the caller to find on the host: the names are not paths.
func Protected(rel string, extra ...string) (string, bool) {
	if rel == "." {
		return "", false
	}
	for _, c := range strings.Split(rel, "/") {
		for _, n := range ProtectedNames {
			if strings.EqualFold(c, n) {
				return n, true
			}
		}
	}
	for _, e := range extra {
		if e == "." || strings.EqualFold(rel, e) || hasPrefixFold(rel, e+"/") || hasPrefixFold(e, rel+"/") {
			return e, true
		}
	}
	return "", false
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
