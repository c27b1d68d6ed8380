package jail

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ProbeOverlay shows a scratch project copy-on-write with backend b and
// writes into it, as a call would: nil when the view works here, else
// why not (a kernel or a security module that refuses the nested user
// namespace, overlayfs in it, or its work directory's features).
func ProbeOverlay(ctx context.Context, b Backend) error {
	if err := OverlayUsable(b); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "jail-mcp-overlay-probe-")
	if err != nil {
		return fmt.Errorf("probe the project view: %w", err)
	}
	defer os.RemoveAll(dir)
	project, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	siblings := filepath.Join(project, ".agent-home")
	jailDir := filepath.Join(siblings, "probe")
	for _, d := range []string{".overlay/upper", ".overlay/work", ".overlay/caches"} {
		if err := os.MkdirAll(filepath.Join(jailDir, d), 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(project, "f"), []byte("host\n"), 0o644); err != nil {
		return err
	}
	jf, err := os.OpenFile(jailDir, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer jf.Close()
	lf, err := os.OpenFile(filepath.Join(jailDir, ".overlay"), unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer lf.Close()
	spec := Spec{
		Dir: jailDir, Jail: jailDir, JailFile: jf, Project: project, Siblings: siblings,
		Visible: []string{project}, Hide: []string{filepath.Join(jailDir, ".overlay")},
		CallPath: "/usr/bin:/bin", Overlay: &Overlay{Layer: lf},
	}
	r, err := b.Runner(spec, nil)
	if err != nil {
		return probeStartError(err)
	}
	defer r.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer devnull.Close()
	out, err := os.CreateTemp("", "jail-mcp-overlay-probe-out-")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	call := Call{
		Argv: []string{"/bin/sh", "-c", "echo view > f && cat f"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: project,
		Stdin: devnull, Stdout: out, Stderr: out,
	}
	p, err := r.Run(call)
	if err != nil {
		return probeStartError(err)
	}
	done := make(chan struct{})
	var exit Exit
	go func() { exit, err = p.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		p.Kill()
		<-done
		return ctx.Err()
	case <-time.After(30 * time.Second):
		p.Kill()
		<-done
		return fmt.Errorf("probe the project view: no answer in 30s")
	}
	b2, _ := os.ReadFile(out.Name())
	got := strings.TrimSpace(string(b2))
	if err != nil || exit.Code != 0 || got != "view" {
		return fmt.Errorf("probe the project view: a write in it failed: %s", oneLine(got))
	}
	if host, _ := os.ReadFile(filepath.Join(project, "f")); string(host) != "host\n" {
		return fmt.Errorf("probe the project view: the write reached the project")
	}
	return nil
}

// nestedUsernsLine is what an agent of the project view writes when its
// sandbox refuses it the user namespace it mounts the view in.
const nestedUsernsLine = "a user namespace to mount the project view in"

// probeStartError is why the probe's agent or call did not start:
// ErrNestedUserns when the sandbox refused the agent its namespace.
func probeStartError(err error) error {
	if nested := AsNestedUserns(err); nested != nil {
		return nested
	}
	return fmt.Errorf("probe the project view: %w", err)
}

// AsNestedUserns is err as an ErrNestedUserns, with the kernel's word,
// when it is a session agent's that did not start because its sandbox
// refused the project view's user namespace (and so no command started
// either); nil when it is not.
func AsNestedUserns(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNestedUserns):
		return err
	}
	_, why, ok := strings.Cut(err.Error(), nestedUsernsLine+": ")
	if !ok {
		return nil
	}
	return fmt.Errorf("%w (%s)", ErrNestedUserns, oneLine(why))
}
