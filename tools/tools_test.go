package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session"
)

var update = flag.Bool("update", false, "rewrite testdata/tools.golden")

const maxOutput = 65536

// newServer is an MCP server with the three tools over a fresh project,
// and the manager behind it. Session "t" is the only session.
func newServer(t *testing.T, network bool) (*server.MCPServer, *session.Manager) {
	t.Helper()
	return newServerWith(t, network, true)
}

// newServerWith is newServer; without useBackend, no backend confines and
// every command is refused.
func newServerWith(t *testing.T, network, useBackend bool) (*server.MCPServer, *session.Manager) {
	t.Helper()
	return newServerConfig(t, useBackend, func(c *session.Config) { c.Network = network })
}

// newViewServer is newServer with the project view on (--overlay).
func newViewServer(t *testing.T) (*server.MCPServer, *session.Manager) {
	t.Helper()
	return newServerConfig(t, true, func(c *session.Config) { c.Overlay = true })
}

// newServerConfig is newServer with network on and its configuration
// edited by edit.
func newServerConfig(t *testing.T, useBackend bool, edit func(*session.Config)) (*server.MCPServer, *session.Manager) {
	t.Helper()
	project, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := session.Config{
		Project: project, Root: filepath.Join(project, session.BaseName),
		Network: true, Auth: auth.Names(),
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		Timeout: 60 * time.Second, MaxTimeout: 10 * time.Minute, MaxOutput: maxOutput,
	}
	edit(&cfg)
	b, err := jail.Open(t.Context(), "bwrap", jail.Options{})
	var unavailable *jail.UnavailableError
	if !useBackend {
		err = &jail.UnavailableError{Backend: "bwrap", Reason: "switched off by the test", Hint: "do not"}
	}
	switch {
	case err == nil:
		cfg.Backend = b
	case errors.As(err, &unavailable):
		// Listing tools needs no backend; running them does (see needBackend).
		cfg.Backend = jail.Refusing{Err: unavailable}
	default:
		t.Fatal(err)
	}
	m, err := session.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	s, err := m.Open("t")
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{
		Manager: m, Version: "test", BackendName: "bwrap",
		Reason: reason(unavailable), Hint: hint(unavailable),
		Session: func(context.Context) (*session.Session, error) { return s, nil },
	}
	srv := server.NewMCPServer("jail-mcp", "test", server.WithToolCapabilities(false))
	h.Register(srv)
	return srv, m
}

func reason(ue *jail.UnavailableError) string {
	if ue != nil {
		return ue.Reason
	}
	return ""
}

func hint(ue *jail.UnavailableError) string {
	if ue != nil {
		return ue.Hint
	}
	return ""
}

func needBackend(t *testing.T, m *session.Manager) {
	t.Helper()
	if b, ok := m.Config().Backend.(jail.Refusing); ok {
		t.Fatalf("bwrap cannot confine here (the tests need it; see README): %v", b.Err)
	}
}

// listTools returns the tools of srv as they go over the wire, sorted by
// name.
func listTools(t *testing.T, srv *server.MCPServer) []json.RawMessage {
	t.Helper()
	ctx := t.Context()
	send := func(msg string) []byte {
		resp := srv.HandleMessage(ctx, json.RawMessage(msg))
		b, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"0"}}}`)
	var resp struct {
		Result struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"result"`
		Error any `json:"error"`
	}
	b := send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if err := json.Unmarshal(b, &resp); err != nil || resp.Error != nil {
		t.Fatalf("tools/list: %s (%v)", b, err)
	}
	tools := resp.Result.Tools
	slices.SortFunc(tools, func(a, b json.RawMessage) int { return strings.Compare(toolName(t, a), toolName(t, b)) })
	return tools
}

func toolName(t *testing.T, raw json.RawMessage) string {
	var v struct{ Name string }
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v.Name
}

// wireTool is a listed tool, decoded generically.
type wireTool struct {
	Name         string          `json:"name"`
	InputSchema  map[string]any  `json:"inputSchema"`
	OutputSchema map[string]any  `json:"outputSchema"`
	Annotations  map[string]any  `json:"annotations"`
	Raw          json.RawMessage `json:"-"`
}

func decodeTools(t *testing.T, raws []json.RawMessage) map[string]wireTool {
	t.Helper()
	out := map[string]wireTool{}
	for _, raw := range raws {
		var w wireTool
		if err := json.Unmarshal(raw, &w); err != nil {
			t.Fatal(err)
		}
		w.Raw = raw
		out[w.Name] = w
	}
	return out
}

