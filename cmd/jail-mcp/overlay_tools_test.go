//go:build linux

package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/tools"
)

// unformatted is a.go as the command in the view writes it, for gofmt
// to mend there.
const unformatted = `package a

// A is the answer.
func  A( ) int {
return 42
}
`

// viewEdit edits a.go, adds b.txt, deletes c.txt and installs a package
// under node_modules/, which the project's .gitignore lists.
const viewEdit = `set -e
cat > a.go <<'EOF'
` + unformatted + `EOF
echo b > b.txt
rm c.txt
mkdir -p node_modules/x
echo 'module.exports = 1' > node_modules/x/y.js
echo ok`

// overlayProject is a project with a formatted a.go, c.txt, a
// .gitignore listing node_modules/ and a .git with a hook directory.
func overlayProject(t *testing.T) string {
	t.Helper()
	project := testkit.NewProject(t)
	writeFiles(t, project, map[string]string{
		"a.go":                     "package a\n\n// A is the answer.\nfunc A() int { return 41 }\n",
		"c.txt":                    "c\n",
		".gitignore":               "node_modules/\n",
		".git/HEAD":                "ref: refs/heads/main\n",
		".git/hooks/README.sample": "hooks\n",
	})
	return project
}

// diffOf is jail_diff with args, decoded; the test stops if it fails.
func diffOf(t *testing.T, ts *testkit.Server, args map[string]any) (tools.DiffResult, *mcp.CallToolResult) {
	t.Helper()
	out, res := callOf[tools.DiffResult](t, ts, "jail_diff", args)
	if res.IsError {
		t.Fatalf("jail_diff %v: %s", args, testkit.ResultText(res))
	}
	return out, res
}

// applyOf is jail_apply with args, decoded.
func applyOf(t *testing.T, ts *testkit.Server, args map[string]any) (tools.ApplyResult, *mcp.CallToolResult) {
	t.Helper()
	return callOf[tools.ApplyResult](t, ts, "jail_apply", args)
}

// callOf calls tool with args, in t (a subtest's, not the server's), and
// decodes its structured result.
func callOf[V any](t *testing.T, ts *testkit.Server, tool string, args map[string]any) (V, *mcp.CallToolResult) {
	t.Helper()
	res, err := ts.Call(t.Context(), tool, args)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var out V
	testkit.DecodeResult(t, res, &out)
	return out, res
}

// briefChanges are a diff's changes as "change path", and its ignored
// paths as "change dir files".
func briefChanges(d tools.DiffResult) []string {
	var out []string
	for _, c := range d.Changes {
		out = append(out, c.Change+" "+c.Path)
	}
	for _, s := range d.Ignored {
		out = append(out, s.Change+" "+s.Dir+" "+strings.Repeat("f", s.Files))
	}
	return out
}

func gofmtPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("gofmt"); err == nil {
		return p
	}
	if p := filepath.Join(runtime.GOROOT(), "bin", "gofmt"); testkit.FileExists(p) {
		return p
	}
	t.Fatal("no gofmt on PATH nor in GOROOT")
	return ""
}

// TestOverlayTools: through the real server with the view on, jail_diff
// lists exactly what a command changed (an ignored directory summarised),
// with the edit's hunk in its patch; jail_apply's dry run writes nothing,
// an apply writes the host and drops the change from the layer, a
// protected path is refused with nothing written, a running job holds
// applies off, and jail_reset leaves nothing to list.
func TestOverlayTools(t *testing.T) {
	gofmt := gofmtPath(t)
	project := overlayProject(t)
	before := projectTree(t, project)
	ts := startOverlay(t, project)

	names := toolNames(t, ts)
	if !slices.Contains(names, "jail_diff") || !slices.Contains(names, "jail_apply") {
		t.Fatalf("tools listed with the view on: %v", names)
	}
	if st := ts.Status(); !st.Overlay {
		t.Fatalf("jail_status says overlay off: %+v", st)
	}

	if res, raw := ts.Exec(map[string]any{"command": viewEdit}); res.ExitCode != 0 {
		t.Fatalf("edit in the view: %+v %s", res, testkit.ResultText(raw))
	}
	sameTree(t, project, before)

	d, raw := diffOf(t, ts, nil)
	want := []string{"modified a.go", "added b.txt", "deleted c.txt", "added node_modules/ f"}
	if got := briefChanges(d); !slices.Equal(got, want) {
		t.Fatalf("jail_diff lists %q, want %q\n%s", got, want, testkit.ResultText(raw))
	}
	if d.Patch != "" || d.PatchBytes != 0 || d.OutputPath != "" {
		t.Errorf("a patch without patch: %+v", d)
	}
	text := testkit.ResultText(raw)
	for _, line := range []string{"\nM a.go (", "\nA b.txt (2 B, sha256 0263829989b6)\n", "\nD c.txt\n", "\nA node_modules/: 1 file, "} {
		if !strings.Contains(text, line) {
			t.Errorf("jail_diff's text has no %q:\n%s", line, text)
		}
	}
	fx := &overlayToolsFixture{ts: ts, project: project, before: before, gofmt: gofmt}
	// In order: each step starts from what the one before left.
	for _, step := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"patch", fx.patch}, {"dry run", fx.dryRun}, {"apply", fx.apply},
		{"protected", fx.protected}, {"busy", fx.busy}, {"reset", fx.reset},
	} {
		t.Run(step.name, step.run)
	}
}

