package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/jail-mcp/jail-mcp/tools/result"
	"github.com/mark3labs/mcp-go/mcp"
)

var discardFields = fieldsOf("discard")

// DiscardResult is the structured result of jail_discard
// (result.Discard).
type DiscardResult = result.Discard

type discardParams struct {
	Paths []string `json:"paths"`
}

// Discard is the jail_discard tool.
func (h *Handler) Discard(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var p discardParams
	if err := decode(req, &p, discardFields); err != nil {
		return refuse("refused: %v", err), nil
	}
	if len(p.Paths) == 0 {
		return refuse("refused: paths is required: the paths whose session copy to drop, as jail_diff lists them"), nil
	}
	s, err := h.Session(ctx)
	if err != nil {
		return refuse("refused: %v", err), nil
	}
	dropped, err := s.Discard(p.Paths)
	if err != nil && len(dropped) == 0 {
		return refuseView(err), nil
	}
	out := DiscardResult{Session: s.Name, Discarded: append([]string{}, dropped...)}
	var b strings.Builder
	if err != nil {
		fmt.Fprintf(&b, "%v\nthe discard stopped after dropping %s:\n", err, plural(len(dropped), "path"))
	} else {
		fmt.Fprintf(&b, "dropped the session's copy of %s: commands see the host's\n", plural(len(dropped), "path"))
	}
	for i, d := range dropped {
		if i == maxChangeLines {
			fmt.Fprintf(&b, "... %d more (discarded lists them all)\n", len(dropped)-i)
			break
		}
		b.WriteString(d + "\n")
	}
	return structured(out, b.String(), err != nil), nil
}
