package layer

import (
	"strings"

	"github.com/dustin/go-humanize"
)

// Line is the change in a line, as jail_diff and jail-mcp diff list it:
// its letter, path and what to know about it, e.g. "M src/a.go (1.2
// KiB)".
func (c Change) Line() string {
	line := Letter(c.Change) + " " + c.Path
	if c.Type == "dir" && c.Change != "deleted" {
		line += "/"
	}
	var notes []string
	switch {
	case c.Change == "type_changed":
		notes = append(notes, c.HostType+" -> "+c.Type)
	case c.Type == "file" && c.Change != "deleted":
		notes = append(notes, humanize.IBytes(uint64(c.Size)))
	case c.Type != "file" && c.Type != "dir":
		notes = append(notes, c.Type)
	}
	if c.Target != "" {
		line += " -> " + c.Target
	}
	if c.Mode != "" {
		notes = append(notes, "mode "+c.Mode)
	}
	if c.Special {
		notes = append(notes, "never applied")
	}
	if c.Hash != "" {
		notes = append(notes, "sha256 "+c.Hash[:min(12, len(c.Hash))])
	}
	if c.Conflict != "" {
		notes = append(notes, "CONFLICT: the host "+HostDid(c.Conflict)+" it too")
	}
	if len(notes) > 0 {
		line += " (" + strings.Join(notes, ", ") + ")"
	}
	return line
}

// Letter is a kind of change as git status shows it (~ for an ignored
// directory whose changes are of more than one kind).
func Letter(change string) string {
	switch change {
	case "added":
		return "A"
	case "modified":
		return "M"
	case "deleted":
		return "D"
	case "type_changed":
		return "T"
	}
	return "~"
}

// Plural is n things, n with thousands separators: "1 file", "1,024
// files".
func Plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return humanize.Comma(int64(n)) + " " + thing + "s"
}

// HostDid is what the host did to a path, told by a conflict's kind
// ("modified", "deleted", "added", "unknown"), as a verb: "changed",
// "deleted", "made", "may have changed".
func HostDid(conflict string) string {
	switch conflict {
	case "deleted":
		return "deleted"
	case "added":
		return "made"
	case "unknown":
		return "may have changed"
	}
	return "changed"
}
