package jail

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The bubblewrap policy, pure and free of build constraints so that it is
// golden-tested on every OS; the backend that runs it is bwrap.go.

// StagedJail and StagedLayer are where bubblewrap binds the jail and the
// project view's layer under --overlay, in the sandbox's own /dev: each
// call's view binds the jail at its place and hides them.
const (
	StagedJail  = "/dev/.jail-mcp/jail"
	StagedLayer = "/dev/.jail-mcp/layer"
	stagedDir   = "/dev/.jail-mcp"
)

// StagedWritable is where bubblewrap binds the project's i-th writable
// directory (--writable) under --overlay, for each view to bind over the
// project at its place.
func StagedWritable(i int) string { return stagedDir + "/writable/" + strconv.Itoa(i) }

// ShadowDirs are the host directories bubblewrap shows empty and
// read-only. A read-only view does not stop a FIFO: opening one for
// writing ignores a read-only mount, and a host process reading it
// receives what the command writes. These are where host programs keep
// FIFOs (/run/initctl, which systemd reads as init requests; container
// runtimes' stdio FIFOs under /run; a script's mkfifo in /tmp). /dev/shm
// is already the sandbox's own (--dev). What a command must still see
// below them (Spec.Visible: the project; the directories of its PATH and
// the resolver's configuration, which bwrap adds) is bound back read-only.
// FIFOs elsewhere (the project, ~/.cache) stay reachable: a Landlock layer
// inside the sandbox is what closes them.
var ShadowDirs = []string{"/tmp", "/var/tmp", "/run"}

// shadowed reports whether p lies in one of the shadowed directories.
func shadowed(p string, shadow []string) bool {
	for _, d := range shadow {
		if Within(p, d) {
			return true
		}
	}
	return false
}

// Mask is a host path bubblewrap hides by a mount over it (Spec.Unread):
// a directory shown empty, a file unreadable.
type Mask struct {
	Path string
	Dir  bool
}

// Within reports whether p is dir or lies below it; both are clean and
// absolute. It allocates nothing: a call's read view asks it of every
// hidden and shown path, for each directory of the call's PATH. It is
// the one test of the kind for the server (the session's paths, its
// jails, the registry), so that "/" and a name that merely begins with
// dir's are read the same way everywhere.
func Within(p, dir string) bool {
	return dir == "/" || strings.HasPrefix(p, dir) && (len(p) == len(dir) || p[len(dir)] == '/')
}

// BwrapArgs returns the bubblewrap arguments that run spec with shadow
// (ShadowDirs as they resolve on the host) shown empty, without the
// program name, for a bubblewrap of features feat (a tmpfs bounded where
// it has --size). It is pure so that the policy can be golden-tested
// anywhere.
//
// The project view (Spec.Overlay) is mounted by bubblewrap itself where
// the server opened its layer for that (nativeOverlay, bubblewrap 0.9 and
// later): the project's overlay first, right after the host (and what is
// shadowed and bound back), then what
// goes below the project (its writable directories, the jail, the
// masks) over it at their places. Otherwise the session agent mounts it
// in a user namespace of its own, and the jail and the layer are bound
// aside for it (StagedJail, StagedLayer).
//
// Order matters: bubblewrap applies mounts in argument order, so the host is
// bound read-only first, the shadowed directories hidden, what must stay
// visible below them bound back, the operator's writable directories of
// the project bound writable over its read-only view, and the jail bound
// writable last, over it.
//
// What a command may write outside the jail, in memory, is bounded: its
// /dev is read-only but for the devices, POSIX message queues (a few
// hundred KiB a user, RLIMIT_MSGQUEUE) and /dev/shm, a tmpfs of
// Spec.MaxMemory bytes; the tmpfs that hide the jail's Hide are read-only
// too (their owner could chmod them writable).
func BwrapArgs(spec Spec, shadow []string, feat BwrapFeatures, masks ...Mask) []string {
	b := &bwrapBuilder{fd: 3}
	b.namespaces(spec)
	b.system(spec, feat.Size)
	vis := b.shadow(spec.Visible, shadow)
	if spec.nativeLayer() != nil {
		// Over the project as the host and the shadowing show it.
		b.overlay(spec.Project, spec.Project)
	}
	b.writable(spec)
	staged := b.jail(spec)
	maskedDirs := b.unread(masks, vis)
	for _, h := range spec.Hide {
		b.add("--perms", "0500", "--tmpfs", staged(h))
	}
	// Read-only only now that bwrap has made, in the shadowing tmpfs, the
	// mount points of the jail and of what is bound back (remount-ro does
	// not reach the mounts below).
	for _, d := range shadow {
		b.add("--remount-ro", d)
	}
	for _, h := range spec.Hide {
		b.add("--remount-ro", staged(h))
	}
	for _, d := range maskedDirs {
		b.add("--remount-ro", d)
	}
	b.add("--remount-ro", "/dev")
	b.command(spec)
	return b.args
}

