//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/tools"
)

// overlayAttacks attack the project view (--overlay, bubblewrap) from a
// command in it: nothing may reach the host project or the operator's
// files, the session's layer may only change through the view, and no
// other session's layer may be read. Each script prints ESCAPED: and what
// worked, and nothing when everything failed; try runs a command that
// must fail.
var overlayAttacks = []struct{ name, script string }{
	{"write-through", `
echo x > "$PROJECT/keep.txt"; echo x > "$PROJECT/new.txt"; rm -f "$PROJECT/gone.txt"
mv "$PROJECT/src/main.c" "$PROJECT/moved.c"; ln "$PROJECT/moved.c" "$PROJECT/hard.c"
chmod 777 "$PROJECT/keep.txt"; mkfifo "$PROJECT/fifo"; ln -s /etc/passwd "$PROJECT/link"
mkdir -p "$PROJECT/d/e" && echo y > "$PROJECT/d/e/f"; rm -rf "$PROJECT/src"
mknod "$PROJECT/wh" c 0 0 2>/dev/null
try mknod "$PROJECT/null" c 1 3
try mknod "$PROJECT/disk" b 8 0
# Through a link made in the view, onto the host.
ln -sf "$VICTIM/file" "$PROJECT/tovictim"; try sh -c 'echo x > "$PROJECT/tovictim"'
ln -sf "$HOSTHOME/.gitconfig" "$PROJECT/tohome"; try sh -c 'echo x >> "$PROJECT/tohome"'
# Hard links of host files into the view.
try ln "$VICTIM/file" "$PROJECT/victim-hard"
try ln "$HOSTHOME/.gitconfig" "$PROJECT/home-hard"
try mv "$PROJECT/keep.txt" "$VICTIM/moved"
`},
	{"layer-direct", `
# The layer and the staged jail are out of sight.
try sh -c 'ls "$HOME/.overlay/upper"'
try sh -c 'echo x > "$HOME/.overlay/upper/keep.txt"'
try sh -c 'ls /dev/.jail-mcp/layer'
try sh -c 'echo x > /dev/.jail-mcp/layer/upper/keep.txt'
up=$(sed -n 's/.*upperdir=\([^,]*\).*/\1/p' /proc/self/mountinfo | head -1)
[ -n "$up" ] && try sh -c "ls '$up'"
# overlayfs's own attributes cannot be set through the view.
echo f > "$PROJECT/attr.txt"; mkdir -p "$PROJECT/attrdir"
for a in user.overlay.opaque user.overlay.redirect user.overlay.origin trusted.overlay.opaque; do
	try setfattr -n "$a" -v y "$PROJECT/attrdir"
	try setfattr -n "$a" -v y "$PROJECT/attr.txt"
done
`},
	{"layer-paths-and-descriptors", `
# The layer's directories as the mount table names them (bubblewrap's own
# overlay names them as it saw them outside, under /oldroot): out of reach
# by that name and by the host's.
for key in upperdir workdir; do
	for p in $(sed -n "s/.*[ ,]$key=\([^,]*\).*/\1/p" /proc/self/mountinfo); do
		for q in "$p" "${p#/oldroot}"; do
			try sh -c "ls '$q/'"
			try sh -c "echo x > '$q/keep.txt'"
			try sh -c "mv '$q' '$q.moved'"
			try sh -c "rm -rf '$q' && ln -s /tmp '$q'"
		done
	done
done
# No process in reach holds a descriptor of the layer (bubblewrap is given
# the upper and work directories as /proc/self/fd/N and leaves them open
# in the agent, which closes them).
ls -l /proc/[0-9]*/fd/ /proc/[0-9]*/task/[0-9]*/fd/ 2>/dev/null | grep -E '[.]overlay|/upper$|/upper/' | sed 's/^/ESCAPED: a descriptor of the layer: /'
for n in 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do
	try ls "/proc/self/fd/$n/"
done
`},
	{"other-sessions", `
try cat "$OTHERJAIL/secret"
try cat "$OTHERJAIL/.overlay/upper/other-change.txt"
try ls "$OTHERJAIL"
grep -rqsF "$OTHERSECRET" "$PROJECT" "$HOME" && echo "ESCAPED: another session's secret read"
true
`},
	{"mounts-and-namespaces", `
try mount -t tmpfs none "$PROJECT"
try mount --bind / "$HOME/root"
try umount -l "$PROJECT"
try umount -l "$PROJECT/.agent-home"
try umount -l /dev/.jail-mcp
try unshare -U true
try unshare -m true
try unshare -Urm true
try nsenter -t 1 -m true
for p in $(ps -eo pid=); do
	[ "$p" = "$$" ] && continue
	try nsenter -t "$p" -m true
	try ls "/proc/$p/root/"
	try cat "/proc/$p/root/dev/.jail-mcp/layer/upper/keep.txt"
done
` + py(`
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
MS_REMOUNT, MS_BIND = 32, 4096
for target in [E["PROJECT"], "/", E["HOME"]]:
    if libc.mount(b"none", target.encode(), b"tmpfs", 0, None) == 0:
        escaped("mount tmpfs on " + target)
    if libc.mount(None, target.encode(), None, MS_REMOUNT | MS_BIND, None) == 0:
        escaped("remount " + target + " read-write")
for nr, name in [(428, "open_tree"), (429, "move_mount"), (430, "fsopen"), (432, "fsmount"), (308, "setns"), (272, "unshare")]:
    if libc.syscall(nr, -100, b"/", 1, 0, 0) >= 0:
        escaped(name)
`)},
}

