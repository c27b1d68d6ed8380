package jail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Options are what backend selection needs from the host; tests pass their own.
type Options struct {
	// Getenv reads the server's environment (PATH, to find bwrap).
	Getenv func(string) string
	// ReadFile reads kernel settings under /proc/sys to explain a failure.
	ReadFile func(string) ([]byte, error)
	// LandlockABI reads the kernel's Landlock ABI version.
	LandlockABI func() (int, error)
}

func (o Options) landlockABI() (int, error) {
	if o.LandlockABI == nil {
		return landlockABI()
	}
	return o.LandlockABI()
}

func (o Options) getenv(k string) string {
	if o.Getenv == nil {
		return os.Getenv(k)
	}
	return o.Getenv(k)
}

func (o Options) readFile(name string) ([]byte, error) {
	if o.ReadFile == nil {
		return os.ReadFile(name)
	}
	return o.ReadFile(name)
}

// Open returns the named backend ("auto" picks the first usable one of this
// OS) after probing that it really confines here. When it cannot, the error
// is an *UnavailableError that wraps ErrUnavailable.
func Open(ctx context.Context, name string, opts Options) (Backend, error) {
	if name == "auto" {
		reports := Detect(ctx, opts)
		for _, r := range reports {
			if r.Available {
				return Open(ctx, r.Backend, opts)
			}
		}
		// Explain with the backend this OS would prefer, and say why the
		// others of this OS cannot stand in.
		for _, r := range reports {
			if r.Backend != preferred {
				continue
			}
			ue := &UnavailableError{Backend: r.Backend, Reason: r.Reason, Hint: r.Hint}
			for _, o := range reports {
				if o.Backend != preferred && native(o.Backend) {
					ue.Reason += "; " + o.Backend + ": " + o.Reason
				}
			}
			return nil, ue
		}
		return nil, &UnavailableError{Backend: "auto", Reason: "no confining backend exists on " + goos}
	}
	r := probe(ctx, name, opts)
	if !r.Available {
		return nil, &UnavailableError{Backend: name, Reason: r.Reason, Hint: r.Hint}
	}
	return construct(name, r)
}

// Detect probes every backend of the contract on this host.
func Detect(ctx context.Context, opts Options) []Report {
	out := make([]Report, 0, len(Names))
	for _, n := range Names {
		out = append(out, probe(ctx, n, opts))
	}
	return out
}

// lookPath finds an executable in the PATH of getenv, as a shell would.
func lookPath(file, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, file)
		fi, err := os.Stat(p)
		if err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH: %w", file, fs.ErrNotExist)
}

// probeBwrap runs the real bubblewrap line once with /bin/true.
func probeBwrap(ctx context.Context, opts Options) Report {
	r := Report{Backend: "bwrap"}
	path, err := lookPath("bwrap", opts.getenv("PATH"))
	if err != nil {
		r.Reason = "bubblewrap (bwrap) is not installed or not in PATH"
		r.Hint = "sudo apt-get install bubblewrap"
		return r
	}
	r.Path = path
	dir, err := os.MkdirTemp("", "jail-mcp-probe-")
	if err != nil {
		r.Reason = fmt.Sprintf("create probe directory: %v", err)
		return r
	}
	defer os.Remove(dir)
	b := newBwrap(path)
	cmd, err := b.Command(Spec{Argv: []string{"/bin/true"}, Dir: dir, Jail: dir, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		r.Reason = err.Error()
		return r
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := runContext(ctx, b, cmd); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		r.Reason, r.Hint = explainBwrap(msg, opts)
		return r
	}
	r.Available = true
	return r
}

func runContext(ctx context.Context, b Backend, cmd *exec.Cmd) error {
	p, err := b.Start(cmd, nil)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- p.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return errors.Join(ctx.Err(), <-done)
	}
}

// explainBwrap turns bubblewrap's complaint into a reason and the command
// that fixes the host, reading the kernel settings that commonly close user
// namespaces.
func explainBwrap(msg string, opts Options) (reason, hint string) {
	reason = "bubblewrap cannot create its sandbox here: " + firstLine(msg)
	read := func(name string) string {
		b, err := opts.readFile(name)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	switch {
	case read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
		return reason + "; AppArmor restricts unprivileged user namespaces",
			"sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
	case read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
		return reason + "; unprivileged user namespaces are disabled",
			"sudo sysctl -w kernel.unprivileged_userns_clone=1"
	case read("/proc/sys/user/max_user_namespaces") == "0":
		return reason + "; user namespaces are disabled",
			"sudo sysctl -w user.max_user_namespaces=15000"
	}
	return reason, ""
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
