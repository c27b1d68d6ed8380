package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jail-mcp/jail-mcp/session"
	"github.com/jail-mcp/jail-mcp/session/layer"
)

func TestViewDecodeErrors(t *testing.T) {
	tests := []struct {
		name, args string
		fields     []string
		v          any
		want       []string
	}{
		{"diff unknown argument", `{"patch":true,"paths":["a"]}`, diffFields, &diffParams{}, []string{`unknown argument "paths"`, "all", "patch"}},
		{"diff patch as string", `{"patch":"yes"}`, diffFields, &diffParams{}, []string{"patch", "boolean", "string"}},
		{"diff all as number", `{"all":1}`, diffFields, &diffParams{}, []string{"all", "boolean", "number"}},
		{"apply unknown argument", `{"paths":["a"],"dryrun":true}`, applyFields, &applyParams{}, []string{`unknown argument "dryrun"`, "dry_run", "paths"}},
		{"apply paths as string", `{"paths":"a.go"}`, applyFields, &applyParams{}, []string{"paths", "array", "string"}},
		{"apply paths of numbers", `{"paths":[1]}`, applyFields, &applyParams{}, []string{"paths", "string", "number"}},
		{"apply paths as object", `{"paths":{"a":"b"}}`, applyFields, &applyParams{}, []string{"paths", "array", "object"}},
		{"apply dry_run as string", `{"paths":["a"],"dry_run":"true"}`, applyFields, &applyParams{}, []string{"dry_run", "boolean", "string"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req mcp.CallToolRequest
			req.Params.RawArguments = json.RawMessage(tt.args)
			err := decode(req, tt.v, tt.fields)
			if err == nil {
				t.Fatalf("decode(%s) = nil, want an error", tt.args)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || strings.Contains(msg, "json:") || strings.Contains(msg, "tools.") {
				t.Errorf("error is not one plain line: %q", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

// TestViewRefusals: bad arguments to jail_diff and jail_apply are
// refused in one line, with no structured content and nothing applied.
func TestViewRefusals(t *testing.T) {
	srv, m := newViewServer(t)
	c := newClient(t, srv)
	project := m.Config().Project
	if err := os.WriteFile(filepath.Join(project, "a.txt"), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		tool string
		args map[string]any
		want string
	}{
		{"diff unknown argument", "jail_diff", map[string]any{"x": 1}, `unknown argument "x"`},
		{"diff patch not a boolean", "jail_diff", map[string]any{"patch": "true"}, "patch"},
		{"apply without paths", "jail_apply", map[string]any{}, "paths is required"},
		{"apply paths empty", "jail_apply", map[string]any{"paths": []string{}}, "paths is required"},
		{"apply paths null", "jail_apply", map[string]any{"paths": nil}, "paths is required"},
		{"apply paths not a list", "jail_apply", map[string]any{"paths": "a.txt"}, "argument paths: want an array"},
		{"apply path not a string", "jail_apply", map[string]any{"paths": []any{"a.txt", 2}}, "paths"},
		{"apply path empty", "jail_apply", map[string]any{"paths": []string{"a.txt", ""}}, "paths[1] is empty"},
		{"apply unknown argument", "jail_apply", map[string]any{"paths": []string{"a.txt"}, "force": true}, `unknown argument "force"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := callTool(t, c, tt.tool, tt.args)
			if !res.IsError || res.StructuredContent != nil || len(res.Content) != 1 {
				t.Fatalf("want isError with one text and no structured content: %+v", res)
			}
			text, _ := res.Content[0].(mcp.TextContent)
			if strings.Contains(text.Text, "\n") || !strings.Contains(text.Text, tt.want) {
				t.Errorf("text %q: want one line mentioning %q", text.Text, tt.want)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(project, "a.txt")); err != nil || string(b) != "host\n" {
		t.Errorf("the project's a.txt changed: %q %v", b, err)
	}
}

// TestViewOffRefused: without the view the tools are not listed; a
// handler called anyway says how to turn the view on.
func TestViewOffRefused(t *testing.T) {
	srv, m := newServer(t, true)
	tools := decodeTools(t, listTools(t, srv))
	for _, name := range []string{"jail_diff", "jail_apply"} {
		if _, ok := tools[name]; ok {
			t.Errorf("%s is listed with the view off", name)
		}
	}
	s, err := m.Open("t")
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{Manager: m, Session: func(context.Context) (*session.Session, error) { return s, nil }}
	for name, call := range map[string]func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error){
		"jail_diff": h.Diff, "jail_apply": h.Apply,
	} {
		var req mcp.CallToolRequest
		req.Params.Name = name
		req.Params.Arguments = map[string]any{"paths": []any{"a"}}
		if name == "jail_diff" {
			req.Params.Arguments = map[string]any{}
		}
		res, err := call(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		text, _ := res.Content[0].(mcp.TextContent)
		if !res.IsError || !strings.Contains(text.Text, "--overlay on") {
			t.Errorf("%s: %+v, want a refusal naming --overlay on", name, res)
		}
	}
}

func TestRenderDiff(t *testing.T) {
	d := DiffResult{
		Changes: []layer.Change{
			{Path: "src/a.go", Change: "modified", Type: "file", HostType: "file", Size: 1229, HostSize: 1200},
			{Path: "b.txt", Change: "added", Type: "file", Size: 4},
			{Path: "c.txt", Change: "deleted", Type: "file", HostSize: 9},
			{Path: "run.sh", Change: "modified", Type: "file", HostType: "file", Size: 8, HostSize: 8, Mode: "0755"},
			{Path: "dir", Change: "added", Type: "dir"},
			{Path: "link", Change: "added", Type: "symlink", Special: true, Target: "a.txt"},
			{Path: "x", Change: "type_changed", Type: "dir", HostType: "file"},
		},
		Ignored: []layer.Summary{{Dir: "node_modules/", Change: "added", Files: 13871, Bytes: 153 << 20}},
	}
	got := renderDiff(d, false)
	want := `the project view changes 7 paths against the host's project, and 13,871 files under 1 path that .gitignore ignores (all: true lists them); jail_apply copies paths to the host
M src/a.go (1.2 KiB)
A b.txt (4 B)
D c.txt
M run.sh (8 B, mode 0755)
A dir/
A link -> a.txt (symlink, never applied)
T x/ (file -> dir)
A node_modules/: 13,871 files, 153 MiB (ignored)
`
	if got != want {
		t.Errorf("renderDiff:\n%s\nwant\n%s", got, want)
	}
	if got := renderDiff(DiffResult{}, true); !strings.HasPrefix(got, "no changes") {
		t.Errorf("renderDiff of nothing: %q", got)
	}
	var many DiffResult
	for range maxChangeLines + 5 {
		many.Changes = append(many.Changes, layer.Change{Path: "f", Change: "added", Type: "file"})
	}
	many.Patch, many.PatchBytes = "--- a/f\n", 8
	got = renderDiff(many, true)
	if n := strings.Count(got, "\nA f"); n != maxChangeLines || !strings.Contains(got, "... 5 more") || !strings.HasSuffix(got, "--- patch (8 bytes) ---\n--- a/f\n") {
		t.Errorf("renderDiff of %d changes: %d listed:\n%s", len(many.Changes), n, got)
	}
}

func TestRenderApply(t *testing.T) {
	tests := []struct {
		name string
		a    ApplyResult
		want string
	}{
		{"applied", ApplyResult{Applied: []layer.Change{{Path: "a.go", Change: "modified", Type: "file", Size: 10}}},
			"applied 1 change to the project; they left the session's layer\nM a.go (10 B)\n"},
		{"dry run", ApplyResult{DryRun: true, Applied: []layer.Change{{Path: "c.txt", Change: "deleted", Type: "file"}}},
			"dry run: would apply 1 change to the project; nothing was written\nD c.txt\n"},
		{"refused", ApplyResult{Refused: []Refusal{{Path: ".mcp.json", Reason: "protected"}, {Path: "b", Reason: "conflict"}}},
			"refused 2 paths: nothing was written to the project; call again without the refused paths to apply the others\nrefused .mcp.json: protected\nrefused b: conflict\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := renderApply(tt.a); got != tt.want {
				t.Errorf("renderApply:\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestViewResultsMatchOutputSchemas: jail_diff and jail_apply results, of
// changes a command made in the view, match their output schemas.
func TestViewResultsMatchOutputSchemas(t *testing.T) {
	srv, m := newViewServer(t)
	needBackend(t, m)
	tools := decodeTools(t, listTools(t, srv))
	c := newClient(t, srv)
	project := m.Config().Project
	for name, data := range map[string]string{"a.txt": "host\n", "c.txt": "gone\n", "run.sh": "echo hi\n"} {
		if err := os.WriteFile(filepath.Join(project, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res := callTool(t, c, "jailed_exec", map[string]any{"command": "echo view > a.txt; echo b > b.txt; rm c.txt; chmod +x run.sh; ln -s a.txt link; mkdir d"})
	if res.IsError {
		t.Fatalf("jailed_exec: %v", res.Content)
	}
	diff := callTool(t, c, "jail_diff", map[string]any{"patch": true})
	out := checkStructured(t, tools["jail_diff"], diff)
	t.Logf("jail_diff:\n%s", resultText(diff))
	if diff.IsError || len(asList(out["changes"])) != 6 || !strings.Contains(out["patch"].(string), "+view") {
		t.Fatalf("jail_diff: %v", out)
	}
	dry := callTool(t, c, "jail_apply", map[string]any{"paths": []string{"a.txt", "c.txt"}, "dry_run": true})
	if out := checkStructured(t, tools["jail_apply"], dry); dry.IsError || len(asList(out["applied"])) != 2 || out["dry_run"] != true {
		t.Fatalf("jail_apply dry run: %v", out)
	}
	refused := callTool(t, c, "jail_apply", map[string]any{"paths": []string{"a.txt", "link"}})
	t.Logf("jail_apply refused:\n%s", resultText(refused))
	if out := checkStructured(t, tools["jail_apply"], refused); !refused.IsError || len(asList(out["refused"])) != 1 || len(asList(out["applied"])) != 0 {
		t.Fatalf("jail_apply of a symlink: %v", out)
	}
	applied := callTool(t, c, "jail_apply", map[string]any{"paths": []string{"a.txt", "c.txt", "run.sh"}})
	t.Logf("jail_apply:\n%s", resultText(applied))
	if out := checkStructured(t, tools["jail_apply"], applied); applied.IsError || len(asList(out["applied"])) != 3 {
		t.Fatalf("jail_apply: %v", out)
	}
	if b, err := os.ReadFile(filepath.Join(project, "a.txt")); err != nil || string(b) != "view\n" {
		t.Errorf("the project's a.txt: %q %v", b, err)
	}
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}