// overlayHostDirs are host directories outside the project for the
// overlay's attacks to aim at: the servers' HOME, with a .gitconfig, and
// a victim holding a file.
func overlayHostDirs(t *testing.T) (home, victim string) {
	t.Helper()
	home, victim = testkit.HostDir(t), testkit.HostDir(t)
	writeFiles(t, home, map[string]string{".gitconfig": "[user]\n\tname = host-user\n"})
	writeFiles(t, victim, map[string]string{"file": "victim\n"})
	return home, victim
}

// TestOverlayEscape runs overlayAttacks in a view, with another session's
// view beside it holding a secret in its jail and its layer, and checks
// the host after each. The secret is drawn at run time: the view shows
// the host's Go build cache when GOCACHE is outside /tmp, and a literal
// compiled into this test would be found there.
func TestOverlayEscape(t *testing.T) {
	overlayEscape(t, nil)
}

// TestOverlayEscapeInUserNamespace is TestOverlayEscape with both servers
// in a user namespace of their own, with pid and mount namespaces (unshare
// -Urm --fork --pid --mount-proc), under the seccomp profile of the team
// deployment (deploy/kubernetes/seccomp-bwrap.json, compiled as a runtime
// does), as in its user-namespaced pod (hostUsers: false): the view is
// mounted there too, and nothing of it reaches the host. No cluster runs
// here: this namespace and this filter stand for the pod.
func TestOverlayEscapeInUserNamespace(t *testing.T) {
	overlayEscape(t, inUserNamespace(t, compileProfile(t, deployProfile)))
}

// deployProfile is the team deployment's seccomp profile, from the
// package's directory.
var deployProfile = filepath.Join("..", "..", "deploy", "kubernetes", "seccomp-bwrap.json")

// inUserNamespace is a setup of a server's command that starts it in a
// user, mount and pid namespace of its own (a user-namespaced pod), under
// the compiled seccomp program in filter.
func inUserNamespace(t *testing.T, filter string) func(*exec.Cmd) {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is not installed: %v", err)
	}
	return func(cmd *exec.Cmd) {
		cmd.Args = append([]string{"unshare", "-Urm", "--fork", "--pid", "--mount-proc", cmd.Path}, cmd.Args[1:]...)
		cmd.Path = unshare
		cmd.Env = append(cmd.Env, testkit.TestSeccomp+"="+filter)
	}
}

