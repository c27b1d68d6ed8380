//go:build linux

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/session/ledger"
	"github.com/jail-mcp/jail-mcp/tools"
)

// execOK is jailed_exec of command, which must exit 0.
func execOK(t *testing.T, ts *testkit.Server, command string) (tools.ExecResult, string) {
	t.Helper()
	out, raw := ts.Exec(map[string]any{"command": command})
	text := testkit.ResultText(raw)
	if raw.IsError || out.ExitCode != 0 {
		t.Fatalf("%s: %s", command, text)
	}
	return out, text
}

func conflictsOf(cs []ledger.Conflict) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Path+" "+c.Host)
	}
	return out
}

// TestOverlayConflicts is issue 46's case: a call appends to p.txt; the
// host then edits p.txt and f.txt; the next call's result names p.txt as
// a conflict and sees the host's f.txt; jail_diff shows both sides;
// jail_discard p.txt then shows the host's p.txt.
func TestOverlayConflicts(t *testing.T) {
	project := testkit.NewProject(t)
	writeFiles(t, project, map[string]string{"p.txt": "p\n", "f.txt": "f\n", "gone.txt": "g\n"})
	ts := startOverlay(t, project)

	out, text := execOK(t, ts, "echo call >> p.txt && echo n > new1 && echo n > new2 && rm gone.txt")
	c := out.ProjectChanges
	if c.Added != 2 || c.Modified != 1 || c.Deleted != 1 || len(c.First) != 4 {
		t.Fatalf("project_changes = %+v\n%s", c, text)
	}
	want := "project: 2 added, 1 modified, 1 deleted (gone.txt, new1, new2, p.txt) in this session's layer, not on the host: jail_diff, jail_apply\n"
	if !strings.Contains(text, want) {
		t.Fatalf("the result does not say %q:\n%s", want, text)
	}
	if len(out.Conflicts) != 0 {
		t.Fatalf("conflicts before the host's edit: %v", out.Conflicts)
	}
	if out, _ := execOK(t, ts, "cat p.txt"); out.ProjectChanges.Added+out.ProjectChanges.Modified+out.ProjectChanges.Deleted != 0 {
		t.Fatalf("a call that changed nothing: %+v", out.ProjectChanges)
	}
	// A file of the layer written in place again is a change of the call
	// too (no new entry: only the file's own times tell).
	if out, text := execOK(t, ts, "echo m >> new1"); out.ProjectChanges.Modified != 1 || out.ProjectChanges.Added != 0 {
		t.Fatalf("a write in place: %+v\n%s", out.ProjectChanges, text)
	}

	writeFiles(t, project, map[string]string{"p.txt": "p\nhost\n", "f.txt": "f2\n"})
	out, text = execOK(t, ts, "cat p.txt f.txt")
	if out.Stdout != "p\ncall\nf2\n" {
		t.Fatalf("the call sees %q", out.Stdout)
	}
	if got := conflictsOf(out.Conflicts); !slices.Equal(got, []string{"p.txt modified"}) {
		t.Fatalf("conflicts = %q\n%s", got, text)
	}
	line := "conflict: the host changed p.txt after this session copied it; commands see the session's copy"
	if !strings.Contains(text, line) {
		t.Fatalf("the result does not say %q:\n%s", line, text)
	}
	if got := conflictsOf(ts.Status().Conflicts); !slices.Equal(got, []string{"p.txt modified"}) {
		t.Fatalf("jail_status's conflicts = %q", got)
	}
	d, raw := diffOf(t, ts, map[string]any{"patch": true})
	var marked *tools.DiffResult
	for _, ch := range d.Changes {
		if ch.Path == "p.txt" {
			if ch.Conflict != "modified" {
				t.Fatalf("jail_diff does not mark p.txt: %+v", ch)
			}
			for _, w := range []string{"### base -> host", "+host", "### base -> session", "+call"} {
				if !strings.Contains(ch.ConflictPatch, w) {
					t.Fatalf("conflict_patch lacks %q:\n%s", w, ch.ConflictPatch)
				}
			}
			marked = &d
		}
	}
	if marked == nil || !strings.Contains(testkit.ResultText(raw), "CONFLICT") {
		t.Fatalf("jail_diff:\n%s", testkit.ResultText(raw))
	}

	discardRefusals(t, ts, project)
	dis, raw := callOf[tools.DiscardResult](t, ts, "jail_discard", map[string]any{"paths": []string{"p.txt"}})
	if raw.IsError || !slices.Equal(dis.Discarded, []string{"p.txt"}) {
		t.Fatalf("jail_discard: %s", testkit.ResultText(raw))
	}
	out, text = execOK(t, ts, "cat p.txt new1")
	if out.Stdout != "p\nhost\nn\nm\n" || len(out.Conflicts) != 0 {
		t.Fatalf("after the discard the call sees %q, conflicts %v\n%s", out.Stdout, out.Conflicts, text)
	}
	if got, _ := os.ReadFile(filepath.Join(project, "p.txt")); string(got) != "p\nhost\n" {
		t.Fatalf("the host's p.txt is now %q", got)
	}
}