// TestToolsGolden pins the tools as listed, with the project view off
// and on (jail_diff and jail_apply only then).
func TestToolsGolden(t *testing.T) {
	for _, tt := range []struct {
		golden string
		start  func(t *testing.T) (*server.MCPServer, *session.Manager)
	}{
		{"tools.golden", func(t *testing.T) (*server.MCPServer, *session.Manager) { return newServer(t, true) }},
		{"tools_overlay.golden", newViewServer},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			srv, _ := tt.start(t)
			got, err := json.Marshal(listTools(t, srv))
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := json.Indent(&buf, got, "", "  "); err != nil {
				t.Fatal(err)
			}
			buf.WriteString("\n")
			golden := filepath.Join("testdata", tt.golden)
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./tools -run TestToolsGolden -update)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("tools/list differs from %s (rerun with -update if intended):\n%s", golden, buf.String())
			}
		})
	}
}

// TestSchemasArePortable: every client must accept the schemas, so no
// type is a list and nothing is nullable.
func TestSchemasArePortable(t *testing.T) {
	srv, _ := newViewServer(t) // every tool
	for name, tool := range decodeTools(t, listTools(t, srv)) {
		for kind, schema := range map[string]map[string]any{"input": tool.InputSchema, "output": tool.OutputSchema} {
			if schema == nil {
				t.Errorf("%s: no %s schema", name, kind)
				continue
			}
			if schema["type"] != "object" {
				t.Errorf("%s: %s schema type is %v, want object", name, kind, schema["type"])
			}
			walkSchema(schema, "#", func(path string, v map[string]any) {
				if isPropertyName(path) {
					return // a map of properties, one may be called type
				}
				if ty, ok := v["type"]; ok {
					if s, isString := ty.(string); !isString {
						t.Errorf("%s: %s schema %s: type %v is not a single string", name, kind, path, ty)
					} else if s == "null" {
						t.Errorf("%s: %s schema %s: type null", name, kind, path)
					}
				}
				if _, ok := v["nullable"]; ok {
					t.Errorf("%s: %s schema %s: nullable", name, kind, path)
				}
				for _, k := range []string{"anyOf", "oneOf"} {
					if _, ok := v[k]; ok {
						t.Errorf("%s: %s schema %s: %s", name, kind, path, k)
					}
				}
			})
			// Compiling proves every $ref resolves.
			compileSchema(t, schema)
		}
	}
}

// walkSchema calls f on every object below v, with its JSON pointer.
func walkSchema(v any, path string, f func(string, map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		f(path, v)
		for k, c := range v {
			walkSchema(c, path+"/"+k, f)
		}
	case []any:
		for i, c := range v {
			walkSchema(c, fmt.Sprintf("%s/%d", path, i), f)
		}
	}
}

// TestOutputSchemasRequireEveryProperty: a result always carries every
// field, so clients may rely on them all.
func TestOutputSchemasRequireEveryProperty(t *testing.T) {
	// The properties that are there only when there is something to say
	// (omitempty): a promise's note (jail.Promise), and what a change
	// tells of some kinds only (layer.Change).
	optional := map[string][]string{
		"/$defs/promise": {"note"},
		"/$defs/change":  {"host_type", "host_size", "mode", "special", "target", "hash", "conflict", "conflict_patch"},
	}
	srv, _ := newViewServer(t) // every tool
	for name, tool := range decodeTools(t, listTools(t, srv)) {
		walkSchema(tool.OutputSchema, "#", func(path string, v map[string]any) {
			props, ok := v["properties"].(map[string]any)
			if !ok || isPropertyName(path) {
				return
			}
			var required []string
			for _, r := range asList(v["required"]) {
				required = append(required, fmt.Sprint(r))
			}
			for p := range props {
				if optionalAt(optional, path, p) {
					continue
				}
				if !slices.Contains(required, p) {
					t.Errorf("%s: output schema %s: property %q is not required", name, path, p)
				}
			}
			for _, r := range required {
				if _, ok := props[r]; !ok {
					t.Errorf("%s: output schema %s: required %q is not a property", name, path, r)
				}
			}
		})
	}
}

// optionalAt reports whether property p of the schema at path is one of
// optional's, by the path's end.
func optionalAt(optional map[string][]string, path, p string) bool {
	for def, props := range optional {
		if strings.HasSuffix(path, def) && slices.Contains(props, p) {
			return true
		}
	}
	return false
}