// overlayToolsFixture is TestOverlayTools' server, its project and the
// project's tree before any apply.
type overlayToolsFixture struct {
	ts      *testkit.Server
	project string
	before  map[string]string
	gofmt   string
}

// patch: the patch holds the edit's hunk and not the ignored directory,
// and under the least --max-output it is cut at a line's end, the whole
// of it kept in the jail.
func (fx *overlayToolsFixture) patch(t *testing.T) {
	d, _ := diffOf(t, fx.ts, map[string]any{"patch": true})
	hunk := "-func A() int { return 41 }\n+func  A( ) int {\n+return 42\n+}\n"
	if !strings.Contains(d.Patch, "--- a/a.go\n+++ b/a.go\n@@ ") || !strings.Contains(d.Patch, hunk) || d.PatchTruncated || d.PatchBytes != len(d.Patch) {
		t.Fatalf("the patch has not the edit's hunk %q:\n%s", hunk, d.Patch)
	}
	if strings.Contains(d.Patch, "node_modules") {
		t.Errorf("the patch holds the ignored directory:\n%s", d.Patch)
	}
	all, _ := diffOf(t, fx.ts, map[string]any{"all": true})
	if got := briefChanges(all); !slices.Contains(got, "added node_modules/x/y.js") || len(all.Ignored) != 0 {
		t.Errorf("jail_diff all lists %q", got)
	}

	// The same edit in a session whose --max-output is the least:
	// the patch is cut at a line's end, the whole of it kept.
	small := startOverlay(t, fx.project, "--max-output", "256")
	if res, raw := small.Exec(map[string]any{"command": viewEdit}); res.ExitCode != 0 {
		t.Fatalf("edit in the view: %+v %s", res, testkit.ResultText(raw))
	}
	cut, _ := diffOf(t, small, map[string]any{"patch": true})
	head, _, ok := strings.Cut(cut.Patch, "[... ")
	if !cut.PatchTruncated || cut.PatchBytes != len(d.Patch) || len(cut.Patch) > 256 || !ok ||
		!strings.HasPrefix(d.Patch, head) || !strings.HasSuffix(head, "\n") {
		t.Fatalf("patch of %d bytes under --max-output 256: %+v", len(d.Patch), cut)
	}
	if !strings.HasPrefix(cut.OutputPath, small.Status().Jail+"/") || !strings.Contains(cut.Patch, cut.OutputPath) {
		t.Errorf("output_path %q is not in the jail, or not named in the patch %q", cut.OutputPath, cut.Patch)
	}
	if whole := testkit.MustRead(t, cut.OutputPath); whole != d.Patch {
		t.Errorf("output_path holds\n%s\nwant\n%s", whole, d.Patch)
	}
}

// dryRun: jail_apply's dry run writes nothing and drops nothing.
func (fx *overlayToolsFixture) dryRun(t *testing.T) {
	out, raw := applyOf(t, fx.ts, map[string]any{"paths": []string{"a.go", "b.txt", "c.txt"}, "dry_run": true})
	if raw.IsError || !out.DryRun || len(out.Applied) != 3 || len(out.Refused) != 0 {
		t.Fatalf("dry run: %+v %s", out, testkit.ResultText(raw))
	}
	sameTree(t, fx.project, fx.before)
	if d, _ := diffOf(t, fx.ts, nil); len(d.Changes) != 3 {
		t.Fatalf("after a dry run jail_diff lists %q", briefChanges(d))
	}
}

// apply: an apply writes the host and drops the change from the layer,
// and the views are renewed.
func (fx *overlayToolsFixture) apply(t *testing.T) {
	if res, raw := fx.ts.Exec(map[string]any{"argv": []string{fx.gofmt, "-w", "a.go"}}); res.ExitCode != 0 {
		t.Fatalf("gofmt in the view: %+v %s", res, testkit.ResultText(raw))
	}
	cmd := exec.Command(fx.gofmt)
	cmd.Stdin = strings.NewReader(unformatted)
	formatted, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	out, raw := applyOf(t, fx.ts, map[string]any{"paths": []string{"a.go"}})
	if raw.IsError || out.DryRun || len(out.Applied) != 1 || out.Applied[0].Path != "a.go" {
		t.Fatalf("apply a.go: %+v %s", out, testkit.ResultText(raw))
	}
	if got := testkit.MustRead(t, filepath.Join(fx.project, "a.go")); got != string(formatted) {
		t.Fatalf("the host's a.go is\n%s\nwant gofmt's\n%s", got, formatted)
	}
	d, raw := diffOf(t, fx.ts, nil)
	if got, want := briefChanges(d), []string{"added b.txt", "deleted c.txt", "added node_modules/ f"}; !slices.Equal(got, want) {
		t.Fatalf("after the apply jail_diff lists %q, want %q\n%s", got, want, testkit.ResultText(raw))
	}
	// The views were renewed: a write to the applied file lands in
	// the layer again, not in a dropped inode.
	if res, raw := fx.ts.Exec(map[string]any{"command": "echo '// more' >> a.go && tail -1 a.go"}); res.Stdout != "// more\n" {
		t.Fatalf("write after the apply: %+v %s", res, testkit.ResultText(raw))
	}
	if d, _ := diffOf(t, fx.ts, nil); !slices.Contains(briefChanges(d), "modified a.go") {
		t.Fatalf("a write after the apply is not in the layer: %q", briefChanges(d))
	}
}