// discardRefusals: paths outside the project, protected, or that the
// layer holds nothing at are refused in one line, dropping nothing.
func discardRefusals(t *testing.T, ts *testkit.Server, project string) {
	for _, tc := range []struct {
		paths []string
		want  string
	}{
		{[]string{"../x"}, "outside the project"},
		{[]string{"/etc/passwd"}, "outside the project"},
		{[]string{filepath.Join(project, "f.txt")}, "holds nothing there"},
		{[]string{".git/config"}, "protected"},
		{[]string{"."}, "jail_reset"},
		{[]string{"p.txt", "nothing.txt"}, "holds nothing there"},
	} {
		_, raw := callOf[tools.DiscardResult](t, ts, "jail_discard", map[string]any{"paths": tc.paths})
		text := strings.TrimSuffix(testkit.ResultText(raw), "\n")
		if !raw.IsError || !strings.Contains(text, tc.want) || strings.Contains(text, "\n") {
			t.Errorf("jail_discard %q = %v %q, want one line with %q", tc.paths, raw.IsError, text, tc.want)
		}
	}
	if got := conflictsOf(ts.Status().Conflicts); !slices.Equal(got, []string{"p.txt modified"}) {
		t.Fatalf("a refused discard dropped something: conflicts %q", got)
	}
}