// isPropertyName reports whether path ends at a property's name inside a
// "properties" object, which is a map of schemas and not a schema itself.
func isPropertyName(path string) bool {
	parts := strings.Split(path, "/")
	return len(parts) >= 2 && parts[len(parts)-1] == "properties"
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func TestAnnotations(t *testing.T) {
	type hints struct{ readOnly, destructive, idempotent, openWorld bool }
	for _, tc := range []struct{ network, view bool }{{true, false}, {false, false}, {true, true}} {
		t.Run(fmt.Sprintf("network %v view %v", tc.network, tc.view), func(t *testing.T) {
			network := tc.network
			want := map[string]hints{
				"jailed_exec": {readOnly: false, destructive: true, idempotent: false, openWorld: network},
				"jail_status": {readOnly: true, destructive: false, idempotent: true, openWorld: false},
				"jail_reset":  {readOnly: false, destructive: true, idempotent: true, openWorld: false},
				// It sends input and signals, KILL among them.
				"jail_job": {readOnly: false, destructive: true, idempotent: false, openWorld: false},
			}
			if tc.view {
				want["jail_diff"] = hints{readOnly: true, destructive: false, idempotent: true, openWorld: false}
				// It overwrites and deletes the host's files.
				want["jail_apply"] = hints{readOnly: false, destructive: true, idempotent: false, openWorld: false}
				// It drops the session's changes of a path; again, nothing more.
				want["jail_discard"] = hints{readOnly: false, destructive: true, idempotent: true, openWorld: false}
			}
			srv, _ := newServerConfig(t, true, func(c *session.Config) { c.Network, c.Overlay = network, tc.view })
			tools := decodeTools(t, listTools(t, srv))
			if len(tools) != len(want) {
				t.Errorf("%d tools listed, want %d", len(tools), len(want))
			}
			for name, w := range want {
				tool, ok := tools[name]
				if !ok {
					t.Errorf("%s is not listed", name)
					continue
				}
				a := tool.Annotations
				if title, _ := a["title"].(string); title == "" {
					t.Errorf("%s: no title annotation", name)
				}
				for hint, wantValue := range map[string]bool{
					"readOnlyHint": w.readOnly, "destructiveHint": w.destructive,
					"idempotentHint": w.idempotent, "openWorldHint": w.openWorld,
				} {
					got, ok := a[hint].(bool)
					switch {
					case !ok:
						t.Errorf("%s: %s is not set explicitly (annotations %v)", name, hint, a)
					case got != wantValue:
						t.Errorf("%s: %s = %v, want %v", name, hint, got, wantValue)
					}
				}
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, args string
		want       []string
	}{
		{"unknown argument", `{"command":"true","bogus":1}`, []string{`unknown argument "bogus"`, "command", "timeout_ms"}},
		{"timeout_ms as string", `{"command":"true","timeout_ms":"5"}`, []string{"timeout_ms", "integer", "string"}},
		{"timeout_ms fraction", `{"command":"true","timeout_ms":1.5}`, []string{"timeout_ms", "integer", "1.5"}},
		{"argv as string", `{"argv":"ls -l"}`, []string{"argv", "array", "string"}},
		{"env value as number", `{"command":"true","env":{"A":1}}`, []string{"env", "string", "number"}},
		{"network as string", `{"command":"true","network":"false"}`, []string{"network", "boolean", "string"}},
		{"arguments not an object", `["ls"]`, []string{"object", "array"}},
		{"argument name in another case", `{"Command":"true"}`, []string{`unknown argument "Command"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req mcp.CallToolRequest
			req.Params.Name = "jailed_exec"
			req.Params.RawArguments = json.RawMessage(tt.args)
			var p execParams
			err := decode(req, &p, execFields)
			if err == nil {
				t.Fatalf("decode(%s) = nil, want an error", tt.args)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || msg == "" {
				t.Errorf("error is not one line: %q", msg)
			}
			if strings.Contains(msg, "json:") || strings.Contains(msg, "Go ") || strings.Contains(msg, "tools.") {
				t.Errorf("error leaks Go internals: %q", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}

	t.Run("tools without arguments", func(t *testing.T) {
		var req mcp.CallToolRequest
		req.Params.RawArguments = json.RawMessage(`{"x":1}`)
		err := decode(req, &struct{}{}, nil)
		if err == nil || !strings.Contains(err.Error(), `unknown argument "x"`) {
			t.Errorf("decode = %v, want unknown argument", err)
		}
		for _, none := range []string{``, `null`, `{}`} {
			req.Params.RawArguments = json.RawMessage(none)
			if err := decode(req, &struct{}{}, nil); err != nil {
				t.Errorf("decode(%q) = %v, want nil", none, err)
			}
		}
	})
}

func compileSchema(t *testing.T, schema map[string]any) *jsonschema.Schema {
	t.Helper()
	b, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("compile schema: %v", err)
	}
	return sch
}

// checkStructured validates a result's structured content against the
// tool's output schema, and checks that it carries no field the schema does
// not declare.
func checkStructured(t *testing.T, tool wireTool, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	if res.StructuredContent == nil {
		t.Fatalf("%s: no structuredContent; content %v", tool.Name, res.Content)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := compileSchema(t, tool.OutputSchema).Validate(inst); err != nil {
		t.Errorf("%s: structuredContent does not match the output schema: %v\n%s", tool.Name, err, b)
	}
	props, _ := tool.OutputSchema["properties"].(map[string]any)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	for k := range out {
		if _, ok := props[k]; !ok {
			t.Errorf("%s: structuredContent has %q, which the output schema does not declare", tool.Name, k)
		}
	}
	if len(res.Content) == 0 {
		t.Errorf("%s: no text rendering", tool.Name)
	}
	return out
}

func newClient(t *testing.T, srv *server.MCPServer) *client.Client {
	t.Helper()
	c, err := client.NewInProcessClient(srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	var init mcp.InitializeRequest
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "0"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	return c
}

func callTool(t *testing.T, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(t.Context(), req)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func TestResultsMatchOutputSchemas(t *testing.T) {
	srv, m := newServer(t, true)
	needBackend(t, m)
	tools := decodeTools(t, listTools(t, srv))
	c := newClient(t, srv)
	exec := tools["jailed_exec"]
	jailDir := filepath.Join(m.Config().Root, "t")

	t.Run("exec normal", func(t *testing.T) {
		res := callTool(t, c, "jailed_exec", map[string]any{"command": "echo hi; echo err >&2; exit 3"})
		out := checkStructured(t, exec, res)
		if !res.IsError {
			t.Errorf("exit 3 is not isError")
		}
		if out["exit_code"] != 3.0 || out["stdout"] != "hi\n" || out["stderr"] != "err\n" ||
			out["timed_out"] != false || out["stdout_truncated"] != false || out["output_path"] != "" ||
			out["jail"] != jailDir || out["session"] != "t" || out["confined"] != true || out["backend"] != "bwrap" {
			t.Errorf("unexpected result: %v", out)
		}
		res = callTool(t, c, "jailed_exec", map[string]any{"argv": []string{"true"}})
		checkStructured(t, exec, res)
		if res.IsError {
			t.Errorf("exit 0 is isError: %v", res.Content)
		}
	})

	t.Run("exec timeout", func(t *testing.T) {
		start := time.Now()
		res := callTool(t, c, "jailed_exec", map[string]any{"command": "echo started; sleep 10", "timeout_ms": 300})
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("a 300ms timeout took %v", d)
		}
		out := checkStructured(t, exec, res)
		if !res.IsError || out["timed_out"] != true || out["limit"] != "timeout" || out["stdout"] != "started\n" {
			t.Errorf("isError %v, result %v; want a timeout that kept the output", res.IsError, out)
		}
	})

	t.Run("exec truncated", func(t *testing.T) {
		const n = 200000
		res := callTool(t, c, "jailed_exec", map[string]any{"command": fmt.Sprintf("head -c %d /dev/zero | tr '\\000' a", n)})
		out := checkStructured(t, exec, res)
		if res.IsError || out["stdout_truncated"] != true || out["stdout_bytes"] != float64(n) || out["stderr_truncated"] != false {
			t.Fatalf("isError %v, result fields %v", res.IsError, fieldsExcept(out, "stdout"))
		}
		dir, _ := out["output_path"].(string)
		if !strings.HasPrefix(dir, jailDir+string(filepath.Separator)) {
			t.Fatalf("output_path %q is not inside the jail %s", dir, jailDir)
		}
		if fi, err := os.Stat(filepath.Join(dir, "stdout")); err != nil || fi.Size() != n {
			t.Errorf("whole output not kept in %s: %v", dir, err)
		}
		stdout, _ := out["stdout"].(string)
		head, rest, _ := strings.Cut(stdout, "\n[... ")
		marker, tail, _ := strings.Cut(rest, " ...]\n")
		if strings.Trim(head, "a") != "" || strings.Trim(tail, "a") != "" || head == "" || tail == "" || !strings.Contains(marker, dir) {
			t.Errorf("inline stdout is not head and tail around a marker naming %s: %.200q ... %.200q", dir, head, rest)
		}
		if kept := len(head) + len(tail); kept > maxOutput {
			t.Errorf("inline stdout keeps %d bytes of output, max %d", kept, maxOutput)
		}
		// The marker comes on top of --max-output: the contract's "at most
		// --max-output bytes each" holds for the output kept, not the string.
		t.Logf("inline stdout: %d bytes of output + %d bytes of marker", len(head)+len(tail), len(stdout)-len(head)-len(tail))
	})

	t.Run("exec refused", func(t *testing.T) {
		res := callTool(t, c, "jailed_exec", map[string]any{"command": "true", "timeout_ms": "5"})
		if !res.IsError || res.StructuredContent != nil {
			t.Errorf("a refusal should be isError with text only: %+v", res)
		}
	})

	t.Run("status", func(t *testing.T) {
		out := checkStructured(t, tools["jail_status"], callTool(t, c, "jail_status", nil))
		if out["jail"] != jailDir || out["confined"] != true || out["available"] != true {
			t.Errorf("unexpected status: %v", out)
		}
	})

	t.Run("reset", func(t *testing.T) {
		out := checkStructured(t, tools["jail_reset"], callTool(t, c, "jail_reset", nil))
		if out["jail"] != jailDir {
			t.Errorf("unexpected reset result: %v", out)
		}
	})
}

func fieldsExcept(m map[string]any, drop string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if k != drop {
			out[k] = v
		}
	}
	return out
}

// TestRefusals: a call that cannot run is isError with one line a model
// can act on, and no structured content.
func TestRefusals(t *testing.T) {
	srv, m := newServer(t, false)
	needBackend(t, m)
	c := newClient(t, srv)
	offSrv, _ := newServerWith(t, true, false)
	off := newClient(t, offSrv)
	tests := []struct {
		name string
		c    *client.Client
		tool string
		args map[string]any
		want string
	}{
		{"nothing to run", c, "jailed_exec", map[string]any{}, "command"},
		{"command and argv", c, "jailed_exec", map[string]any{"command": "true", "argv": []string{"true"}}, "exactly one"},
		{"empty command", c, "jailed_exec", map[string]any{"command": ""}, "empty"},
		{"empty argv", c, "jailed_exec", map[string]any{"argv": []string{}}, "empty"},
		{"zero timeout", c, "jailed_exec", map[string]any{"command": "true", "timeout_ms": 0}, "timeout_ms"},
		{"negative timeout", c, "jailed_exec", map[string]any{"command": "true", "timeout_ms": -5}, "timeout_ms"},
		{"network on when off", c, "jailed_exec", map[string]any{"command": "true", "network": true}, "network"},
		{"reserved env", c, "jailed_exec", map[string]any{"command": "true", "env": map[string]string{"HOME": "/"}}, "HOME"},
		{"cwd outside", c, "jailed_exec", map[string]any{"command": "true", "cwd": "/"}, "outside"},
		{"auth not enabled", c, "jailed_exec", map[string]any{"command": "true", "auth": []string{"bogus"}}, "bogus"},
		{"unknown argument", c, "jailed_exec", map[string]any{"command": "true", "bogus": 1}, "bogus"},
		{"status argument", c, "jail_status", map[string]any{"x": 1}, `unknown argument "x"`},
		{"reset argument", c, "jail_reset", map[string]any{"x": 1}, `unknown argument "x"`},
		{"no backend", off, "jailed_exec", map[string]any{"command": "true"}, "switched off by the test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := callTool(t, tt.c, tt.tool, tt.args)
			if !res.IsError || res.StructuredContent != nil || len(res.Content) != 1 {
				t.Fatalf("want isError with one text and no structured content: %+v", res)
			}
			text, ok := res.Content[0].(mcp.TextContent)
			if !ok {
				t.Fatalf("content is %T, want text", res.Content[0])
			}
			if strings.Contains(text.Text, "\n") || !strings.Contains(text.Text, tt.want) {
				t.Errorf("text %q: want one line mentioning %q", text.Text, tt.want)
			}
		})
	}

	t.Run("status without a backend", func(t *testing.T) {
		tools := decodeTools(t, listTools(t, offSrv))
		res := callTool(t, off, "jail_status", nil)
		out := checkStructured(t, tools["jail_status"], res)
		if out["backend"] != "bwrap" || out["available"] != false || out["confined"] != false || out["reason"] != "switched off by the test" || out["hint"] != "do not" {
			t.Errorf("unexpected status: %v", fieldsExcept(out, "guarantees"))
		}
	})
}