// TestDeployProfileEnforced: the compiled profile is what the server runs
// under in TestOverlayEscapeInUserNamespace, not a file nobody reads, and
// it is the narrowest: with it whole, the server starts bubblewrap with
// the view in the namespace (masking a --deny-read file of the project)
// and serves; without any one of the calls it adds to the runtime's
// default (bwrapNeeds), it refuses to start, saying why.
func TestDeployProfileEnforced(t *testing.T) {
	project := testkit.NewProject(t)
	// A file of the project on the --deny-read list: each view masks it.
	writeFiles(t, project, map[string]string{".env": "SECRET=x\n"})
	cases := []struct {
		drop []string
		ok   bool
	}{{nil, true}}
	for _, n := range bwrapNeeds {
		if !slices.Contains(maskCalls, n) {
			cases = append(cases, struct {
				drop []string
				ok   bool
			}{[]string{n}, false})
		}
	}
	for _, tc := range cases {
		cmd := exec.Command(os.Args[0], "serve", "--project", project, "--backend", "bwrap", "--overlay", "on", "--deny-read", "default,.env")
		cmd.Env, cmd.Dir = testkit.ServerEnv(), project
		inUserNamespace(t, compileProfile(t, deployProfile, tc.drop...))(cmd)
		out, err := cmd.CombinedOutput() // stdin: /dev/null, an EOF once it serves
		if ok := err == nil; ok != tc.ok || tc.ok && !strings.Contains(string(out), "starting") {
			t.Errorf("without %v: exit %v, want success %t:\n%s", tc.drop, err, tc.ok, out)
		}
		t.Logf("without %v: %v; %s", tc.drop, err, testkit.Tail(string(out)))
	}
	// The masks of the project's denied files are made as a call's view
	// is: with the profile whole, a call reads no secret; without one of
	// their calls, the call is refused (it fails closed).
	bw := testkit.Backends()[0]
	for _, drop := range append([]string{""}, maskCalls...) {
		ts := bw.StartWith(t, project, testkit.ServerEnv(), inUserNamespace(t, compileProfile(t, deployProfile, drop)), "--overlay", "on", "--deny-read", "default,.env", "--session", "mask-"+drop)
		res, raw := ts.Exec(map[string]any{"command": "cat .env; echo read $?"})
		switch {
		case strings.Contains(res.Stdout, "SECRET"):
			t.Errorf("without %q: a call read the denied .env: %s", drop, testkit.ResultText(raw))
		case drop == "" && !strings.Contains(res.Stdout, "read 1"):
			t.Errorf("the profile whole: %s", testkit.ResultText(raw))
		case drop != "" && (raw == nil || !raw.IsError || strings.Contains(res.Stdout, "read")):
			t.Errorf("without %s: the call ran: %s", drop, testkit.ResultText(raw))
		}
		t.Logf("without %q: %s", drop, strings.SplitN(testkit.ResultText(raw), "\n", 2)[0])
	}
}

// maskCalls are the calls of the new mount API that make the empty files
// masking the project's denied files in each view.
var maskCalls = []string{"fsopen", "fsconfig", "fsmount"}

