package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jail-mcp/jail-mcp/session"
	"github.com/jail-mcp/jail-mcp/session/layer"
	"github.com/jail-mcp/jail-mcp/tools/result"
)

var diffFields = fieldsOf("diff")

// DiffResult is the structured result of jail_diff (result.Diff).
type DiffResult = result.Diff

type diffParams struct {
	Patch bool `json:"patch"`
	All   bool `json:"all"`
}

// Diff is the jail_diff tool.
func (h *Handler) Diff(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var p diffParams
	if err := decode(req, &p, diffFields); err != nil {
		return refuse("refused: %v", err), nil
	}
	s, err := h.Session(ctx)
	if err != nil {
		return refuse("refused: %v", err), nil
	}
	d, err := s.Diff(layer.Options{All: p.All, Patch: p.Patch})
	if err != nil {
		return refuseView(err), nil
	}
	out := result.NewDiff(s, d)
	return structured(out, renderDiff(out, p.Patch), false), nil
}

// refuseView is the result of a jail_diff or jail_apply that could not
// look at the layer.
func refuseView(err error) *mcp.CallToolResult {
	if errors.Is(err, session.ErrNoView) {
		return refuse("refused: %v", err)
	}
	return refuse("%v", err)
}

// maxChangeLines bounds the changes a result's text lists, one a line.
const maxChangeLines = 100

func renderDiff(d DiffResult, patch bool) string {
	var b strings.Builder
	if len(d.Changes) == 0 && len(d.Ignored) == 0 {
		b.WriteString("no changes in the project view: it shows the host's project as it is\n")
	} else {
		fmt.Fprintf(&b, "the project view changes %s against the host's project", plural(len(d.Changes), "path"))
		if len(d.Ignored) > 0 {
			files := 0
			for _, s := range d.Ignored {
				files += s.Files
			}
			fmt.Fprintf(&b, ", and %s under %s that .gitignore ignores (all: true lists them)",
				plural(files, "file"), plural(len(d.Ignored), "path"))
		}
		b.WriteString("; jail_apply copies paths to the host\n")
	}
	lines := 0
	for _, c := range d.Changes {
		if lines == maxChangeLines {
			break
		}
		b.WriteString(changeLine(c) + "\n")
		lines++
	}
	for _, s := range d.Ignored {
		if lines == maxChangeLines {
			break
		}
		fmt.Fprintf(&b, "%s %s: %s, %s (ignored)\n", layer.Letter(s.Change), s.Dir, plural(s.Files, "file"), humanize.IBytes(uint64(s.Bytes)))
		lines++
	}
	if more := len(d.Changes) + len(d.Ignored) - lines; more > 0 {
		fmt.Fprintf(&b, "... %d more (changes and ignored list them all)\n", more)
	}
	for _, line := range session.LayerNotes(d.Conflicts, nil) {
		b.WriteString(line + "\n")
	}
	b.WriteString(digestLine(d.Digest))
	switch {
	case !patch:
	case d.PatchBytes == 0:
		b.WriteString("--- patch: empty (no text file changed) ---\n")
	default:
		fmt.Fprintf(&b, "--- patch (%d bytes) ---\n", d.PatchBytes)
		b.WriteString(d.Patch)
		if !strings.HasSuffix(d.Patch, "\n") {
			b.WriteString("\n")
		}
	}
	if patch {
		for _, c := range d.Changes {
			if c.ConflictPatch != "" {
				b.WriteString("--- " + c.ConflictPatch)
			}
		}
	}
	return b.String()
}

// changeLine is one change in a line (layer.Change.Line).
func changeLine(c layer.Change) string { return c.Line() }

// plural is n things (layer.Plural).
func plural(n int, thing string) string { return layer.Plural(n, thing) }

// digestLine is the line that gives a result's digest.
func digestLine(digest string) string {
	if digest == "" {
		return ""
	}
	return "digest " + digest + " (jail_apply's digest: applies only what this listed)\n"
}