// protected: a protected path is refused, with nothing written.
func (fx *overlayToolsFixture) protected(t *testing.T) {
	hook := `set -e
echo '{"mcpServers":{"x":{"command":"sh"}}}' > .mcp.json
printf '#!/bin/sh\necho pwned\n' > .git/hooks/pre-commit
chmod +x .git/hooks/pre-commit`
	if res, raw := fx.ts.Exec(map[string]any{"command": hook}); res.ExitCode != 0 {
		t.Fatalf("in the view: %+v %s", res, testkit.ResultText(raw))
	}
	host := projectTree(t, fx.project)
	for _, paths := range [][]string{{".mcp.json"}, {".git/hooks/pre-commit"}, {"b.txt", ".mcp.json"}, {".git"}} {
		out, raw := applyOf(t, fx.ts, map[string]any{"paths": paths})
		text := testkit.ResultText(raw)
		if !raw.IsError || len(out.Refused) == 0 || len(out.Applied) != 0 || !strings.Contains(text, "nothing was written") {
			t.Fatalf("apply %q: %+v %s", paths, out, text)
		}
		for _, r := range out.Refused {
			if !strings.Contains(r.Reason, "protected") {
				t.Errorf("apply %q: refused %s: %q, want it said protected", paths, r.Path, r.Reason)
			}
		}
		sameTree(t, fx.project, host)
	}
}

// busy: a running job holds applies off, but not a dry run.
func (fx *overlayToolsFixture) busy(t *testing.T) {
	job := fx.ts.StartJob(map[string]any{"command": "sleep 600"})
	out, raw := applyOf(t, fx.ts, map[string]any{"paths": []string{"b.txt"}})
	if !raw.IsError || raw.StructuredContent != nil || !strings.Contains(testkit.ResultText(raw), "no command of the session runs") {
		t.Fatalf("apply beside a job: %+v %s", out, testkit.ResultText(raw))
	}
	if out, raw := applyOf(t, fx.ts, map[string]any{"paths": []string{"b.txt"}, "dry_run": true}); raw.IsError || len(out.Applied) != 1 {
		t.Fatalf("dry run beside a job: %+v %s", out, testkit.ResultText(raw))
	}
	if testkit.FileExists(filepath.Join(fx.project, "b.txt")) {
		t.Fatal("b.txt was written beside a job")
	}
	fx.ts.Job(map[string]any{"job_id": job, "signal": "KILL"})
}

// reset: jail_reset leaves nothing to list.
func (fx *overlayToolsFixture) reset(t *testing.T) {
	if res, err := fx.ts.Call(t.Context(), "jail_reset", map[string]any{}); err != nil || res.IsError {
		t.Fatalf("jail_reset: %v %s", err, testkit.ResultText(res))
	}
	d, raw := diffOf(t, fx.ts, nil)
	if len(d.Changes) != 0 || len(d.Ignored) != 0 || !strings.HasPrefix(testkit.ResultText(raw), "no changes") {
		t.Fatalf("after jail_reset jail_diff lists %q: %s", briefChanges(d), testkit.ResultText(raw))
	}
}

// TestOverlayToolsOff: without the view (--overlay off; auto turns it on
// under bubblewrap), jail_diff and jail_apply are not listed, and
// jail_status says overlay off, by choice.
func TestOverlayToolsOff(t *testing.T) {
	ts := testkit.Backends()[0].Start(t, testkit.NewProject(t), testkit.ServerEnv(), "--overlay", "off")
	list, err := ts.Client.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		if tool.Name == "jail_diff" || tool.Name == "jail_apply" {
			t.Errorf("%s is listed with the view off", tool.Name)
		}
	}
	if st := ts.Status(); st.Overlay || st.OverlayMode != "off" || !strings.HasPrefix(st.OverlayReason, "--overlay off") || st.OverlayHint != "" {
		t.Errorf("jail_status: overlay on %t mode %q reason %q hint %q, want off by choice", st.Overlay, st.OverlayMode, st.OverlayReason, st.OverlayHint)
	}
	res, err := ts.Call(t.Context(), "jail_diff", map[string]any{})
	if err == nil && !res.IsError {
		t.Errorf("jail_diff ran with the view off: %s", testkit.ResultText(res))
	}
}
