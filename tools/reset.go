package tools

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

var resetOutputSchema = schema("reset.output")

// resetTool is jail_reset's declaration; view: the project view is on.
func resetTool(view bool) mcp.Tool {
	desc := "Kill every running command of this session and empty its jail " +
		"(never following a symlink out of it), then recreate the empty HOME skeleton."
	if view {
		desc += " This also discards every change made in the project view that jail_apply " +
			"has not copied to the host (jail_diff lists them)."
	}
	return newTool("jail_reset", desc,
		emptyInputSchema, resetOutputSchema,
		annotations("Reset the jail", false, true, true, false))

}

// ResetResult is the structured result of jail_reset.
type ResetResult struct {
	Session      string `json:"session"`
	Jail         string `json:"jail"`
	RemovedFiles int64  `json:"removed_files"`
	RemovedBytes int64  `json:"removed_bytes"`
	Killed       int    `json:"killed"`
}

// Reset is the jail_reset tool.
func (h *Handler) Reset(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	s, refused := h.sessionNoArgs(ctx, req)
	if refused != nil {
		return refused, nil
	}
	r, err := s.Reset(ctx)
	if err != nil {
		return refuse("%v", err), nil
	}
	out := ResetResult{Session: s.Name, Jail: s.Path, RemovedFiles: r.RemovedFiles, RemovedBytes: r.RemovedBytes, Killed: r.Killed}
	text := fmt.Sprintf("reset %s: removed %d files (%d bytes), killed %d running commands", s.Path, r.RemovedFiles, r.RemovedBytes, r.Killed)
	return structured(out, text, false), nil
}
