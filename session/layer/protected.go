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
//   - lefthook's and overcommit's configuration (lefthook.yml, and any
//     [.]lefthook[-local].{yml,yaml,toml,json,jsonc} by lefthookName;
//     .lefthook and .lefthook-local, its scripts; .overcommit.yml): what
//     those hook runners run from git's hooks.
//   - .devcontainer, .devcontainer.json: editors run its commands
//     (initializeCommand on the host itself, postCreateCommand) when a
//     folder opens. .github/workflows is not protected: workflows run on
//     a forge's runners, only after a push, which the person reviews; a
//     local runner (act) runs only when asked.
//   - .envrc: direnv runs it when a shell enters the directory.
//   - .agent-home: the sessions' jails.
var ProtectedNames = []string{
	".git", ".gitmodules", ".husky", ".pre-commit-config.yaml",
	"lefthook.yml", ".lefthook.yml", "lefthook-local.yml", ".lefthook-local.yml",
	".lefthook", ".lefthook-local", ".overcommit.yml",
	".mcp.json", ".claude", ".codex", ".gemini", ".cursor", ".vscode", ".idea",
	".devcontainer", ".devcontainer.json",
	".envrc", ".agent-home",
}

// anyDepth marks an extra protected path that is protected wherever it
// lies in the project: "**/.githooks" is .githooks and a/.githooks (a
// relative core.hooksPath of every repository, nested ones too).
const anyDepth = "**/"

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
// it along) is protected too. One marked anyDepth is protected at any
// depth (rel is or lies in it, or in d/it for any directory d). Whether a directory holds a protected name
// is for the caller to find on the host: the names are not paths.
func Protected(rel string, extra ...string) (string, bool) {
	if rel == "." {
		return "", false
	}
	for _, c := range strings.Split(rel, "/") {
		if lefthookName(c) {
			return "lefthook's configuration", true
		}
		for _, n := range ProtectedNames {
			if strings.EqualFold(c, n) {
				return n, true
			}
		}
	}
	for _, e := range extra {
		if p, ok := strings.CutPrefix(e, anyDepth); ok {
			if inAtAnyDepth(rel, p) {
				return e, true
			}
			continue
		}
		if e == "." || strings.EqualFold(rel, e) || hasPrefixFold(rel, e+"/") || hasPrefixFold(e, rel+"/") {
			return e, true
		}
	}
	return "", false
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// inAtAnyDepth reports whether rel is or lies in p, or in d/p for some
// directory d, letter case aside.
func inAtAnyDepth(rel, p string) bool {
	rc, pc := strings.Split(rel, "/"), strings.Split(p, "/")
	for i := 0; i+len(pc) <= len(rc); i++ {
		match := true
		for j := range pc {
			if !strings.EqualFold(rc[i+j], pc[j]) {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// lefthookName reports whether c is one of the names lefthook reads its
// configuration from, in any letter case.
func lefthookName(c string) bool {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(strings.ToLower(c), "."), "lefthook")
	if !ok {
		return false
	}
	rest = strings.TrimPrefix(rest, "-local")
	switch rest {
	case ".yml", ".yaml", ".toml", ".json", ".jsonc":
		return true
	}
	return false
}
