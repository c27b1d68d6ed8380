package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jail-mcp/jail-mcp/session"
	"github.com/jail-mcp/jail-mcp/tools/result"
)

var applyFields = fieldsOf("apply")

// ApplyResult is the structured result of jail_apply (result.Apply),
// and Refusal a path it did not write.
type (
	ApplyResult = result.Apply
	Refusal     = result.Refusal
)

type applyParams struct {
	Paths  []string `json:"paths"`
	DryRun bool     `json:"dry_run"`
	Digest string   `json:"digest"`
}

// Apply is the jail_apply tool.
func (h *Handler) Apply(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var p applyParams
	if err := decode(req, &p, applyFields); err != nil {
		return refuse("refused: %v", err), nil
	}
	if len(p.Paths) == 0 {
		return refuse("refused: paths is required: the paths to apply, relative to the project, as jail_diff lists them"), nil
	}
	for i, path := range p.Paths {
		if path == "" {
			return refuse("refused: paths[%d] is empty", i), nil
		}
	}
	s, err := h.Session(ctx)
	if err != nil {
		return refuse("refused: %v", err), nil
	}
	switch mode, _ := h.applyMode(ctx); {
	case p.DryRun:
	case mode == ApplyNever:
		return refuse("refused: jail_apply writes nothing here (--apply never): the user reviews and applies the session's changes with `jail-mcp diff --session %s` and `jail-mcp apply --session %s`; dry_run: true shows what an apply would write", s.Name, s.Name), nil
	case mode == ApplyAsk:
		return h.askApply(ctx, req, s, p), nil
	}
	return h.apply(s, p.Paths, p.DryRun, p.Digest, ""), nil
}

// apply applies session s's changes at paths (or with dryRun says what it
// would), bound to digest when set, and is the tool's result; approval is
// the user's answer that let it (approvalAccepted), or "".
func (h *Handler) apply(s *session.Session, paths []string, dryRun bool, digest, approval string) *mcp.CallToolResult {
	a, err := s.ApplyReviewed(paths, dryRun, digest)
	if err != nil && (a == nil || len(a.Changes) == 0) {
		return refuseView(err)
	}
	out := result.NewApply(s.Name, a)
	out.Approval = approval
	text := renderApply(out)
	if err != nil {
		// Stopped halfway: what was written is listed, and stays written.
		text = fmt.Sprintf("%v\nthe apply stopped after writing %s to the project:\n%s",
			err, plural(len(out.Applied), "change"), strings.SplitN(text, "\n", 2)[1])
	}
	return structured(out, text, err != nil || len(out.Refused) > 0)
}

func renderApply(a ApplyResult) string {
	var b strings.Builder
	switch {
	case len(a.Refused) > 0:
		fmt.Fprintf(&b, "refused %s: nothing was written to the project", plural(len(a.Refused), "path"))
		if a.DryRun {
			b.WriteString(" (dry run)")
		}
		b.WriteString("; call again without the refused paths to apply the others\n")
		for i, r := range a.Refused {
			if i == maxChangeLines {
				fmt.Fprintf(&b, "... %d more (refused lists them all)\n", len(a.Refused)-i)
				break
			}
			fmt.Fprintf(&b, "refused %s: %s\n", r.Path, r.Reason)
		}
		return b.String()
	case a.DryRun:
		fmt.Fprintf(&b, "dry run: would apply %s to the project; nothing was written\n", plural(len(a.Applied), "change"))
	case a.Approval == approvalAccepted:
		fmt.Fprintf(&b, "the user accepted: applied %s to the project; they left the session's layer\n", plural(len(a.Applied), "change"))
	default:
		fmt.Fprintf(&b, "applied %s to the project; they left the session's layer\n", plural(len(a.Applied), "change"))
	}
	for i, c := range a.Applied {
		if i == maxChangeLines {
			fmt.Fprintf(&b, "... %d more (applied lists them all)\n", len(a.Applied)-i)
			break
		}
		b.WriteString(changeLine(c) + "\n")
	}
	b.WriteString(digestLine(a.Digest))
	return b.String()
}
