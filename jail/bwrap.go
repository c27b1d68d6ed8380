//go:build linux

package jail

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// bwrap confines with bubblewrap: a read-only view of the host, a private
// /dev, /proc, pid, ipc and uts namespace, and the jail bound writable.
// Where the kernel has Landlock ABI 6, each session's commands run in a
// session agent inside the session's sandbox, which adds the Landlock
// layer a read-only mount cannot give (no FIFO of the host opened for
// writing) and forks each command in a scoped domain of its own; without
// it, every command is a bwrap of its own, with the host's /tmp, /var/tmp
// and /run shadowed instead.
type bwrap struct {
	path    string        // absolute path of the bwrap binary
	seccomp []byte        // the filter denying unix sockets, as bwrap --seccomp reads it
	feat    BwrapFeatures // what this bubblewrap can do: see bwrapFeaturesOf
	abi     int           // the kernel's Landlock ABI; below MinLandlockABI, no agents
	exe     *selfBinary   // the server's own binary, which agents run
	shadow  []string      // the host's ShadowDirs as they resolve here, without agents

	// filterErr is why no seccomp filter could be built for this
	// machine: every command then fails with it, rather than with what
	// bwrap says of an empty filter (a kernel without CONFIG_SECCOMP).
	filterErr error

	pathMu  sync.Mutex
	pathFor string   // the PATH pathDirs were resolved for
	pathVis []string // PATH's directories below a shadowed one
}

func (b *bwrap) Name() string                { return "bwrap" }
func (b *bwrap) Confined() bool              { return true }
func (b *bwrap) Credentials() CredentialMode { return BindCredentials }
func (b *bwrap) Agents() bool                { return b.abi >= MinLandlockABI && b.exe != nil }

// nativeOverlay: bubblewrap mounts the project view itself (NativeOverlay).
func (b *bwrap) nativeOverlay() bool { return b.feat.Overlay && b.Agents() }

func (b *bwrap) Runner(spec Spec, launch Launcher) (Runner, error) {
	if !b.Agents() {
		if spec.Overlay != nil {
			return nil, ErrNoOverlay
		}
		return &directRunner{spec: spec, start: b.startDirect}, nil
	}
	return b.startAgent(spec, launch)
}

// command is the bwrap command that runs spec, with the descriptors
// BwrapArgs numbers, the seccomp filter, the info pipe and extra after
// them, and the read end of the info pipe.
func (b *bwrap) command(spec Spec, shadow []string, extra ...*os.File) (*exec.Cmd, *os.File, error) {
	if b.filterErr != nil {
		return nil, nil, b.filterErr
	}
	filter, err := memfd("jail-mcp-seccomp", b.seccomp)
	if err != nil {
		return nil, nil, fmt.Errorf("load seccomp filter: %w", err)
	}
	infoR, infoW, err := os.Pipe()
	if err != nil {
		filter.Close()
		return nil, nil, fmt.Errorf("create info pipe: %w", err)
	}
	nulls, err := nullFiles(spec.masks)
	if err != nil {
		filter.Close()
		infoR.Close()
		infoW.Close()
		return nil, nil, err
	}
	cmd := exec.Command(b.path, BwrapArgs(spec, shadow, b.feat, spec.masks...)...)
	cmd.ExtraFiles = append(append(append(bwrapFiles(spec), nulls...), filter, infoW), extra...)
	// bwrap itself gets an empty environment: the command's environment
	// reaches it through --setenv, so nothing in it (LD_PRELOAD, say) can
	// act on bwrap before the sandbox is in place.
	cmd.Env = []string{}
	cmd.Dir = "/"
	return cmd, infoR, nil
}

// closeSent closes the descriptors command added for bwrap, once bwrap
// has them.
func closeSent(cmd *exec.Cmd, spec Spec) {
	n := len(bwrapFiles(spec))
	closeFiles(cmd.ExtraFiles[n:])
}