// overlay mounts lower copy-on-write at target, its upper and work
// directories the next two descriptors, which the server opened without
// following a link (nativeLayer): bubblewrap takes them as paths only,
// and resolves the links /proc/self/fd/N to where the directories are.
func (b *bwrapBuilder) overlay(lower, target string) {
	b.add("--overlay-src", lower, "--overlay", "/proc/self/fd/"+strconv.Itoa(b.fd), "/proc/self/fd/"+strconv.Itoa(b.fd+1), target)
	b.fd += 2
}

// bwrapBuilder accumulates BwrapArgs in order and numbers the descriptors
// they name: sources the server opened are bound by descriptor, fd 3 on,
// in the order of bwrapFiles; bwrap closes them before the command runs.
type bwrapBuilder struct {
	args []string
	fd   int
}

func (b *bwrapBuilder) add(args ...string) { b.args = append(b.args, args...) }

// bind binds src at dst, or file by descriptor when the server opened it.
func (b *bwrapBuilder) bind(file *os.File, writable bool, src, dst string) {
	flag := "--ro-bind"
	if writable {
		flag = "--bind"
	}
	if file != nil {
		b.add(flag+"-fd", strconv.Itoa(b.fd), dst)
		b.fd++
		return
	}
	b.add(flag, src, dst)
}

// namespaces are the sandbox's own namespaces and what it may not gain.
func (b *bwrapBuilder) namespaces(spec Spec) {
	b.add("--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts")
	if !spec.Network || spec.Egress != nil {
		// Held to a proxy: the sandbox's own network, whose only way out
		// is the server's proxy on its loopback.
		b.add("--unshare-net")
	}
	b.add(
		"--die-with-parent",
		// A new session has no controlling terminal: no TIOCSTI into ours.
		"--new-session",
		// uid 0 keeps every capability inside the namespace unless dropped,
		// enough to remount / read-write; for other users this is a no-op.
		"--cap-drop", "ALL",
	)
	switch {
	case spec.Overlay == nil || spec.nativeLayer() != nil:
		// bubblewrap mounts the project view itself, if any: nothing in
		// the sandbox makes a namespace.
		b.add("--disable-userns")
	case spec.Overlay.mapRoot:
		// With an overlay, the agent makes a user namespace of its own
		// to mount in (overlay_linux.go); every call's thread denies new
		// namespaces to its commands with seccomp instead. Mapping root
		// there takes CAP_SETFCAP (the kernel's guard against file
		// capabilities a namespace's root would set for the host's).
		b.add("--cap-add", "CAP_SETFCAP")
	}
}

// system is the host read-only and the sandbox's own /dev and /proc.
func (b *bwrapBuilder) system(spec Spec, sized bool) {
	b.add(
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		// The IPC namespace's own POSIX message queues, mounted where the
		// agent's Landlock layer can name them as writable.
		"--mqueue", "/dev/mqueue",
	)
	// Pages written there outlive the calls that wrote them and belong to
	// no process (the session agent counts them in every call's memory).
	// A bubblewrap that cannot size a tmpfs leaves /dev/shm a directory
	// of the read-only /dev: no POSIX shared memory, rather than unbounded.
	switch {
	case spec.MaxMemory <= 0:
		b.add("--tmpfs", "/dev/shm")
	case sized:
		b.add("--size", strconv.FormatInt(spec.MaxMemory, 10), "--tmpfs", "/dev/shm")
	}
	b.add(
		"--proc", "/proc",
		// As root a fresh /proc lets the sandbox write kernel tunables.
		"--ro-bind", "/proc/sys", "/proc/sys",
	)
}

// shadow hides the shadowed directories and binds back what must stay
// visible below them; it returns visible sorted, a path before the paths
// below it.
func (b *bwrapBuilder) shadow(visible, shadow []string) []string {
	// Every shadowed directory is mounted before anything is bound back,
	// so that one shadowing another (a /var/tmp that is /tmp) hides
	// nothing bound back.
	for _, d := range shadow {
		perms := "0755"
		if d == "/tmp" || d == "/var/tmp" {
			perms = "1777"
		}
		b.add("--perms", perms, "--tmpfs", d)
	}
	vis := slices.Clone(visible)
	slices.Sort(vis)
	var shown []string
	for _, v := range vis {
		if !shadowed(v, shadow) || shadowed(v, shown) {
			continue
		}
		shown = append(shown, v)
		b.add("--ro-bind", v, v)
	}
	return vis
}

