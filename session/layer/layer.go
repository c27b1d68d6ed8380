package layer

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Options choose what Compute lists.
type Options struct {
	All   bool // paths .gitignore ignores are listed one by one, not summarised
	Patch bool // a unified patch of the text files changed
	// Unread, when set, names the project paths (relative) whose host
	// side no patch shows: the --deny-read list, which no command reads
	// and the server does not read for it either.
	Unread func(rel string) bool
}

// Change is one path the view shows differently from the host.
type Change struct {
	Path     string `json:"path"`                // relative to the project, / separated (see shown)
	Change   string `json:"change"`              // "added", "modified", "deleted", "type_changed"
	Type     string `json:"type"`                // in the view: "file", "dir", "symlink", "fifo", "socket", "device"; for "deleted": the host's type
	HostType string `json:"host_type,omitempty"` // the host's type for "modified" and "type_changed"
	Size     int64  `json:"size"`                // bytes in the view (regular files), 0 otherwise
	HostSize int64  `json:"host_size,omitempty"`
	Mode     string `json:"mode,omitempty"`    // permission bits in the view when they differ from the host's, e.g. "0755"
	Special  bool   `json:"special,omitempty"` // a symlink, device, FIFO or socket in the view: shown, never applied
	Target   string `json:"target,omitempty"`  // a symlink's target (see shown)
	Hash     string `json:"hash,omitempty"`    // the sha256 of a regular file's bytes in the view (digest.go)
	// Conflict: the host changed the path after the session's layer
	// copied it ("modified", "deleted", "added", "unknown"; set by the
	// session from its ledger); ConflictPatch shows both sides.
	Conflict      string `json:"conflict,omitempty"`
	ConflictPatch string `json:"conflict_patch,omitempty"`
}

// Summary is what the view changes under one top directory (or file) of
// the project that .gitignore ignores, e.g. "node_modules/", so that an
// npm install does not list twenty thousand files.
type Summary struct {
	Dir    string `json:"dir"`
	Change string `json:"change"` // "added", "modified", "deleted", or "mixed"
	Files  int    `json:"files"`  // changes of anything but a directory
	Bytes  int64  `json:"bytes"`  // their sizes in the view, the host's for a deletion
}

// Diff is what the view changes against the host.
type Diff struct {
	Changes []Change  // sorted by path, component by component: a directory's entries follow it
	Ignored []Summary // sorted by Dir
	Patch   []byte    // the whole unified patch when Options.Patch (the caller bounds it)
	Digest  string    // binds an Apply to this listing (digest.go)
}

// Refusal is a path Apply would not write, and why.
type Refusal struct {
	Path, Reason string
}

// Applied is what an Apply wrote to the project, or with DryRun would
// write; with any refusal it wrote nothing.
type Applied struct {
	Changes []Change  // what was (or, dry run, would be) written to the project
	Refused []Refusal // when any, nothing was written
	DryRun  bool
	Digest  string // the layer's digest when Apply looked (digest.go)
}

// The kinds of change.
const (
	added       = "added"
	modified    = "modified"
	deleted     = "deleted"
	typeChanged = "type_changed"
	mixed       = "mixed"
)

// shown is how a name from the layer is listed (a path, a link's target,
// a patch's file name): as it is, or Go-quoted (strconv.Quote: "a\nb",
// "\u202e") when it holds anything but printable characters, is not
// UTF-8, or starts with a double quote. A command names its files, and a
// newline or a bidi override in a listed name would forge or disguise a
// line of the listing the user reviews; the leading quote keeps the two
// forms apart, and Apply takes a quoted path back (unquote).
func shown(s string) string {
	if needsQuote(s) {
		return strconv.Quote(s)
	}
	return s
}

// Shown is how a name from the layer is listed: shown.
func Shown(s string) string { return shown(s) }

// Unquote is the path a listed name stands for: Shown's inverse.
func Unquote(s string) (string, error) { return unquote(s) }

func needsQuote(s string) bool {
	if strings.HasPrefix(s, `"`) || !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return true
		}
	}
	return false
}

// unquote is the path a listed name stands for: shown's inverse.
func unquote(s string) (string, error) {
	if !strings.HasPrefix(s, `"`) {
		return s, nil
	}
	u, err := strconv.Unquote(s)
	if err != nil {
		return "", ErrBadPath
	}
	return u, nil
}

// splitPath is a clean relative path's components.
func splitPath(rel string) []string { return strings.Split(rel, "/") }
