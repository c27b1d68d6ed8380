package jail_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/jail-mcp/jail-mcp/jail"
)

// nativeBackend is bubblewrap with its own overlay: the one
// JAIL_MCP_TEST_BWRAP names (0.9 or later, built by hand where the
// machine's is older); the test is skipped without it.
func nativeBackend(t *testing.T) jail.Backend {
	t.Helper()
	path := os.Getenv("JAIL_MCP_TEST_BWRAP")
	if path == "" {
		t.Skip("JAIL_MCP_TEST_BWRAP unset: no bubblewrap 0.9 or later to mount the view itself")
	}
	getenv := func(k string) string {
		if k == "PATH" {
			return filepath.Dir(path) + ":" + os.Getenv("PATH")
		}
		return os.Getenv(k)
	}
	b := openBackend(t, "bwrap", jail.Options{Getenv: getenv})
	if !jail.NativeOverlay(b) {
		t.Fatalf("%s: no overlay of its own found", path)
	}
	return b
}

// TestNativeOverlay: bubblewrap's own view is the project view, with no
// namespace for anything in the sandbox: a write stays in the layer, a
// --writable directory is written in place, what no command reads stays
// unread, the layer's directory and descriptors out of reach.
func TestNativeOverlay(t *testing.T) {
	b := nativeBackend(t)
	if err := jail.ProbeOverlay(t.Context(), b); err != nil {
		t.Fatalf("the project view does not work here: %v", err)
	}
	spec := viewSpec(t, map[string]string{"a.txt": "0\n", "secret/key": "k\n", ".env": "E\n", "out/keep": ""})
	project := spec.Project
	spec.Unread = []string{filepath.Join(project, "secret"), filepath.Join(project, ".env")}
	wf, err := os.OpenFile(filepath.Join(project, "out"), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer wf.Close()
	spec.Writable = []jail.WritableDir{{Path: filepath.Join(project, "out"), File: wf}}
	r, err := b.Runner(spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { r.Close() }()
	checks := []struct{ script, want string }{
		{"echo view > a.txt && cat a.txt", "view\n"},
		{"echo w > out/x && cat out/x", "w\n"},
		{"cat secret/key .env 2>/dev/null; echo $?", "1\n"},
		// Nothing in the sandbox makes a namespace (bubblewrap's
		// --disable-userns), as where the host refuses nested ones.
		{"unshare -U true 2>/dev/null; echo $?", "1\n"},
		// No descriptor of the layer reaches a command.
		{"for f in /proc/self/fd/*; do readlink $f; done | grep -c overlay", "0\n"},
		// The layer's directory: hidden, and neither movable nor removable.
		{"ls -A $HOME/.overlay | wc -l; mv $HOME/.overlay $HOME/o 2>/dev/null || echo kept", "0\nkept\n"},
	}
	for _, c := range checks {
		if got := runIn(t, r, spec, c.script+"; true", 0); got != c.want {
			t.Errorf("%s: got %q, want %q", c.script, got, c.want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(project, "a.txt")); string(b) != "0\n" {
		t.Errorf("the write reached the host project: %q", b)
	}
	if b, err := os.ReadFile(filepath.Join(spec.Jail, ".overlay/upper/a.txt")); err != nil || string(b) != "view\n" {
		t.Errorf("the layer holds %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(project, "out/x")); err != nil || string(b) != "w\n" {
		t.Errorf("the writable directory holds %q, %v", b, err)
	}
	// A command cannot remove what the host masks (a mount point)...
	if got := runIn(t, r, spec, "rm -rf secret .env 2>/dev/null; ls -d secret .env | wc -l", 0); got != "2\n" {
		t.Errorf("the masked paths after rm -rf: %q", got)
	}
	r.Close()
	// ...but the layer may hold its own there (the host made them after
	// the session's copies): an opaque directory and a link. The next
	// sandbox starts, masks nothing there, and the read view still
	// refuses it.
	upper := filepath.Join(spec.Jail, ".overlay/upper")
	if err := os.MkdirAll(filepath.Join(upper, "secret"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(upper, "secret"), "user.overlay.opaque", []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(upper, "secret/key"), []byte("mine\n"), 0o644)
	if err := os.Symlink("/etc/hostname", filepath.Join(upper, ".env")); err != nil {
		t.Fatal(err)
	}
	if r, err = b.Runner(spec, nil); err != nil {
		t.Fatalf("a sandbox after the layer replaced masked paths: %v", err)
	}
	if got := runIn(t, r, spec, "cat secret/key .env 2>/dev/null; echo $?; cat a.txt", 0); got != "1\nview\n" {
		t.Errorf("after the layer replaced masked paths: %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(project, "secret/key")); string(b) != "k\n" {
		t.Errorf("the host's secret: %q", b)
	}
	r.Close()
	// The writable directory replaced in the layer (by whoever could
	// write it): no sandbox binds it through the layer's link.
	if err := os.Symlink("/etc", filepath.Join(upper, "out")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Runner(spec, nil); err == nil || !strings.Contains(err.Error(), "replaced the writable directory") {
		t.Errorf("a sandbox over a layer that links the writable directory away: %v", err)
	}
	os.Remove(filepath.Join(upper, "out"))
}

// TestNativeOverlayHostileLayer: a layer whose upper or work directory
// is a link (as a hostile command with the layer in reach would leave it)
// starts no sandbox: bubblewrap follows a link given as a path, so the
// server gives it the directories by descriptor, opened through no link,
// and mounts nothing where a link leads.
func TestNativeOverlayHostileLayer(t *testing.T) {
	b := nativeBackend(t)
	for _, name := range []string{"upper", "work"} {
		t.Run(name, func(t *testing.T) {
			spec := viewSpec(t, map[string]string{"a.txt": "0\n"})
			elsewhere := t.TempDir()
			dir := filepath.Join(spec.Jail, ".overlay", name)
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, dir); err != nil {
				t.Fatal(err)
			}
			r, err := b.Runner(spec, nil)
			if err == nil {
				runIn(t, r, spec, "echo x > a.txt; true", 0)
				r.Close()
				t.Errorf("a sandbox started over the layer's %s linked away", name)
			}
			if names, _ := os.ReadDir(elsewhere); len(names) != 0 {
				t.Errorf("where the link leads: %d entries written", len(names))
			}
		})
	}
}