// overlayEscape is TestOverlayEscape, each server's command adjusted by
// setup when set.
func overlayEscape(t *testing.T, setup func(*exec.Cmd)) {
	project := testkit.NewProject(t)
	home, victim := overlayHostDirs(t)
	writeFiles(t, project, map[string]string{"keep.txt": "keep\n", "gone.txt": "gone\n", "src/main.c": "int main(void) { return 0; }\n"})
	env := testkit.ServerEnv("HOME=" + home)
	bw := testkit.Backends()[0]
	other := bw.StartWith(t, project, env, setup, "--overlay", "on", "--session", "other")
	secret := "other-secret-" + sdkRandomHex(t, 16)
	if res, raw := other.Exec(map[string]any{"command": fmt.Sprintf(`echo %[1]s > "$HOME/secret"; echo %[1]s > other-change.txt`, secret)}); res.ExitCode != 0 {
		t.Fatalf("the other session: %s", testkit.ResultText(raw))
	}
	otherJail := filepath.Join(project, ".agent-home", "other")
	ts := bw.StartWith(t, project, env, setup, "--overlay", "on", "--session", "attacker")
	if setup != nil {
		// The server runs in the namespace, as in a pod: one uid of the
		// host's, mapped to root there.
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", ts.Cmd.Process.Pid, ts.Cmd.Process.Pid))
		server, _, _ := strings.Cut(strings.TrimSpace(string(kids)), " ")
		m, err := os.ReadFile("/proc/" + server + "/uid_map")
		if f := strings.Fields(string(m)); err != nil || len(f) != 3 || f[0] != "0" || f[1] != strconv.Itoa(os.Geteuid()) || f[2] != "1" {
			t.Fatalf("the server (pid %q) is not in a user namespace of its own: uid_map %q %v", server, m, err)
		}
		// And under the pod's seccomp profile (a filter: mode 2).
		if mode := testkit.StatusFile("/proc/"+server+"/status", "Seccomp"); mode != "2" {
			t.Fatalf("the server (pid %s) runs under seccomp mode %q, want 2 (the profile's filter)", server, mode)
		}
	}
	before := projectTree(t, project)
	homeBefore, victimBefore := treeOf(home), treeOf(victim)
	// The other session's layer but the kernel's work directories.
	otherBefore := treeOf(otherJail, filepath.Join(otherJail, ".overlay", "work"))
	py := testkit.Python3(t)
	for _, a := range overlayAttacks {
		t.Run(a.name, func(t *testing.T) {
			script := fmt.Sprintf(`export PROJECT=%q HOSTHOME=%q VICTIM=%q OTHERJAIL=%q PY=%q OTHERSECRET=%q
export VFILE="$VICTIM/file" KEEP="$PROJECT/keep.txt" OTHER="$OTHERJAIL"
try() { if "$@" >/dev/null 2>&1; then echo "ESCAPED: $*"; fi; }
%s`, project, home, victim, otherJail, py, secret, a.script)
			res, raw := ts.Exec(map[string]any{"command": script, "timeout_ms": 60000})
			if strings.Contains(res.Stdout, "ESCAPED") || res.TimedOut {
				t.Errorf("%s escaped:\n%s", a.name, testkit.ResultText(raw))
			}
			if strings.Contains(a.script, "PYEOF") && !strings.Contains(res.Stdout, pyDone) {
				t.Errorf("%s: the Python attacks did not all run:\n%s", a.name, testkit.ResultText(raw))
			}
			sameTree(t, project, before)
			diff := append(treeDiff(homeBefore, treeOf(home)), treeDiff(victimBefore, treeOf(victim))...)
			diff = append(diff, treeDiff(otherBefore, treeOf(otherJail, filepath.Join(otherJail, ".overlay", "work")))...)
			if len(diff) > 0 {
				t.Errorf("%s changed the host or the other session's jail:\n%s", a.name, strings.Join(diff, "\n"))
			}
		})
	}
	if _, err := os.Stat(filepath.Join(project, "new.txt")); err == nil {
		t.Fatal("a file of the view reached the host project")
	}
}

// TestOverlayApplyEscape plants in the view what jail_apply must refuse:
// protected paths that exist nowhere yet (.git/hooks/pre-commit,
// .mcp.json, .claude/settings.json, a nested .vscode), links to host
// files and to another session's layer, a file swapped for a link after
// jail_diff listed it, a name with a newline, and paths that leave the
// project. Each apply is refused and writes nothing; "." is refused whole;
// a plain file beside them is then applied alone.
func TestOverlayApplyEscape(t *testing.T) {
	project, home, victim, ts := applyAttacks(t)
	before := projectTree(t, project)
	homeBefore, victimBefore := treeOf(home), treeOf(victim)
	otherJail := filepath.Join(project, ".agent-home", "other")
	otherBefore := treeOf(otherJail, filepath.Join(otherJail, ".overlay", "work"))
	for _, paths := range refusedApplies {
		refusesApply(t, ts, map[string]any{"paths": paths}, "")
		sameTree(t, project, before)
	}
	diffs := append(treeDiff(homeBefore, treeOf(home)), treeDiff(victimBefore, treeOf(victim))...)
	diffs = append(diffs, treeDiff(otherBefore, treeOf(otherJail, filepath.Join(otherJail, ".overlay", "work")))...)
	if len(diffs) > 0 {
		t.Fatalf("the host or the other session changed:\n%s", strings.Join(diffs, "\n"))
	}
	// The plain file alone: applied, and nothing else.
	res, err := ts.Call(t.Context(), "jail_apply", map[string]any{"paths": []string{"plain.txt"}})
	if err != nil || res.IsError {
		t.Fatalf("jail_apply plain.txt: %v %s", err, testkit.ResultText(res))
	}
	after := projectTree(t, project)
	added := treeDiff(before, after)
	if len(added) != 1 || !strings.HasPrefix(added[0], filepath.Join(project, "plain.txt")+": added") {
		t.Fatalf("jail_apply plain.txt changed:\n%s", strings.Join(added, "\n"))
	}
}