// startAgent starts the session agent in a sandbox of spec, bound to its
// jail, credentials and network.
func (b *bwrap) startAgent(spec Spec, launch Launcher) (Runner, error) {
	if spec.JailFile == nil {
		return nil, errors.New("bwrap: the jail must be given by a descriptor")
	}
	writable, err := writableFiles(spec)
	if err != nil {
		return nil, err
	}
	// bubblewrap's own overlay: its layer's directories, opened now.
	ended, err := b.nativeView(&spec)
	if err != nil {
		return nil, err
	}
	server, ctl, err := socketPair()
	if err != nil {
		ended()
		return nil, err
	}
	// After the descriptors BwrapArgs numbers, its filter and info pipe:
	// the agent's control socket and the server's binary.
	spec.masks = sandboxMasks(spec, nil)
	n := 3 + len(bwrapFiles(spec)) + fileMasks(spec.masks) + 2
	spec.Argv = []string{"/proc/self/fd/" + strconv.Itoa(n+1), agentArg, strconv.Itoa(n)}
	files := append([]*os.File{spec.JailFile}, writable...)
	if spec.Overlay != nil && spec.nativeLayer() == nil {
		// The agent first makes a user namespace of its own to mount in.
		spec.Argv = append(spec.Argv, agentNSArg)
		ov := *spec.Overlay
		ov.mapRoot = os.Geteuid() == 0
		spec.Overlay = &ov
	}
	spec.Env = agentEnv
	if spec.Dir == "" {
		spec.Dir = spec.Jail
	}
	exe, err := b.exe.file()
	if err == nil {
		err = spec.validate()
	}
	var cmd *exec.Cmd
	var infoR *os.File
	if err == nil {
		cmd, infoR, err = b.command(spec, nil, ctl, exe)
	}
	if err != nil {
		server.Close()
		ctl.Close()
		ended()
		return nil, err
	}
	// A session of its own, killed as one with bwrap's init; and with the
	// server, should it die.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	initKill := make(chan func(), 1)
	go func() { initKill <- watchInit(infoR) }()
	kill := func(cmd *exec.Cmd) {
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
		select {
		case k := <-initKill:
			k()
		case <-time.After(initGrace):
		}
		ended()
	}
	cfg := agentMsg{T: msgConfig, Kind: "bwrap", Jail: spec.Jail, Writable: spec.WritablePaths(), Network: spec.Network, ABI: b.abi, MaxShared: spec.MaxMemory, MaxWatches: CallWatchBound(),
		Project: spec.Project, CallPath: spec.CallPath, Jails: spec.Jails, Hidden: viewHidden("bwrap", spec.Siblings, spec.Unread...), Shown: viewShown("bwrap", spec.Jail, append(slices.Clone(spec.Visible), siblingsShown(spec.Siblings)...))}
	var serve func(net.Listener)
	if spec.Egress != nil {
		cfg.Egress, serve = true, spec.Egress.Serve
	}
	cfg.Overlay = agentOverlayOf(spec)
	// Once bwrap has them: the filter and the info pipe's write end.
	sent := cmd.ExtraFiles[len(bwrapFiles(spec)) : len(cmd.ExtraFiles)-2]
	a, err := startAgent(agentStart{cmd: cmd, ctl: ctl, server: server, sent: sent, kill: kill, serve: serve, place: spec.Place}, launch, cfg, files)
	if nl := spec.nativeLayer(); nl != nil {
		nl.close() // bwrap has them, or failed
	}
	if err != nil {
		ended()
		return nil, err
	}
	return a, nil
}

