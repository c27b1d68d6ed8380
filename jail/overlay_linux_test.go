package jail_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/jailfs/jailfstest"
)

// viewSpec is the spec of a session agent with the project view of a
// new project holding files.
func viewSpec(t *testing.T, files map[string]string) jail.Spec {
	t.Helper()
	project, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		jailfstest.WriteFile(t, filepath.Join(project, name), body)
	}
	siblings := filepath.Join(project, ".agent-home")
	jailDir := filepath.Join(siblings, "s")
	for _, d := range []string{".overlay/upper", ".overlay/work", ".overlay/caches"} {
		if err := os.MkdirAll(filepath.Join(jailDir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	lf, err := os.OpenFile(filepath.Join(jailDir, ".overlay"), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	jf, err := os.OpenFile(jailDir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lf.Close()
		jf.Close()
		// The kernel's work directories have no permission bits.
		exec.Command("chmod", "-R", "u+rwx", filepath.Join(jailDir, ".overlay")).Run()
	})
	return jail.Spec{
		Dir: project, Jail: jailDir, JailFile: jf, Project: project, Siblings: siblings, Visible: []string{project},
		Hide: []string{filepath.Join(jailDir, ".overlay")}, CallPath: "/usr/bin:/bin",
		Env:     []string{"PATH=/usr/bin:/bin", "HOME=" + jailDir},
		Overlay: &jail.Overlay{Layer: lf},
	}
}

// TestOverlayViews: calls of one agent see what the host changed in the
// project before each (edits in place and by rename, files made and
// removed, deep and at the top), numbered as the server's watch numbers
// the project's states (a view shared until the number changes, the agent
// told of some changes ahead of the call and not of others) or not (0: a
// view per call), and a write of the view stays in the layer.
func TestOverlayViews(t *testing.T) {
	b := viewBackend(t)
	for _, mode := range []struct {
		name     string
		numbered bool
	}{{"numbered", true}, {"unnumbered", false}} {
		t.Run(mode.name, func(t *testing.T) {
			spec := viewSpec(t, map[string]string{"a.txt": "0\n", "d/e/f.txt": "0\n"})
			gen := uint64(0)
			if mode.numbered {
				gen = 1
			}
			project := spec.Project
			look := `cat a.txt d/e/f.txt; LC_ALL=C find . -path ./.agent-home -prune -o -print | LC_ALL=C sort`
			spec.Argv = []string{"/bin/sh", "-c", look}
			r, err := b.Runner(spec, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { r.Close() }()
			for i := range 8 {
				switch i % 4 {
				case 1:
					os.WriteFile(filepath.Join(project, "a.txt"), []byte(fmt.Sprintf("%d\n", i)), 0o644)
				case 2:
					tmp := filepath.Join(project, "d/e/.swp")
					os.WriteFile(tmp, []byte(fmt.Sprintf("%d\n", i)), 0o644)
					os.Rename(tmp, filepath.Join(project, "d/e/f.txt"))
					os.MkdirAll(filepath.Join(project, fmt.Sprintf("d/new-%d", i)), 0o755)
				case 3:
					os.RemoveAll(filepath.Join(project, fmt.Sprintf("d/new-%d", i-1)))
					os.WriteFile(filepath.Join(project, fmt.Sprintf("top-%d", i)), nil, 0o644)
				}
				if mode.numbered && i%4 >= 2 {
					// A change of entries: a new number, the agent told
					// of it ahead of the call every other time.
					gen++
					if i%8 < 4 {
						r.(interface{ RenewView(uint64) }).RenewView(gen)
					}
				}
				if jail.NativeOverlay(b) && (!mode.numbered || i%4 >= 2) {
					// bubblewrap's view lasts as long as its sandbox: a
					// new agent for the new state, as the session starts.
					r.Close()
					if r, err = b.Runner(spec, nil); err != nil {
						t.Fatal(err)
					}
				}
				got := runIn(t, r, spec, look, gen)
				host, err := exec.Command("sh", "-c", "cd "+project+" && "+look).Output()
				if err != nil {
					t.Fatal(err)
				}
				if got != string(host) {
					t.Fatalf("call %d: the view shows\n%s\nthe host\n%s", i, got, host)
				}
				if i%3 == 0 {
					time.Sleep(30 * time.Millisecond) // a new view readied meanwhile
				}
			}
			if got := runIn(t, r, spec, "echo view > a.txt && cat a.txt", gen); got != "view\n" {
				t.Fatalf("a write in the view: %q", got)
			}
			if b, _ := os.ReadFile(filepath.Join(project, "a.txt")); strings.Contains(string(b), "view") {
				t.Fatal("the write reached the host project")
			}
			if b, err := os.ReadFile(filepath.Join(spec.Jail, ".overlay/upper/a.txt")); err != nil || string(b) != "view\n" {
				t.Fatalf("the layer holds %q, %v", b, err)
			}
		})
	}
}

// runIn runs script through r in spec's project and returns its output.
func runIn(t *testing.T, r jail.Runner, spec jail.Spec, script string, gen uint64) string {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	p, err := r.Run(jail.Call{Argv: []string{"/bin/sh", "-c", script}, Env: spec.Env, Dir: spec.Project, Stdin: devnull, Stdout: out, Stderr: out, ViewGen: gen})
	if err != nil {
		t.Fatal(err)
	}
	if e, err := p.Wait(); err != nil || e.Code != 0 {
		b, _ := os.ReadFile(out.Name())
		t.Fatalf("%s: %+v %v\n%s", script, e, err, b)
	}
	b, _ := os.ReadFile(out.Name())
	return string(b)
}

// TestOverlayFirstCallArmed: an agent started at the project's number
// (Overlay.Gen) arms its spares in a view made at it, and the first call
// of that number runs in that view, the first the agent made, rather than
// in one made for it after the spare's did not fit; a call of a number
// the agent was not told of gets a view made for it.
func TestOverlayFirstCallArmed(t *testing.T) {
	r, spec := viewAgent(t)
	// The work directory of the view a call runs in names the agent's
	// pid and the view's number among those the agent made.
	workdir := func(gen uint64) string {
		out := runIn(t, r, spec, "cat /proc/self/mountinfo", gen)
		for line := range strings.Lines(out) {
			f := strings.Fields(line)
			if len(f) < 5 || f[4] != spec.Project || !strings.Contains(line, " - overlay ") {
				continue
			}
			_, opts, _ := strings.Cut(line, "workdir=")
			w, _, _ := strings.Cut(strings.TrimSpace(opts), ",")
			return filepath.Base(w)
		}
		t.Fatalf("no overlay on %s in\n%s", spec.Project, out)
		return ""
	}
	first := workdir(3)
	if _, seq, _ := strings.Cut(first, "-"); seq != "1" {
		t.Errorf("the first call ran in view %s, not the first the agent made (its spares')", first)
	}
	if again := workdir(3); again != first {
		t.Errorf("a call of the same number ran in view %s, not %s", again, first)
	}
	if next := workdir(4); next == first {
		t.Errorf("a call of a new number ran in the view of the old, %s", next)
	}
}

// viewBackend is bubblewrap where the project view works, or the test
// fails saying why.
func viewBackend(t *testing.T) jail.Backend {
	t.Helper()
	b := openBackend(t, "bwrap", jail.Options{})
	if err := jail.ProbeOverlay(t.Context(), b); err != nil {
		t.Fatalf("the project view does not work here: %v", err)
	}
	return b
}

// TestOverlaySparesShareReadView: the spares an agent arms together in a
// view share one read view, which holds a descriptor for each inode it
// granted by a rule of its own (/etc's entries, beside the secret files
// denied there): each is held once, not once per spare (four spares
// arming at once held four copies, 760 descriptors where 200 do, and an
// agent with a limit of 1024 ran out).
func TestOverlaySparesShareReadView(t *testing.T) {
	_, _, agent := armedAgent(t)
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", agent))
	if errors.Is(err, os.ErrPermission) && os.Getuid() != 0 {
		// The agent is not dumpable: only root (CI's first pass) may look.
		t.Skipf("a normal user may not read the agent's descriptors: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]int{}
	for _, fd := range fds {
		if to, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", agent, fd.Name())); err == nil && strings.HasPrefix(to, "/etc/") {
			held[to]++
		}
	}
	if len(held) == 0 {
		t.Fatalf("the agent holds none of /etc's entries (%d descriptors): the read view grants /etc whole here, and this test proves nothing", len(fds))
	}
	// The resolver's configuration is granted by name too (view_linux.go).
	resolv, _ := filepath.EvalSymlinks("/etc/resolv.conf")
	for p, n := range held {
		if n > 1 && !(p == resolv && n == 2) {
			t.Errorf("%s is held %d times", p, n)
		}
	}
}

// viewAgent is an agent of the view (a.txt holds "0\n") started at
// number 3, and its spec; under a bubblewrap that mounts the view itself,
// which arms no spares' view, the test is skipped.
func viewAgent(t *testing.T) (jail.Runner, jail.Spec) {
	t.Helper()
	b := viewBackend(t)
	if jail.NativeOverlay(b) {
		t.Skip("this bubblewrap mounts the view itself, one per sandbox, made before the agent runs: no spares' view to arm (TestNativeOverlay)")
	}
	spec := viewSpec(t, map[string]string{"a.txt": "0\n"})
	spec.Overlay.Gen = 3
	spec.Argv = []string{"/bin/true"}
	r, err := b.Runner(spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, spec
}

// armedAgent is viewAgent after its first call, its spares armed, and
// its pid.
func armedAgent(t *testing.T) (jail.Runner, jail.Spec, int) {
	t.Helper()
	r, spec := viewAgent(t)
	runIn(t, r, spec, "true", 3)
	for _, p := range descendants(os.Getpid()) {
		if cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); strings.HasPrefix(string(cmd), "jail-mcp-agent\x00") {
			return r, spec, p
		}
	}
	t.Fatal("no agent found among this test's processes")
	return nil, spec, 0
}

// descendants are the processes below pid, from /proc's parent links.
func descendants(pid int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 1 {
				parent[p], _ = strconv.Atoi(f[1])
			}
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 0; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// TestOverlayAfterDescriptorShortage: an agent that ran out of
// descriptors fails the calls it cannot give a view, saying so, and runs
// the next ones once it has them again. A spare thread that failed to arm
// part way (in the view's mount namespace, its capabilities dropped) runs
// no call: one once did, and failed every call it took with "overlay:
// enter the view: operation not permitted".
func TestOverlayAfterDescriptorShortage(t *testing.T) {
	r, spec, agent := armedAgent(t)
	var was unix.Rlimit
	if err := unix.Prlimit(agent, unix.RLIMIT_NOFILE, nil, &was); err != nil {
		t.Fatal(err)
	}
	// Below what it holds (a read view alone holds one per inode it
	// grants by a rule of its own, 190 here): a new descriptor takes the
	// lowest free number, and every one below this is taken but a few. Its
	// soft limit only: a normal user could not raise the hard one again.
	short := unix.Rlimit{Cur: 64, Max: was.Max}
	if err := unix.Prlimit(agent, unix.RLIMIT_NOFILE, &short, nil); err != nil {
		t.Fatal(err)
	}
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	// Calls of new numbers: each needs a new view, and its spares (armed
	// after each call) fail to arm one.
	for gen := uint64(4); gen < 7; gen++ {
		out, _ := os.CreateTemp(t.TempDir(), "out")
		p, err := r.Run(jail.Call{Argv: []string{"/bin/true"}, Env: spec.Env, Dir: spec.Project, Stdin: devnull, Stdout: out, Stderr: out, ViewGen: gen})
		if err == nil {
			_, err = p.Wait()
		}
		out.Close()
		if err == nil || !strings.Contains(err.Error(), "too many open files") {
			t.Fatalf("a call of number %d with no descriptor to spare: %v", gen, err)
		}
	}
	if err := unix.Prlimit(agent, unix.RLIMIT_NOFILE, &was, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if out := runIn(t, r, spec, "cat a.txt", 6); out != "0\n" {
			t.Fatalf("call %d once descriptors are back: %q", i, out)
		}
	}
}
