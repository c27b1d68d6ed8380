// Package tools is the thin MCP adapter: it declares jailed_exec,
// jail_status, jail_reset and jail_job (and under --overlay jail_diff,
// jail_apply and jail_discard), validates their arguments, calls the session
// package and shapes the results. Nothing here knows how a jail works.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jail-mcp/jail-mcp/session"
)

// Handler holds what every tool needs.
type Handler struct {
	Manager *session.Manager
	// Session returns the session of the request's MCP session.
	Session func(ctx context.Context) (*session.Session, error)
	Version string
	// Reason and Hint say why no backend confines, when none does.
	Reason, Hint string
	// BackendName is the backend configured or probed, also when unavailable.
	BackendName string
	// OverlayMode is --overlay (auto, on, off), OverlayReason why the
	// project view is on or off, OverlayHint what would turn it on.
	OverlayMode, OverlayReason, OverlayHint string
	// ApplyMode is --apply: who says yes to a jail_apply (ApplyAsk,
	// ApplyAllow, ApplyNever; "" is allow).
	ApplyMode string
}

// Register adds the tools to srv.
func (h *Handler) Register(srv *server.MCPServer) {
	handlers := map[string]server.ToolHandlerFunc{
		"jailed_exec": h.Exec, "jail_status": h.Status, "jail_reset": h.Reset, "jail_job": h.Job,
		"jail_diff": h.Diff, "jail_apply": h.Apply, "jail_discard": h.Discard,
	}
	cfg := h.Manager.Config()
	for _, t := range definitions(cfg.Network, cfg.Overlay) {
		srv.AddTool(t, handlers[t.Name])
	}
}

// RegisterRefusing adds the same tools to srv with handlers that refuse
// every call with msg: the server of a bad configuration, which still
// tells the client why through MCP.
func RegisterRefusing(srv *server.MCPServer, msg string) {
	no := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) { return refuse("%s", msg), nil }
	for _, t := range definitions(true, false) {
		srv.AddTool(t, no)
	}
}

// sessionNoArgs is the session of a call to a tool that takes no
// arguments, or the refusal to answer the call with.
func (h *Handler) sessionNoArgs(ctx context.Context, req mcp.CallToolRequest) (*session.Session, *mcp.CallToolResult) {
	if err := decode(req, &struct{}{}, nil); err != nil {
		return nil, refuse("refused: %v", err)
	}
	s, err := h.Session(ctx)
	if err != nil {
		return nil, refuse("refused: %v", err)
	}
	return s, nil
}

// decode reads a tool's arguments into v strictly: unknown arguments and
// wrong types are refused with one line a model can act on.
func decode(req mcp.CallToolRequest, v any, known []string) error {
	raw, err := json.Marshal(req.GetRawArguments())
	if err != nil {
		return fmt.Errorf("arguments are not JSON: %v", err)
	}
	if string(raw) == "null" {
		raw = []byte("{}")
	}
	// encoding/json matches names case-insensitively; arguments must match
	// exactly, as the schema's additionalProperties: false says.
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) == nil {
		for name, value := range fields {
			if !slices.Contains(known, name) {
				return fmt.Errorf("unknown argument %q (known: %s)", name, strings.Join(known, ", "))
			}
			if err := checkStringMap(name, value); err != nil {
				return err
			}
		}
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return fmt.Errorf("arguments must be a JSON object, got %s", typeErr.Value)
		}
		return fmt.Errorf("argument %s: want %s, got %s", typeErr.Field, jsonType(typeErr.Type.Kind().String()), typeErr.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return fmt.Errorf("unknown argument %s (known: %s)", name, strings.Join(known, ", "))
	}
	return fmt.Errorf("arguments: %v", strings.TrimPrefix(err.Error(), "json: "))
}

// checkStringMap names the key of an object-of-strings argument whose value
// is not a string.
func checkStringMap(name string, value json.RawMessage) error {
	var m map[string]any
	if json.Unmarshal(value, &m) != nil {
		return nil
	}
	for k, v := range m {
		if _, ok := v.(string); !ok {
			return fmt.Errorf("argument %s: value of %s must be a string, got %s", name, k, jsonKind(v))
		}
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "string"
}

func jsonType(kind string) string {
	switch kind {
	case "int", "int64", "int32", "uint", "uint64":
		return "an integer"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return kind
}

// refuse is a result for a call that did not run: one line, isError.
func refuse(format string, a ...any) *mcp.CallToolResult {
	msg := fmt.Sprintf(format, a...)
	msg = strings.ReplaceAll(strings.TrimSpace(msg), "\n", " ")
	return &mcp.CallToolResult{
		Content: []mcp.Content{mcp.NewTextContent(msg)},
		IsError: true,
	}
}

func structured(v any, text string, isError bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content:           []mcp.Content{mcp.NewTextContent(text)},
		StructuredContent: v,
		IsError:           isError,
	}
}