// nativeView readies spec's project view for bubblewrap's own overlay,
// where this bubblewrap mounts one: its layer's directories opened (the
// caller's to close once bwrap has them), a work directory made for this
// sandbox. ended, to be called once the sandbox ended (or did not
// start), removes the work directories; it may be called more than once.
func (b *bwrap) nativeView(spec *Spec) (ended func(), err error) {
	ended = func() {}
	if spec.Overlay == nil {
		return ended, nil
	}
	if spec.Overlay.Layer == nil {
		return nil, errors.New("bwrap: the overlay's layer must be given by a descriptor")
	}
	if !b.nativeOverlay() {
		return ended, nil
	}
	// The layer's directory, kept to remove the work directories after
	// the sandbox: the caller closes its own once the agent started.
	layer, err := openBeneath(spec.Overlay.Layer, ".")
	if err != nil {
		return nil, fmt.Errorf("bwrap: the overlay's layer: %w", err)
	}
	nl, err := openNativeLayer(layer, spec.Overlay.Caches)
	if err != nil {
		layer.Close()
		return nil, err
	}
	// The writable directories go over the view at their places: where
	// the layer has them as the host does, never through its links.
	for _, w := range spec.Writable {
		if rel, ok := strings.CutPrefix(w.Path, spec.Project+"/"); !ok || !layerAgrees(nl.upper, rel, true) {
			nl.close()
			removeNativeWork(layer, nl.workNames)
			layer.Close()
			return nil, fmt.Errorf("bwrap: the session's layer replaced the writable directory %s: jail_apply or jail_reset it", w.Path)
		}
	}
	ov := *spec.Overlay
	ov.native = nl
	spec.Overlay = &ov
	var once sync.Once
	return func() {
		once.Do(func() {
			nl.close() // closed already when bwrap started
			removeNativeWork(layer, nl.workNames)
			layer.Close()
		})
	}, nil
}

// agentOverlayOf is the project view's part of the agent's config: for
// bubblewrap's own overlay, the descriptors of its layer the agent
// closes (bubblewrap leaves them open); else the caches as the agent
// mounts them.
func agentOverlayOf(spec Spec) *agentOverlay {
	if spec.Overlay == nil {
		return nil
	}
	ov := &agentOverlay{Caches: slices.Clone(spec.Overlay.Caches), Siblings: spec.Siblings, Gen: spec.Overlay.Gen}
	if nl := spec.nativeLayer(); nl != nil {
		ov.Native = true
		p, c := nl.files()
		layer := append(p, c...)
		for i, f := range bwrapFiles(spec) {
			if slices.Contains(layer, f) {
				ov.Close = append(ov.Close, 3+i)
			}
		}
		return ov
	}
	for i, c := range ov.Caches {
		// Mounted where the agent has the jail (overlay_linux.go).
		if rest, ok := strings.CutPrefix(c.Target, spec.Jail+"/"); ok {
			ov.Caches[i].Target = StagedJail + "/" + rest
		}
	}
	return ov
}

