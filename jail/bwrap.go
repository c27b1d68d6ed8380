package jail

import (
	"os/exec"
	"strings"
)

// bwrap confines with bubblewrap: a read-only view of the host, a private
// /dev, /proc, pid, ipc and uts namespace, and the jail bound writable.
type bwrap struct {
	path string // absolute path of the bwrap binary
}

func (b *bwrap) Name() string     { return "bwrap" }
func (b *bwrap) Confined() bool   { return true }
func (b *bwrap) BindsPaths() bool { return true }

func (b *bwrap) Command(spec Spec) (*exec.Cmd, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	cmd := exec.Command(b.path, BwrapArgs(spec)...)
	// bwrap itself gets an empty environment: the command's environment
	// reaches it through --setenv, so nothing in it (LD_PRELOAD, say) can
	// act on bwrap before the sandbox is in place.
	cmd.Env = []string{}
	cmd.Dir = "/"
	return cmd, nil
}

func (b *bwrap) Guarantees() Guarantees {
	return guarantees(map[int]string{
		2: "host unix sockets, abstract sockets and SysV IPC are not yet closed off",
		7: "process count, memory, file size and disk are not yet bounded; timeout and output are",
	})
}

// BwrapArgs returns the bubblewrap arguments that run spec, without the
// program name. It is pure so that the policy can be golden-tested anywhere.
//
// Order matters: bubblewrap applies mounts in argument order, so the host is
// bound read-only first and the jail is bound writable last, over it.
func BwrapArgs(spec Spec) []string {
	args := []string{
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
	}
	if !spec.Network {
		args = append(args, "--unshare-net")
	}
	args = append(args,
		"--die-with-parent",
		// A new session has no controlling terminal: no TIOCSTI into ours.
		"--new-session",
		// uid 0 keeps every capability inside the namespace unless dropped,
		// enough to remount / read-write; for other users this is a no-op.
		"--cap-drop", "ALL",
		"--disable-userns",
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
		// As root a fresh /proc lets the sandbox write kernel tunables.
		"--ro-bind", "/proc/sys", "/proc/sys",
	)
	args = append(args, "--bind", spec.Jail, spec.Jail)
	// Credentials and state copies go over their places in the jail, so
	// after it; the directory holding the state copies is hidden last.
	for _, m := range spec.Mounts {
		bind := "--ro-bind"
		if m.Writable {
			bind = "--bind"
		}
		args = append(args, bind, m.Source, m.Target)
	}
	for _, h := range spec.Hide {
		args = append(args, "--perms", "0500", "--tmpfs", h)
	}
	args = append(args, "--chdir", spec.Dir, "--clearenv")
	for _, kv := range spec.Env {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--setenv", k, v)
	}
	args = append(args, "--")
	return append(args, spec.Argv...)
}
