package jail

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

const (
	goos      = "linux"
	preferred = "bwrap"
)

// native reports whether backend name exists on this OS.
func native(name string) bool { return name == "bwrap" || name == "landlock" }

func probe(ctx context.Context, name string, opts Options) Report {
	switch name {
	case "bwrap":
		return probeBwrap(ctx, opts)
	case "landlock":
		return probeLandlock(ctx, opts)
	default:
		return Report{Backend: name, Reason: name + " exists only on macOS"}
	}
}

func construct(name string, r Report) (Backend, error) {
	if name == "landlock" {
		return newLandlock(r.ABI)
	}
	return newBwrap(r.Path, r.ABI), nil
}

// newBwrap is bubblewrap at path; abi is the kernel's Landlock ABI, which
// decides whether commands run in session agents.
func newBwrap(path string, abi int) *bwrap {
	filter, err := seccompFilter(runtime.GOARCH, os.Geteuid() == 0)
	if err != nil {
		// No filter for this machine: no command runs, and each says why.
		err = fmt.Errorf("build the seccomp filter for %s: %w", runtime.GOARCH, err)
	}
	b := &bwrap{path: path, seccomp: filter, filterErr: err, shadow: shadowHost(), feat: bwrapFeaturesOf(path)}
	// With Landlock ABI 6, session agents add the layer that closes what
	// the shadowing only narrowed.
	if abi >= MinLandlockABI {
		if exe, err := selfExe(); err == nil {
			b.abi, b.exe, b.shadow = abi, exe, nil
		}
	}
	return b
}

// memfd is an in-memory file holding data, read from its start.
func memfd(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// probeLandlock checks the kernel's Landlock ABI, then runs /bin/true
// under the real policy once.
func probeLandlock(ctx context.Context, opts Options) Report {
	r := Report{Backend: "landlock"}
	abi, err := opts.landlockABI()
	switch {
	case err != nil:
		r.Reason = fmt.Sprintf("Landlock is not enabled in this kernel (%v)", err)
		r.Hint = "boot Linux 6.12 or later with landlock in the lsm= list (see /sys/kernel/security/lsm), or install bubblewrap: sudo apt-get install bubblewrap"
		return r
	case abi < MinLandlockABI:
		r.ABI = abi
		r.Reason = fmt.Sprintf("Landlock ABI %d here; jail-mcp needs ABI %d (Linux 6.12 or later), the first that fences signals to host processes", abi, MinLandlockABI)
		r.Hint = "upgrade to Linux 6.12 or later, or install bubblewrap: sudo apt-get install bubblewrap"
		return r
	}
	r.ABI = abi
	l, err := newLandlock(abi)
	if err != nil {
		r.Reason = err.Error()
		return r
	}
	if opts.SkipTrialRun {
		r.Available = true
		return r
	}
	if msg := probeRun(ctx, l, "/bin/true"); msg != "" {
		r.Reason = "Landlock cannot confine a command here: " + msg
		return r
	}
	r.Available = true
	return r
}

func isMainThread() bool { return unix.Gettid() == unix.Getpid() }

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