// startDirect runs one command in a bwrap of its own. Without Landlock ABI
// 6 there is no scope for abstract unix sockets: a sandbox that shares the
// host's network namespace reaches them (the seccomp filter still denies
// every unix socket).
func (b *bwrap) startDirect(spec Spec, c Call) (Process, error) {
	spec.Visible = b.visible(spec)
	spec.masks = sandboxMasks(spec, b.shadow)
	cmd, infoR, err := b.command(spec, b.shadow)
	if err != nil {
		return Process{}, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	wait, err := startOn(cmd, c.Launch)
	closeSent(cmd, spec)
	if err != nil {
		infoR.Close()
		return Process{}, err
	}
	initDone := make(chan func(), 1)
	go func() { initDone <- watchInit(infoR) }()
	pid := cmd.Process.Pid
	// bwrap exits as soon as the command does, while its init, the
	// namespace's pid 1, is still killing what the command left behind:
	// waiting for that init (known from --info-fd) keeps promise 3 for
	// the caller that checks right after.
	return Process{
		Wait: func() (Exit, error) {
			err := wait()
			(<-initDone)()
			if cmd.ProcessState == nil {
				return Exit{Code: -1}, err
			}
			return exitOf(cmd.ProcessState), nil
		},
		Kill: func() { syscall.Kill(-pid, syscall.SIGKILL) },
		// bwrap's group: the command runs in a session of its own in the
		// sandbox, which bwrap's init does not forward signals to.
		Signal: func(sig syscall.Signal) error { return signalGroup(pid, sig) },
		Pid:    pid,
	}, nil
}

func (b *bwrap) Guarantees() Guarantees {
	var notKept map[int]string
	p2 := "no unix sockets (seccomp), no unix datagram socket pairs, no key rings, netlink for routing only, private IPC, signals fenced by the pid namespace and Landlock, no capabilities, no nested user namespaces, internet sockets and routing netlink only (no AF_VSOCK, AF_PACKET...), no leases or directory notifications, no SO_REUSEPORT (with network on, the host's listeners stay the host's), limits, priorities, scheduling and affinity of the caller only, on every ABI (seccomp: the session agent shares the pid namespace), other sessions' jails not in view. Known gaps: flock and read locks on host files a command can read; " + fifoReadGap
	if !b.Agents() {
		notKept = map[int]string{2: "not in full: a FIFO in the project or under HOME, opened for writing, reaches the host process reading it (a read-only mount does not stop it; without Landlock ABI 6 there is no layer that does; /tmp, /var/tmp and /run are shown empty, /dev/shm is the sandbox's own). Otherwise " + p2}
	}
	shm := " and the sandbox's /dev/shm (a tmpfs of --max-memory) and System V segments, which outlive calls: over --max-memory no call starts"
	switch {
	case !b.Agents():
		shm = ", but not the command's own /dev/shm (a tmpfs of --max-memory where bubblewrap 0.7 or later can size one, read-only otherwise) nor its System V segments, which go when it ends"
	case !b.feat.Size:
		shm = " and the sandbox's System V segments, which outlive calls: over --max-memory no call starts (/dev/shm is read-only: this bubblewrap, older than 0.7, cannot bound a tmpfs)"
	}
	how := map[int]string{
		2: p2 + "; a Landlock layer in the sandbox: no FIFO or other file of the host opened for writing, nothing of /tmp, /var/tmp and /run read but what a command needs there; the server is outside the sandbox",
		6: "the environment is an allowlist; the --deny-read list is masked by mounts (and refused by a Landlock read view where session agents run)",
		9: "each session's jail is its own (the others' directory is an empty tmpfs but for it) and so are its processes (a pid namespace per sandbox)",
		7: "processes (threads count as processes) and memory exactly by cgroups where the server can create them, else by a watchdog every 50 ms, which counts every thread and, as memory, resident sets, open memfds" + shm + "; it does not see shared memory a process keeps only through a partly unmapped mapping, nor the memfds of a process that is not dumpable (freed when the call ends); disk by a watchdog every 50 ms and after each call, from inotify; per-file size and core dumps by rlimit",
	}
	return guarantees(notKept, how)
}

// unreadHow: bubblewrap masks what exists when a sandbox starts; a
// session agent's read view refuses the rest.
func (b *bwrap) unreadHow() (string, []string) {
	if !b.Agents() {
		return "masked by bubblewrap's mounts as each command starts: a denied directory shows empty, a denied file reads EACCES (mode 0000); other sessions' jails are not in view, nor are other processes (a pid namespace of its own)", []string{
			"a denied path made while a command runs is readable to that command (the next command's sandbox masks it)",
			"a denied path reached through a symlink made after the sandbox started, to where it lies, is hidden only by its mask",
		}
	}
	return "masked by bubblewrap's mounts when the session's sandbox starts (a denied directory shows empty, a denied file reads EACCES), and refused (EACCES) by each call's Landlock read view, paths made later included; other sessions' jails are not in view, nor are other processes (a pid namespace of its own)", []string{}
}

// bwrapFiles are the descriptors BwrapArgs refers to, in the order of the
// numbers it gives them: fd 3 first.
func bwrapFiles(spec Spec) []*os.File {
	var files, caches []*os.File
	if nl := spec.nativeLayer(); nl != nil {
		var project []*os.File
		project, caches = nl.files()
		files = append(files, project...)
	}
	for _, w := range spec.Writable {
		if w.File != nil {
			files = append(files, w.File)
		}
	}
	if spec.JailFile != nil {
		files = append(files, spec.JailFile)
	}
	for _, m := range spec.Mounts {
		if m.File != nil {
			files = append(files, m.File)
		}
	}
	files = append(files, caches...)
	if spec.Overlay != nil && spec.Overlay.Layer != nil && spec.nativeLayer() == nil {
		files = append(files, spec.Overlay.Layer)
	}
	return files
}

// sandboxMasks are the masks of what spec hides (Spec.Unread) as the
// host has it now, in a sandbox that shadows shadow: each path that
// exists there (not below a shadowed directory, unless bound back), not
// in the jail; with an overlay, none in the project (each view masks its
// own, overlay_linux.go).
func sandboxMasks(spec Spec, shadow []string) []Mask {
	return nativeMasks(spec, masksOf(spec.Unread, func(p string) bool {
		switch {
		case Within(p, spec.Jail) || Within(spec.Jail, p):
			return false
		case spec.Overlay != nil && spec.Project != "" && (Within(p, spec.Project) || Within(spec.Project, p)):
			// The agent's views mask their own; bubblewrap's view is
			// masked as it shows the path (nativeMasks).
			return spec.nativeLayer() != nil && p != spec.Project && Within(p, spec.Project)
		}
		return !shadowed(p, shadow) || shadowed(p, spec.Visible)
	}))
}

// nativeMasks are masks as bubblewrap's own view shows their paths in
// the project: each of the kind the view has there (the session's layer
// may have made a file a directory), none where the view has nothing, a
// link, or a link or file on the way (a mount there would write the
// layer or follow the layer's link; what a link leads to is masked, or
// not, on its own).
func nativeMasks(spec Spec, masks []Mask) []Mask {
	nl := spec.nativeLayer()
	if nl == nil {
		return masks
	}
	out := masks[:0]
	for _, m := range masks {
		if Within(m.Path, spec.Project) && m.Path != spec.Project {
			switch viewKind(nl.upper, spec.Project, m.Path[len(spec.Project)+1:]) {
			case 'd':
				m.Dir = true
			case 'f':
				m.Dir = false
			default:
				continue
			}
		}
		out = append(out, m)
	}
	return out
}

// masksOf are the masks of unread (Spec.Unread) that exist now and keep
// takes: not links, regular files and directories only, none below a
// masked directory; a pattern gives what matches it.
func masksOf(unread []string, keep func(string) bool) []Mask {
	var paths []string
	for _, h := range unread {
		if !filepath.IsAbs(h) {
			continue
		}
		if dir, pat := filepath.Split(h); isPattern(pat) {
			m, _ := filepath.Glob(filepath.Join(dir, pat))
			paths = append(paths, m...)
			continue
		}
		paths = append(paths, filepath.Clean(h))
	}
	slices.Sort(paths) // a directory before what is below it
	var out []Mask
	for _, p := range slices.Compact(paths) {
		fi, err := os.Lstat(p)
		switch {
		case err != nil, fi.Mode()&os.ModeSymlink != 0, !fi.IsDir() && !fi.Mode().IsRegular():
			continue
		case !keep(p):
			continue
		case slices.ContainsFunc(out, func(m Mask) bool { return m.Dir && Within(p, m.Path) }):
			continue
		}
		out = append(out, Mask{Path: p, Dir: fi.IsDir()})
	}
	return out
}

// fileMasks counts the masks of files: each takes a descriptor.
func fileMasks(masks []Mask) int {
	n := 0
	for _, m := range masks {
		if !m.Dir {
			n++
		}
	}
	return n
}

// nullFiles opens /dev/null once for each file mask: bubblewrap copies
// what it reads there (nothing) into the file it binds over the path.
func nullFiles(masks []Mask) ([]*os.File, error) {
	var out []*os.File
	for range fileMasks(masks) {
		f, err := os.Open(os.DevNull)
		if err != nil {
			closeFiles(out)
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// shadowHost resolves ShadowDirs on this host: each directory by its real
// path, once, and none that is missing.
func shadowHost() []string {
	return slices.DeleteFunc(canonical(ShadowDirs), func(d string) bool {
		fi, err := os.Stat(d)
		return err != nil || !fi.IsDir()
	})
}

// visible is spec.Visible plus what bwrap keeps in view itself below a
// shadowed directory: the directories of the command's PATH and the
// resolver's configuration (/etc/resolv.conf is a link into /run where
// systemd-resolved or NetworkManager manage it). A path that does not
// exist, or that resolves into the jail, is left out.
func (b *bwrap) visible(spec Spec) []string {
	out := slices.Clone(spec.Visible)
	out = append(out, b.pathDirs(envValue(spec.Env, "PATH"))...)
	if r, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil && shadowed(r, b.shadow) {
		out = append(out, r)
	}
	return slices.DeleteFunc(out, func(p string) bool { return Within(p, spec.Jail) })
}

// pathDirs resolves the directories of path that lie below a shadowed
// directory, once for each PATH the server sees.
func (b *bwrap) pathDirs(path string) []string {
	b.pathMu.Lock()
	defer b.pathMu.Unlock()
	if path == b.pathFor && b.pathVis != nil {
		return b.pathVis
	}
	vis := []string{}
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		resolved, err := filepath.EvalSymlinks(d)
		if err != nil || !shadowed(resolved, b.shadow) {
			continue
		}
		if fi, err := os.Stat(resolved); err == nil && fi.IsDir() {
			vis = append(vis, resolved)
		}
	}
	b.pathFor, b.pathVis = path, vis
	return vis
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
	if _, err := seccompFilter(runtime.GOARCH, os.Geteuid() == 0); err != nil {
		r.Reason = fmt.Sprintf("build the seccomp filter for %s: %v", runtime.GOARCH, err)
		return r
	}
	// The ABI of the Landlock layer its session agents add, 0 for none.
	if abi, err := opts.landlockABI(); err == nil {
		r.ABI = abi
	}
	if opts.SkipTrialRun && (!opts.choosing || userNamespaces() == nil) {
		r.Available = true
		return r
	}
	if msg := probeRun(ctx, newBwrap(path, r.ABI), "/bin/true"); msg != "" {
		r.Reason, r.Hint = explainBwrap(msg, opts)
		return r
	}
	r.Available = true
	return r
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

// userNamespaces checks, in about 2 ms, what bwrap needs first
// and what containers, AppArmor and sysctls most often deny: creating user,
// mount and pid namespaces without privilege. It is the cheap check of
// Options.SkipTrialRun.
func userNamespaces() error {
	// No uid or gid map: creating the namespaces is what is checked, and
	// the server is not dumpable, so a normal user's server could not
	// write the child's maps (its /proc files are root's).
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID,
		Pdeathsig:  syscall.SIGKILL,
	}
	return cmd.Run()
}

// Egress: a sandbox of its own network namespace, whose only way out is
// the server's proxy on its loopback (a listener the session agent opens
// there); it needs the agent.
func (b *bwrap) Egress() error {
	if !b.Agents() {
		return fmt.Errorf("%w: bwrap holds one through the session agent, which needs Landlock ABI %d", ErrNoEgress, MinLandlockABI)
	}
	return nil
}

// egressHow: how bwrap holds an allowlist; it leaves nothing to declare.
func (b *bwrap) egressHow() (string, []string) {
	return "held: the sandbox's own network namespace, whose only way out is the server's proxy, listening on its loopback", []string{}
}