// writable binds the project's directories commands write in place
// (--writable) over its read-only view: none is or holds the jails'
// directory (refused at start), so the jail's binds after them do not
// undo them.
func (b *bwrapBuilder) writable(spec Spec) {
	for i, w := range spec.Writable {
		at := w.Path
		if spec.Overlay != nil && spec.nativeLayer() == nil {
			// Bound aside, like the jail: each view binds it over its
			// overlay (overlay_linux.go).
			at = StagedWritable(i)
		}
		b.bind(w.File, true, w.Path, at)
	}
}

// jail binds the jail writable, hides other sessions' jails, and binds
// the credentials and state copies over their places in the jail, and
// the overlay's layer. It returns where a path of the jail is bound.
//
// Other sessions' jails: an empty tmpfs over their directory, made
// read-only once the jail is bound into it. With an overlay the agent
// mounts (nested), nothing is mounted below the project here: the
// agent's user namespace would hold such mounts locked, and overlayfs
// takes no lower layer with locked mounts below it. The jail and the
// layer are bound aside instead (StagedJail, StagedLayer), where each
// call's view takes them from (overlay_linux.go). With bubblewrap's own
// overlay, all goes over the view at its place, and the host caches'
// overlays after the jail.
func (b *bwrapBuilder) jail(spec Spec) (staged func(string) string) {
	jailAt := spec.Jail
	staged = func(p string) string { return p }
	nl := spec.nativeLayer()
	nested := spec.Overlay != nil && nl == nil
	if nested {
		jailAt = StagedJail
		staged = func(p string) string {
			if rest, ok := strings.CutPrefix(p, spec.Jail); ok && (rest == "" || rest[0] == '/') {
				return StagedJail + rest
			}
			return p
		}
	}
	siblings := !nested && spec.Siblings != "" && spec.Jail != spec.Siblings && Within(spec.Jail, spec.Siblings)
	if siblings {
		b.add("--perms", "0755", "--tmpfs", spec.Siblings)
	}
	b.bind(spec.JailFile, true, spec.Jail, jailAt)
	if siblings {
		// git's ignore file of the directory: the jails stay ignored.
		gi := filepath.Join(spec.Siblings, ".gitignore")
		b.add("--ro-bind-try", gi, gi, "--remount-ro", spec.Siblings)
	}
	// Credentials and state copies go over their places in the jail, so
	// after it; the directory holding the state copies is hidden last.
	for _, m := range spec.Mounts {
		b.bind(m.File, m.Writable, m.Source, staged(m.Target))
	}
	if nested {
		b.bind(spec.Overlay.Layer, true, "", StagedLayer)
	}
	if nl != nil {
		// The host caches, copy-on-write at their places: in the jail,
		// so after it, or at their own.
		for _, c := range nl.caches {
			b.overlay(c.lower, c.target)
		}
	}
	return staged
}

// unread hides what no command reads (Spec.Unread) as it is now: a
// directory empty but for what stays shown in it (vis), a file
// unreadable (mode 0000, read-only; its data a descriptor at EOF, after
// the bound ones). It returns the directories, to be made read-only.
func (b *bwrapBuilder) unread(masks []Mask, vis []string) (dirs []string) {
	for _, m := range masks {
		if !m.Dir {
			b.add("--perms", "0000", "--ro-bind-data", strconv.Itoa(b.fd), m.Path)
			b.fd++
			continue
		}
		b.add("--perms", "0755", "--tmpfs", m.Path)
		for _, v := range vis {
			if v != m.Path && Within(v, m.Path) {
				b.add("--ro-bind-try", v, v)
			}
		}
		dirs = append(dirs, m.Path)
	}
	return dirs
}

// command is the filter, the command's directory and environment, and
// its argv.
func (b *bwrapBuilder) command(spec Spec) {
	// No unix sockets (see seccomp.go); the filter is the descriptor after
	// the bound ones, then the pipe where bwrap says its init's pid.
	b.add("--seccomp", strconv.Itoa(b.fd), "--info-fd", strconv.Itoa(b.fd+1))
	b.add("--chdir", spec.Dir, "--clearenv")
	for _, kv := range spec.Env {
		k, v, _ := strings.Cut(kv, "=")
		b.add("--setenv", k, v)
	}
	b.add("--")
	b.add(spec.Argv...)
}
