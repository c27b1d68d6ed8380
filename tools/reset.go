package tools

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

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