// applyAttacks is a project where session "attacker" planted what an
// apply must refuse (plantApplyAttacks) beside session "other", with the
// host's home and victim directories its links reach.
func applyAttacks(t *testing.T) (project, home, victim string, ts *testkit.Server) {
	t.Helper()
	project = testkit.NewProject(t)
	home, victim = overlayHostDirs(t)
	writeFiles(t, project, map[string]string{"keep.txt": "keep\n"})
	env := testkit.ServerEnv("HOME=" + home)
	bw := testkit.Backends()[0]
	other := bw.Start(t, project, env, "--overlay", "on", "--session", "other")
	other.Exec(map[string]any{"command": "echo other-secret > other.txt"})
	ts = bw.Start(t, project, env, "--overlay", "on", "--session", "attacker")
	plantApplyAttacks(t, ts, home, victim)
	return project, home, victim, ts
}

// refusedApplies are the paths TestOverlayApplyEscape and
// TestOverlayCommandLineApplyEscape apply, each refused.
var refusedApplies = [][]string{
	{".git/hooks/pre-commit"}, {".git"}, {".mcp.json"}, {".claude/settings.json"}, {".claude"}, {"sub/.vscode/tasks.json"}, {"sub"},
	{"tovictim"}, {"tohome"}, {"toother"}, {"swap.txt"}, {"new\nline"}, {strconv.Quote("new\nline")},
	{".."}, {"../x"}, {"/etc/passwd"}, {"sub/../../x"}, {"."}, {"plain.txt", ".mcp.json"},
	{".agent-home/other/.overlay/upper/other.txt"}, {".agent-home"},
}

// plantApplyAttacks plants in ts's view what an apply must refuse (see
// TestOverlayApplyEscape), with links to files in home and victim, and a
// file swapped for a link after jail_diff listed it.
func plantApplyAttacks(t *testing.T, ts *testkit.Server, home, victim string) {
	t.Helper()
	plant := fmt.Sprintf(`set -e
mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit
echo '{"mcpServers":{}}' > .mcp.json
mkdir -p .claude sub/.vscode && echo '{"hooks":{}}' > .claude/settings.json && echo '{}' > sub/.vscode/tasks.json
ln -s %q tovictim; ln -s %q tohome; ln -s ../.agent-home/other/.overlay/upper/other.txt toother
printf x > "$(printf 'new\nline')"
echo regular > swap.txt
echo plain > plain.txt`, filepath.Join(victim, "file"), filepath.Join(home, ".gitconfig"))
	if res, raw := ts.Exec(map[string]any{"command": plant}); res.ExitCode != 0 {
		t.Fatalf("plant: %s", testkit.ResultText(raw))
	}
	diff, _ := testkit.DiffOf(ts, map[string]any{})
	listed := map[string]bool{}
	for _, c := range diff.Changes {
		listed[c.Path] = true
	}
	if !listed["swap.txt"] || !listed["plain.txt"] || !listed["tovictim"] {
		t.Fatalf("jail_diff does not list what was planted: %+v", diff.Changes)
	}
	// Swapped for a link after jail_diff listed it.
	if res, raw := ts.Exec(map[string]any{"command": fmt.Sprintf("rm swap.txt && ln -s %q swap.txt", filepath.Join(victim, "file"))}); res.ExitCode != 0 {
		t.Fatalf("swap: %s", testkit.ResultText(raw))
	}
}