// TestOverlayNoopCopies: a touch and a rewrite that changed nothing do
// not hide the host's later edits: the next call sees them, and says the
// copies were dropped. A job's end names its changes too.
func TestOverlayNoopCopies(t *testing.T) {
	project := testkit.NewProject(t)
	writeFiles(t, project, map[string]string{"t.txt": "t\n", "u.txt": "u\n", "e.txt": "e\n"})
	ts := startOverlay(t, project)
	out, text := execOK(t, ts, "touch t.txt && cat u.txt > u.tmp && mv u.tmp u.txt && echo mine > e.txt")
	if c := out.ProjectChanges; c.Modified != 3 {
		t.Fatalf("project_changes = %+v\n%s", c, text)
	}
	writeFiles(t, project, map[string]string{"t.txt": "t2\n", "u.txt": "u2\n", "e.txt": "e2\n"})
	out, text = execOK(t, ts, "cat t.txt u.txt e.txt")
	if out.Stdout != "t2\nu2\nmine\n" {
		t.Fatalf("the call sees %q\n%s", out.Stdout, text)
	}
	if !slices.Equal(out.Refreshed, []string{"t.txt", "u.txt"}) || !strings.Contains(text, "refreshed: t.txt, u.txt held the host's bytes unchanged") {
		t.Fatalf("refreshed = %q\n%s", out.Refreshed, text)
	}
	if got := conflictsOf(out.Conflicts); !slices.Equal(got, []string{"e.txt modified"}) {
		t.Fatalf("conflicts = %q", got)
	}

	job, raw := ts.Exec(map[string]any{"command": "echo j > job.txt", "background": true})
	if job.JobID == "" {
		t.Fatalf("no job: %s", testkit.ResultText(raw))
	}
	deadline := time.Now().Add(time.Minute)
	for {
		r, raw := callOf[tools.JobResult](t, ts, "jail_job", map[string]any{"job_id": job.JobID, "wait_ms": 5000})
		if !r.Running {
			if r.ProjectChanges.Added != 1 || !strings.Contains(testkit.ResultText(raw), "project: 1 added, 0 modified, 0 deleted (job.txt)") {
				t.Fatalf("the job's end: %+v\n%s", r.ProjectChanges, testkit.ResultText(raw))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job did not end")
		}
	}
}

// TestOverlayLedgerHostile: a command that leaves links, FIFOs, many
// files and names with newlines and escapes in the layer: the report
// quotes the names, stays bounded, and nothing hangs or follows a link.
func TestOverlayLedgerHostile(t *testing.T) {
	project := testkit.NewProject(t)
	writeFiles(t, project, map[string]string{"x.txt": "x\n"})
	ts := startOverlay(t, project)
	cmd := `set -e
ln -s /etc/passwd a-link
ln -sf /etc/shadow x.txt
mkfifo a-fifo
touch "$(printf 'a\nb')" "$(printf '\033[31mred')" "$(printf 'bidi\342\200\256')"
mkdir many && cd many && seq 1 20000 | xargs touch`
	out, text := execOK(t, ts, cmd)
	c := out.ProjectChanges
	if c.Added < 20005 || c.Modified != 1 || len(c.First) != ledger.FirstPaths {
		t.Fatalf("project_changes = %d added, %d modified, first %q", c.Added, c.Modified, c.First)
	}
	for _, p := range c.First {
		if strings.ContainsAny(p.Path, "\n\x1b\u202e") {
			t.Fatalf("a name is not quoted: %q", p.Path)
		}
	}
	if len(text) > 2000 {
		t.Fatalf("the result's text is %d bytes:\n%s", len(text), text)
	}
	if !strings.Contains(text, `"\x1b[31mred"`) || !strings.Contains(text, `"a\nb"`) {
		t.Fatalf("the names are not quoted:\n%s", text)
	}
	// The link that replaced x.txt is no copy: the host editing x.txt is
	// a conflict, and nothing reads through the link.
	writeFiles(t, project, map[string]string{"x.txt": "x2\n"})
	out, text = execOK(t, ts, "true")
	if got := conflictsOf(out.Conflicts); !slices.Equal(got, []string{"x.txt modified"}) {
		t.Fatalf("conflicts = %q\n%s", got, text)
	}
	_, raw := callOf[tools.DiscardResult](t, ts, "jail_discard", map[string]any{"paths": []string{"a-fifo", "x.txt", "many", "\"a\\nb\""}})
	if raw.IsError {
		t.Fatalf("jail_discard: %s", testkit.ResultText(raw))
	}
	out, _ = execOK(t, ts, "cat x.txt; ls many 2>&1 | head -1; test -e a-fifo || echo no-fifo")
	if !strings.HasPrefix(out.Stdout, "x2\nls: ") || !strings.HasSuffix(out.Stdout, "no-fifo\n") {
		t.Fatalf("after the discard: %q", out.Stdout)
	}
}

// TestOverlayRunSaysChanges: jail-mcp run says in one line on stderr
// what the command changed in the project view, and nothing when it
// changed nothing.
func TestOverlayRunSaysChanges(t *testing.T) {
	cfgNeedBwrap(t)
	b := testkit.Backends()[0]
	p := testkit.NewProject(t)
	writeFiles(t, p, map[string]string{"a.txt": "a\n"})
	run := func(command string) cfgResult {
		args := append(append([]string{"run"}, b.Args...), "--overlay", "on", "--project", p, "--session", "r", "--", "sh", "-c", command)
		return runInProcess(t, args, cfgEnv(b.Env...))
	}
	res := run("echo b >> a.txt && echo n > n.txt")
	want := "jail-mcp: project: 1 added, 1 modified, 0 deleted (a.txt, n.txt) in this session's layer, not on the host: jail-mcp diff --session r, jail-mcp apply --session r\n"
	if res.code != 0 || res.stderr != want {
		t.Fatalf("exit %d, stderr %q, want %q", res.code, res.stderr, want)
	}
	if res := run("cat a.txt n.txt"); res.code != 0 || res.stderr != "" || res.stdout != "a\nb\nn\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
}

// TestOverlayPatchKeepsDenied: a command makes a file where the
// --deny-read list names one the host has not made yet; the host then
// makes it, with a secret. The command cannot read the host's file, and
// no patch of jail_diff (nor the conflict's) shows it to the client
// either: the server does not read a denied file for anyone.
func TestOverlayPatchKeepsDenied(t *testing.T) {
	project := testkit.NewProject(t)
	writeFiles(t, project, map[string]string{"a.txt": "a\n"})
	ts := startOverlay(t, project, "--deny-read", "default,"+filepath.Join(project, "*.env"))
	execOK(t, ts, "echo mine > secret.env")
	secret := "TOKEN=denied-" + strings.Repeat("x", 8)
	writeFiles(t, project, map[string]string{"secret.env": secret + "\n"})
	// The next call names the conflict once the server's watch saw it.
	testkit.WaitFor(time.Minute, func() bool {
		out, _ := ts.Exec(map[string]any{"command": "true"})
		return len(out.Conflicts) > 0
	})
	out, raw := ts.Exec(map[string]any{"command": "cat secret.env"})
	if strings.Contains(out.Stdout, secret) {
		t.Fatalf("the command read the denied host file: %s", testkit.ResultText(raw))
	}
	d, res := diffOf(t, ts, map[string]any{"patch": true})
	text := testkit.ResultText(res)
	if strings.Contains(text, secret) || strings.Contains(d.Patch, secret) {
		t.Fatalf("jail_diff showed the denied host file:\n%s", text)
	}
	for _, ch := range d.Changes {
		if strings.Contains(ch.ConflictPatch, secret) {
			t.Fatalf("the conflict's patch showed the denied host file:\n%s", ch.ConflictPatch)
		}
	}
	if !strings.Contains(d.Patch, "no patch: the host's file is on the --deny-read list") {
		t.Fatalf("the patch does not say why secret.env has none:\n%s", d.Patch)
	}
}
