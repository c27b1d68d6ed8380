package jail_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	defer r.Close()
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
