//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// startOverlay starts the server with --overlay on bubblewrap on project.
func startOverlay(t *testing.T, project string, args ...string) *testkit.Server {
	t.Helper()
	return testkit.Backends()[0].Start(t, project, testkit.ServerEnv(), append([]string{"--overlay", "on"}, args...)...)
}

// projectTree is what the project holds but the jails: each path with its
// type, permissions, size, content hash and link target (no times: a
// command's reads set atimes).
func projectTree(t *testing.T, project string) map[string]string {
	t.Helper()
	return treeOf(project, filepath.Join(project, ".agent-home"))
}

// treeOf is projectTree of root, but for the paths skipped.
func treeOf(root string, skip ...string) map[string]string {
	opaque := map[string]bool{}
	for _, s := range skip {
		opaque[s] = true
	}
	snap := testkit.Snapshot([]string{root}, opaque)
	tree := map[string]string{}
	for p, n := range snap {
		if p == root || opaque[p] {
			continue
		}
		size := n.Size
		if n.Mode.IsDir() {
			size = 0
		}
		tree[p] = fmt.Sprintf("%v %d %s %s %s", n.Mode, size, n.Sum, n.Target, n.Xattrs)
	}
	return tree
}

// sameTree fails t when the project's tree differs from before.
func sameTree(t *testing.T, project string, before map[string]string) {
	t.Helper()
	if diff := treeDiff(before, projectTree(t, project)); len(diff) > 0 {
		t.Fatalf("the host project changed:\n%s", strings.Join(diff, "\n"))
	}
}

// treeDiff lists what differs between two trees (projectTree, treeOf).
func treeDiff(before, after map[string]string) []string {
	var diff []string
	for p, b := range before {
		if a := after[p]; a != b {
			diff = append(diff, fmt.Sprintf("%s: %q -> %q", p, b, a))
		}
	}
	for p, a := range after {
		if _, ok := before[p]; !ok {
			diff = append(diff, fmt.Sprintf("%s: added %q", p, a))
		}
	}
	slices.Sort(diff)
	return diff
}

// TestOverlayWritesStayInTheLayer: a command writes, renames, links,
// deletes and chmods in the project it sees writable; the host project
// stays byte-identical, the changes are in the session's layer, and the
// next call sees them.
func TestOverlayWritesStayInTheLayer(t *testing.T) {
	project := testkit.NewProject(t)
	writeFiles(t, project, map[string]string{"a.txt": "a\n", "dir/b.txt": "b\n", "gone.txt": "x\n", "run.sh": "echo hi\n"})
	before := projectTree(t, project)
	ts := startOverlay(t, project)
	cmd := `set -e
echo changed > a.txt
echo new > dir/new.txt
mkdir -p deep/er && echo d > deep/er/f
mv dir/b.txt deep/b.txt
ln deep/er/f hard
rm gone.txt
chmod +x run.sh
mkfifo fifo
ln -s a.txt link
echo ok`
	if res, raw := ts.Exec(map[string]any{"command": cmd}); res.ExitCode != 0 || res.Stdout != "ok\n" {
		t.Fatalf("writes in the view: %+v %s", res, testkit.ResultText(raw))
	}
	check := `cat a.txt dir/new.txt deep/b.txt hard; test -e gone.txt || echo gone; test -x run.sh && echo x; test -p fifo && echo fifo; readlink link`
	want := "changed\nnew\nb\nd\ngone\nx\nfifo\na.txt\n"
	if res, raw := ts.Exec(map[string]any{"command": check}); res.Stdout != want {
		t.Fatalf("the next call: %+v %s", res, testkit.ResultText(raw))
	}
	sameTree(t, project, before)
	st := ts.Status()
	upper := filepath.Join(st.Jail, ".overlay", "upper")
	if b, err := os.ReadFile(filepath.Join(upper, "a.txt")); err != nil || string(b) != "changed\n" {
		t.Fatalf("the layer holds no a.txt: %q %v", b, err)
	}
}