// TestOverlayCommandLineApplyEscape is TestOverlayApplyEscape through
// jail-mcp apply, the person's own, once the attacker's server ended:
// each apply is refused (exit 1) and writes nothing, and jail-mcp diff
// --patch on the person's terminal shows the escape sequences a file of
// the view holds, never runs them (a title, the clipboard, a line of the
// listing hidden).
func TestOverlayCommandLineApplyEscape(t *testing.T) {
	project, home, victim, ts := applyAttacks(t)
	const escapes = `printf 'title \033]0;pwned\007 clip \033]52;c;cHduZWQ=\007 up \033[1A\033[2K bidi \342\200\256 end\n' > zz-escapes.txt`
	if res, raw := ts.Exec(map[string]any{"command": escapes}); res.ExitCode != 0 {
		t.Fatalf("escapes: %s", testkit.ResultText(raw))
	}
	endServer(t, ts)
	before := projectTree(t, project)
	homeBefore, victimBefore := treeOf(home), treeOf(victim)
	for _, paths := range refusedApplies {
		r := jailMCP(t, project, append([]string{"apply", "--session", "attacker", "--"}, paths...)...)
		if r.code != 1 {
			t.Errorf("jail-mcp apply %q: exit %d, want 1 (refused)\n%s%s", paths, r.code, r.stdout, r.stderr)
		}
		sameTree(t, project, before)
	}
	if diffs := append(treeDiff(homeBefore, treeOf(home)), treeDiff(victimBefore, treeOf(victim))...); len(diffs) > 0 {
		t.Fatalf("the host changed:\n%s", strings.Join(diffs, "\n"))
	}
	tty := newTestTerminal(t)
	cmd := exec.Command(os.Args[0], "diff", "--session", "attacker", "--patch")
	cmd.Env, cmd.Dir = testkit.ServerEnv(), project
	cmd.Stdout, cmd.Stderr = tty.slave, tty.slave
	if err := cmd.Run(); err != nil {
		t.Fatalf("jail-mcp diff --patch on a terminal: %v\n%s", err, tty.out.String())
	}
	const shown = `title \x1b]0;pwned\a clip \x1b]52;c;cHduZWQ=\a up \x1b[1A\x1b[2K bidi \u202e end`
	if !testkit.WaitFor(30*time.Second, func() bool { return strings.Contains(tty.out.String(), shown) }) {
		t.Fatalf("the patch on the terminal does not show the escapes as text:\n%q", tty.out.String())
	}
	if out := tty.out.String(); strings.ContainsAny(out, "\x1b\a\u202e") {
		t.Errorf("an escape sequence of the view reached the terminal:\n%q", out)
	}
}

// TestOverlayApplyStaleView is an operator's atomic save (a new file
// renamed over the old) while a job runs whose view has looked the file
// up: the view still serves the old inode, and the job's write copies it
// up after the host's change. jail_apply must refuse it as a conflict and
// leave the host's new content (issue 44, point 5).
func TestOverlayApplyStaleView(t *testing.T) {
	project := testkit.NewProject(t)
	writeFiles(t, project, map[string]string{"notes.txt": "old\n", "other.txt": "other\n"})
	ts := testkit.Backends()[0].Start(t, project, testkit.ServerEnv(), "--overlay", "on")
	id := ts.StartJob(map[string]any{"command": `cat notes.txt; echo looked; read go; echo job >> notes.txt; echo job >> other.txt; echo wrote`})
	if got, _ := ts.ReadUntil(id, "looked", 30*time.Second); !strings.Contains(got, "old") {
		t.Fatalf("the job did not read the file: %q", got)
	}
	// The editor's save: a new file renamed over the old one.
	tmp := filepath.Join(project, ".notes.txt.swp")
	if err := os.WriteFile(tmp, []byte("operator's edit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(project, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if got := ts.Feed(id, "go\n", "wrote"); !strings.Contains(got, "wrote") {
		t.Fatalf("the job did not write: %q", got)
	}
	if _, out := ts.ReadUntil(id, "\x00never", 30*time.Second); out.Running {
		t.Fatal("the job still runs")
	}
	// A copy of the replaced file.
	refusesApply(t, ts, map[string]any{"paths": []string{"notes.txt"}}, "conflict")
	if got := testkit.MustRead(t, filepath.Join(project, "notes.txt")); got != "operator's edit\n" {
		t.Errorf("the host's notes.txt holds %q: the operator's edit was reverted", got)
	}
	// What the host left alone applies.
	res, err := ts.Call(t.Context(), "jail_apply", map[string]any{"paths": []string{"other.txt"}})
	if err != nil || res.IsError {
		t.Fatalf("jail_apply other.txt: %v %s", err, testkit.ResultText(res))
	}
	if got := testkit.MustRead(t, filepath.Join(project, "other.txt")); got != "other\njob\n" {
		t.Errorf("the host's other.txt holds %q", got)
	}
}

// TestOverlayApplyDigest: a command rewrites a file between the jail_diff
// that was reviewed and the jail_apply. Passed jail_diff's digest,
// jail_apply refuses and writes nothing; passed the digest of a fresh
// jail_diff, it applies (issue 44, point 6).
func TestOverlayApplyDigest(t *testing.T) {
	project := testkit.NewProject(t)
	writeFiles(t, project, map[string]string{"a.txt": "host\n"})
	ts := testkit.Backends()[0].Start(t, project, testkit.ServerEnv(), "--overlay", "on")
	if res, raw := ts.Exec(map[string]any{"command": "echo reviewed > a.txt"}); res.ExitCode != 0 {
		t.Fatalf("write: %s", testkit.ResultText(raw))
	}
	reviewed, _ := testkit.DiffOf(ts, map[string]any{"patch": true})
	if reviewed.Digest == "" || len(reviewed.Changes) != 1 || reviewed.Changes[0].Hash == "" {
		t.Fatalf("jail_diff gives no digest or hash: %+v", reviewed)
	}
	// Same size, other bytes.
	if res, raw := ts.Exec(map[string]any{"command": "echo injected > a.txt"}); res.ExitCode != 0 {
		t.Fatalf("rewrite: %s", testkit.ResultText(raw))
	}
	// The digest of an older review.
	refusesApply(t, ts, map[string]any{"paths": []string{"a.txt"}, "digest": reviewed.Digest}, "digest")
	if got := testkit.MustRead(t, filepath.Join(project, "a.txt")); got != "host\n" {
		t.Fatalf("the host's a.txt holds %q after a refused apply", got)
	}
	fresh, _ := testkit.DiffOf(ts, map[string]any{})
	if fresh.Digest == reviewed.Digest || fresh.Changes[0].Hash == reviewed.Changes[0].Hash {
		t.Errorf("the rewrite left the digest or the hash as it was: %s %s", fresh.Digest, fresh.Changes[0].Hash)
	}
	res, err := ts.Call(t.Context(), "jail_apply", map[string]any{"paths": []string{"a.txt"}, "digest": fresh.Digest})
	if err != nil || res.IsError {
		t.Fatalf("jail_apply with the fresh digest: %v %s", err, testkit.ResultText(res))
	}
	var out tools.ApplyResult
	testkit.DecodeResult(t, res, &out)
	if out.Digest != fresh.Digest || len(out.Applied) != 1 || out.Applied[0].Hash != fresh.Changes[0].Hash {
		t.Errorf("jail_apply's result does not show the digest and hashes it applied: %+v", out)
	}
	if got := testkit.MustRead(t, filepath.Join(project, "a.txt")); got != "injected\n" {
		t.Errorf("the host's a.txt holds %q", got)
	}
}

// refusesApply checks that jail_apply with args is refused, saying why
// (a word of its text, or "" for any).
func refusesApply(t *testing.T, ts *testkit.Server, args map[string]any, why string) {
	t.Helper()
	res, err := ts.Call(t.Context(), "jail_apply", args)
	if err != nil {
		t.Fatalf("jail_apply %v: %v", args, err)
	}
	if !res.IsError || !strings.Contains(testkit.ResultText(res), why) {
		t.Errorf("jail_apply %v was not refused (%q): %s", args, why, testkit.ResultText(res))
	}
}