// TestOverlayHostChangesSeen: files the host edits (in place and by
// rename), creates and deletes between calls, at the top and deep down,
// are seen by the next call. (While a job runs, calls stay in its view:
// TestOverlayJobKeepsView.)
func TestOverlayHostChangesSeen(t *testing.T) {
	project := testkit.NewProject(t)
	writeFiles(t, project, map[string]string{"top.txt": "v0\n", "sub/deep/f.txt": "v0\n"})
	ts := startOverlay(t, project)
	// The view caches what a call looked up: look at everything first.
	look := `cat top.txt sub/deep/f.txt; LC_ALL=C find . -path ./.agent-home -prune -o -print | LC_ALL=C sort`
	ts.Exec(map[string]any{"command": look})
	for i := range 6 {
		var want string
		switch i % 3 {
		case 0: // edits: in place, and an editor's save by rename
			v := fmt.Sprintf("v%d\n", i+1)
			if err := os.WriteFile(filepath.Join(project, "top.txt"), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
			tmp := filepath.Join(project, "sub/deep/.f.swp")
			if err := os.WriteFile(tmp, []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(project, "sub/deep/f.txt")); err != nil {
				t.Fatal(err)
			}
			want = v + v
		case 1: // creations
			writeFiles(t, project, map[string]string{fmt.Sprintf("made-%d.txt", i): "m\n", fmt.Sprintf("sub/deep/made-%d/x", i): "m\n"})
		case 2: // deletions
			os.Remove(filepath.Join(project, fmt.Sprintf("made-%d.txt", i-1)))
			os.RemoveAll(filepath.Join(project, fmt.Sprintf("sub/deep/made-%d", i-1)))
		}
		res, raw := ts.Exec(map[string]any{"command": look})
		got := res.Stdout
		host, err := exec.Command("sh", "-c", "cd "+project+" && "+look).Output()
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 || got != string(host) || res.ViewBehind != "" {
			t.Fatalf("round %d: the view shows\n%q\nthe host\n%q\n%s", i, got, host, testkit.ResultText(raw))
		}
		if want != "" && !strings.HasPrefix(got, want) {
			t.Fatalf("round %d: the view shows %q, want %q first", i, got, want)
		}
		if i%2 == 1 {
			time.Sleep(60 * time.Millisecond) // the agent readies a view meanwhile
		}
	}
}

// TestOverlayConfinement: in the view, other sessions' jails are hidden,
// the layer and the staged jail are out of sight, no capability is left
// and no namespace can be made.
func TestOverlayConfinement(t *testing.T) {
	project := testkit.NewProject(t)
	other := filepath.Join(project, ".agent-home", "other-session")
	writeFiles(t, other, map[string]string{"secret.txt": "other's\n"})
	ts := startOverlay(t, project)
	cmd := `ls -a .agent-home | grep -v '^\.\.\?$' | grep -v "^$(basename $HOME)$"
ls -a /dev/.jail-mcp | grep -v '^\.\.\?$'
ls -a $HOME/.overlay | grep -v '^\.\.\?$'
grep CapEff /proc/self/status
unshare -U true 2>/dev/null && echo userns
unshare -m true 2>/dev/null && echo mountns
cat .agent-home/other-session/secret.txt 2>/dev/null
echo > .agent-home/x 2>/dev/null && echo wrote
echo done`
	res, raw := ts.Exec(map[string]any{"command": cmd})
	want := ".gitignore\nCapEff:\t0000000000000000\ndone\n"
	if res.Stdout != want {
		t.Fatalf("in the view:\n%s\nwant\n%s\n%s", res.Stdout, want, testkit.ResultText(raw))
	}
}

// TestOverlayRefusedWithoutBwrap: --overlay fails closed at start where
// the backend cannot mount (landlock), saying why.
func TestOverlayRefusedWithoutBwrap(t *testing.T) {
	project := testkit.NewProject(t)
	cmd := exec.Command(os.Args[0], "--project", project, "--overlay", "on")
	cmd.Env = append(testkit.ServerEnv("PATH="+testkit.NoBwrapPath), testkit.AsServer+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the server started: %s", out)
	}
	if !strings.Contains(string(out), "--overlay") || !strings.Contains(string(out), "landlock") {
		t.Fatalf("no reason given: %s", out)
	}
}

// TestOverlayReset: jail_reset discards the layer (the view shows the
// host's project again), work directories included, and the next call
// runs in a new view.
func TestOverlayReset(t *testing.T) {
	project := testkit.NewProject(t)
	writeFiles(t, project, map[string]string{"a.txt": "host\n"})
	ts := startOverlay(t, project)
	if res, raw := ts.Exec(map[string]any{"command": "echo view > a.txt; echo n > new.txt; cat a.txt"}); res.Stdout != "view\n" {
		t.Fatalf("write: %+v %s", res, testkit.ResultText(raw))
	}
	res, err := ts.Call(t.Context(), "jail_reset", map[string]any{})
	if err != nil || res.IsError {
		t.Fatalf("jail_reset: %v %s", err, testkit.ResultText(res))
	}
	if res, raw := ts.Exec(map[string]any{"command": "cat a.txt; test -e new.txt || echo gone"}); res.Stdout != "host\ngone\n" {
		t.Fatalf("after the reset: %+v %s", res, testkit.ResultText(raw))
	}
	st := ts.Status()
	if ents, _ := os.ReadDir(filepath.Join(st.Jail, ".overlay", "upper")); len(ents) != 0 {
		t.Fatalf("the layer holds %d entries after the reset", len(ents))
	}
}

// TestOverlayWithWritable: with --writable beside --overlay on, what a
// command writes in a writable directory lands in the host project, and
// every other write in the view's layer; a new view (after a host change)
// still binds the writable directory; a link planted in it leads nowhere
// outside.
func TestOverlayWithWritable(t *testing.T) {
	project := testkit.NewProject(t)
	writeFiles(t, project, map[string]string{"a.txt": "host\n"})
	ts := startOverlay(t, project, "--writable", "node_modules")
	cmd := `set -e; echo view > a.txt; mkdir -p node_modules/pkg && echo in-place > node_modules/pkg/index.js
mv node_modules/pkg/index.js node_modules/pkg/main.js; cat a.txt node_modules/pkg/main.js`
	if res, raw := ts.Exec(map[string]any{"command": cmd}); res.ExitCode != 0 || res.Stdout != "view\nin-place\n" {
		t.Fatalf("writes: %+v %s", res, testkit.ResultText(raw))
	}
	if b, err := os.ReadFile(filepath.Join(project, "node_modules/pkg/main.js")); err != nil || string(b) != "in-place\n" {
		t.Fatalf("the writable directory on the host holds %q, %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(project, "a.txt")); string(b) != "host\n" {
		t.Fatalf("a view's write reached the host: %q", b)
	}
	// A host change: the next call is in a new view, which binds it too.
	writeFiles(t, project, map[string]string{"b.txt": "b\n"})
	time.Sleep(60 * time.Millisecond)
	if res, raw := ts.Exec(map[string]any{"command": "cat b.txt && echo again >> node_modules/pkg/main.js && mv a.txt node_modules/ && rm node_modules/a.txt"}); res.ExitCode != 0 || res.Stdout != "b\n" {
		t.Fatalf("a new view: %+v %s", res, testkit.ResultText(raw))
	}
	if b, _ := os.ReadFile(filepath.Join(project, "node_modules/pkg/main.js")); string(b) != "in-place\nagain\n" {
		t.Fatalf("the writable directory holds %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(project, "a.txt")); string(b) != "host\n" {
		t.Fatalf("a move out of the view took the host's file: %q", b)
	}
	victim := testkit.HostDir(t)
	writeFiles(t, victim, map[string]string{"f": "victim\n"})
	script := fmt.Sprintf(`ln -s %q node_modules/out; echo x > node_modules/out/f 2>/dev/null && echo ESCAPED; ln %q/f node_modules/hard 2>/dev/null && echo ESCAPED; true`, victim, victim)
	if res, _ := ts.Exec(map[string]any{"command": script}); strings.Contains(res.Stdout, "ESCAPED") {
		t.Fatalf("out of the writable directory: %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(victim, "f")); string(b) != "victim\n" {
		t.Fatalf("the victim holds %q", b)
	}
}

// TestOverlayFirstCallArmed: the first call of a new session runs in the
// view its agent's spares armed in when the session opened, made at the
// project's number then, the first view the agent made (its work
// directory, <pid>-1, in the call's mountinfo): not in one made for the
// call after the spare's view did not fit it.
func TestOverlayFirstCallArmed(t *testing.T) {
	project := testkit.NewProject(t)
	writeFiles(t, project, map[string]string{"a.txt": "a\n"})
	ts := startOverlay(t, project)
	res, raw := ts.Exec(map[string]any{"argv": []string{"cat", "/proc/self/mountinfo"}})
	if res.ExitCode != 0 {
		t.Fatalf("cat /proc/self/mountinfo: %s", testkit.ResultText(raw))
	}
	for line := range strings.Lines(res.Stdout) {
		if f := strings.Fields(line); len(f) < 5 || f[4] != project || !strings.Contains(line, " - overlay ") {
			continue
		}
		_, opts, _ := strings.Cut(line, "workdir=")
		work, _, _ := strings.Cut(strings.TrimSpace(opts), ",")
		if strings.HasPrefix(filepath.Base(work), "b") {
			t.Skip("bubblewrap on PATH mounts the view itself, one per sandbox, made before the agent runs: no spares' view to arm (TestOverlayNativeAgents)")
		}
		if _, seq, _ := strings.Cut(filepath.Base(work), "-"); seq != "1" {
			t.Fatalf("the first call ran in view %s, not the first its agent made (its spares')", filepath.Base(work))
		}
		return
	}
	t.Fatalf("no overlay on %s in\n%s", project, res.Stdout)
}
