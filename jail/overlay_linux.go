package jail

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// The project view (--overlay) under bubblewrap: every call sees the
// project through an overlay mount of its own, the live project below and
// the session's layer above, mounted in a mount namespace of the call's
// thread just before the call (or, for an armed spare, ahead of it, left
// untouched until the call: a mount nothing has looked into yet caches no
// entry of the project, so the call sees the project as it is when it
// runs). Overlayfs leaves changes of its lower layer undefined under a
// mount that has looked them up; a mount per call makes every call see
// what the host changed before it, while a job keeps the mount it started
// with.
//
// Mounting takes CAP_SYS_ADMIN over the mount namespace, which the agent
// has in a user namespace of its own (agentInNamespaces), nested in the
// sandbox's: the sandbox's mounts are locked there (a read-only bind
// stays read-only, a mount cannot be lifted to show what is below it), so
// that capability reaches nothing of the host. Each call's thread drops
// every capability after mounting, before it enters the call's Landlock
// domain and forks the command, and loads a filter that denies new
// namespaces (bubblewrap's --disable-userns would deny the agent's own).

// agentNSArg, after the agent's descriptor, makes the agent start in a
// user and mount namespace of its own, where it may mount.
const agentNSArg = "ns"

// agentOverlay is the project view's part of the agent's config.
type agentOverlay struct {
	Caches   []CacheMount `json:"caches,omitempty"` // targets under StagedJail
	Siblings string       `json:"siblings,omitempty"`
}

// agentInNamespaces runs the agent in a new user and mount namespace,
// mapped to the same user and group, with CAP_SYS_ADMIN there, and waits
// for it: bubblewrap's init ends the sandbox when its child ends.
func agentInNamespaces(fdArg string) int {
	fd, err := strconv.Atoi(fdArg)
	if err != nil || fd <= 2 {
		fmt.Fprintln(os.Stderr, "jail-mcp agent: jail-mcp starts its agents itself; this is not a command")
		return 2
	}
	uid, gid := os.Getuid(), os.Getgid()
	ctl := os.NewFile(uintptr(fd), "control")
	cmd := &exec.Cmd{
		Path: "/proc/self/exe", Args: []string{"jail-mcp-agent", agentArg, "3"},
		Env: os.Environ(), Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		ExtraFiles: []*os.File{ctl},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  unix.CLONE_NEWUSER | unix.CLONE_NEWNS,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
			// To mount; to empty the bounding set of each call's thread
			// (dropCapabilitiesThread); and as the overlay's mounter,
			// whose credentials it works with in its work directory
			// (which it makes with no permission bits) and the upper
			// layer. In this namespace only the user's own files are
			// mapped: none of these reaches further than they do.
			AmbientCaps: []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER},
			Pdeathsig:   syscall.SIGKILL,
		},
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "jail-mcp agent: a user namespace to mount the project view in:", err)
		return 1
	}
	ctl.Close()
	cmd.Wait()
	if st := cmd.ProcessState; st != nil && st.ExitCode() >= 0 {
		return st.ExitCode()
	}
	return 1
}

// overlayState is what an agent of the project view holds: where the
// jail and the layer are, and the work directories of views that ended.
type overlayState struct {
	project  string
	jailPath string   // where commands see the jail
	siblings string   // the jails' directory, masked but for the jail
	jail     *os.File // the jail, O_PATH: the write rule of each call's domain
	filter   []byte   // seccomp: no new namespaces (native ABI only, as the landlock backend's)

	mu    sync.Mutex
	seq   uint64
	owner map[int]string // a thread's view: its work directory
	dead  []string       // work directories of ended views
}

// newOverlayState readies the project view of project for a jail shown
// at jailPath in siblings, given by its descriptor, and mounts the
// caches in the jail.
func newOverlayState(project, jailPath, siblings string, jail *os.File, caches []CacheMount) (*overlayState, error) {
	if project == "" || siblings == "" || !within(jailPath, siblings) || jailPath == siblings {
		return nil, errors.New("agent: the project view needs the project and the jail inside it")
	}
	o := &overlayState{project: project, jailPath: jailPath, siblings: siblings, owner: map[int]string{}}
	jfd, err := unix.FcntlInt(jail.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, fmt.Errorf("agent: keep the jail: %w", err)
	}
	o.jail = os.NewFile(uintptr(jfd), "jail")
	if o.filter, err = buildSeccomp(runtime.GOARCH, seccompPolicy{native: true, ns: true}); err != nil {
		return nil, err
	}
	for _, c := range caches {
		if err := o.mountCache(c); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// layerPath is the path of rel in the layer, where bubblewrap bound it.
func layerPath(rel string) string { return StagedLayer + "/" + rel }

// overlayOptions are the mount options of a view: userxattr, as a user
// namespace mounts it; no index (the layer is mounted by every call, the
// others live); volatile: the layer is a scratch copy whose work
// directory is never mounted again, so no copy-up waits for a sync.
func overlayOptions(lower, upper, work string) (string, error) {
	for _, p := range []string{lower, upper, work} {
		if strings.ContainsAny(p, ",:\\\n") {
			return "", fmt.Errorf("overlay: a path with a comma, colon or backslash cannot be mounted: %q", p)
		}
	}
	return "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work + ",userxattr,index=off,volatile", nil
}

// mountCache mounts host cache c copy-on-write at its place in the jail,
// in the agent's mount namespace, where every call's view shows it (the
// jail is among the mounts each view shows again). A cache the host
// lacks is left out.
func (o *overlayState) mountCache(c CacheMount) error {
	if fi, err := os.Stat(c.Lower); err != nil || !fi.IsDir() {
		return nil
	}
	if !within(c.Target, StagedJail) || c.Target == StagedJail || strings.ContainsAny(c.Name, "/.") {
		return fmt.Errorf("agent: cache %s: not in the jail", c.Name)
	}
	base := "caches/" + c.Name
	// One work directory per agent: two mounts must never share one.
	work := fmt.Sprintf("%s/work-%d", base, os.Getpid())
	removeWork(layerPath(work))
	if err := os.MkdirAll(layerPath(base+"/upper"), 0o700); err != nil {
		return fmt.Errorf("agent: the layer of cache %s: %w", c.Name, err)
	}
	if err := os.Mkdir(layerPath(work), 0o700); err != nil {
		return fmt.Errorf("agent: the work directory of cache %s: %w", c.Name, err)
	}
	opts, err := overlayOptions(c.Lower, layerPath(base+"/upper"), layerPath(work))
	if err != nil {
		return err
	}
	if err := unix.Mount("overlay", c.Target, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("agent: mount cache %s at %s: %w", c.Name, c.Target, err)
	}
	return nil
}

// enter gives the calling thread, locked and never to run anything else
// after its call, a mount namespace of its own where the project is the
// overlay of a fresh mount, the jails' directory an empty read-only tmpfs
// but for the jail (and git's ignore file), and the staged jail and layer
// hidden.
func (o *overlayState) enter() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("overlay: a mount namespace for the call: %w", err)
	}
	// Nothing mounted here reaches the agent's namespace.
	if err := unix.Mount("none", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("overlay: private mounts: %w", err)
	}
	jail, err := unix.OpenTree(unix.AT_FDCWD, StagedJail, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("overlay: clone the jail: %w", err)
	}
	defer unix.Close(jail)
	ignore := -1
	if fd, err := unix.OpenTree(unix.AT_FDCWD, filepath.Join(o.siblings, ".gitignore"), unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC); err == nil {
		ignore = fd
		defer unix.Close(ignore)
	}
	o.mu.Lock()
	o.seq++
	name := fmt.Sprintf("work/%d-%d", os.Getpid(), o.seq)
	o.owner[unix.Gettid()] = name
	o.mu.Unlock()
	if err := os.Mkdir(layerPath(name), 0o700); err != nil {
		return fmt.Errorf("overlay: a work directory: %w", err)
	}
	opts, err := overlayOptions(o.project, layerPath("upper"), layerPath(name))
	if err != nil {
		return err
	}
	if err := unix.Mount("overlay", o.project, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("overlay: mount the project view: %w", err)
	}
	// The other sessions' jails: an empty tmpfs over their directory,
	// the jail and git's ignore file bound into it, then read-only.
	if err := unix.Mount("tmpfs", o.siblings, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64"); err != nil {
		return fmt.Errorf("overlay: mask the jails: %w", err)
	}
	if err := os.MkdirAll(o.jailPath, 0o700); err != nil {
		return fmt.Errorf("overlay: the jail's place: %w", err)
	}
	if err := unix.MoveMount(jail, "", unix.AT_FDCWD, o.jailPath, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("overlay: show the jail: %w", err)
	}
	if ignore >= 0 {
		gi := filepath.Join(o.siblings, ".gitignore")
		if f, err := os.OpenFile(gi, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			f.Close()
			if err := unix.MoveMount(ignore, "", unix.AT_FDCWD, gi, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
				return fmt.Errorf("overlay: show the jails' ignore file: %w", err)
			}
		}
	}
	if err := unix.Mount("", o.siblings, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("overlay: the jails' mask read-only: %w", err)
	}
	// The staged jail and layer: out of sight (the layer would be the
	// view's upper layer written behind the overlay's back).
	if err := unix.Mount("tmpfs", stagedDir, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0500,size=4k,nr_inodes=4"); err != nil {
		return fmt.Errorf("overlay: hide the staged jail: %w", err)
	}
	return nil
}

// ended notes that the calling thread, which entered a view, is ending:
// its work directory goes once the kernel has let go of the mount.
func (o *overlayState) ended() {
	o.mu.Lock()
	defer o.mu.Unlock()
	tid := unix.Gettid()
	if name, ok := o.owner[tid]; ok {
		delete(o.owner, tid)
		o.dead = append(o.dead, name)
	}
}

// reap removes the work directories of ended views that the kernel let
// go of; the others wait for the next reap.
func (o *overlayState) reap() {
	o.mu.Lock()
	dead := o.dead
	o.dead = nil
	o.mu.Unlock()
	var left []string
	for _, name := range dead {
		if removeWork(layerPath(name)) != nil {
			left = append(left, name)
		}
	}
	if len(left) > 0 {
		o.mu.Lock()
		o.dead = append(o.dead, left...)
		o.mu.Unlock()
	}
}

// removeWork removes an overlay work directory, whose own work/ the
// kernel made with no permission bits.
func removeWork(dir string) error {
	os.Chmod(filepath.Join(dir, "work"), 0o700)
	return os.RemoveAll(dir)
}

// enterView mounts the calling thread's project view (overlayState.enter)
// and enters the call's domain: with every capability dropped, the
// agent's layer (the jail, the sandbox's own directories and the view
// writable), the read view of a call that shows extra, and the filter
// that denies new namespaces. It returns the directories the view listed.
func (a *agent) enterView(extra []string) ([]dirStamp, error) {
	if err := a.ov.enter(); err != nil {
		return nil, err
	}
	if err := dropCapabilitiesThread(); err != nil {
		return nil, err
	}
	fd, err := fsRuleset(a.abi, a.ov.jail, true, 0, append(slices.Clone(bwrapPrivate), a.ov.project)...)
	if err == nil {
		err = restrictThread(fd)
	}
	if err != nil {
		return nil, err
	}
	vfd, stamps, err := viewRuleset(*a.view, extra)
	if err == nil {
		err = restrictThread(vfd)
	}
	if err != nil {
		return nil, err
	}
	if err := loadSeccompThread(a.ov.filter); err != nil {
		return nil, err
	}
	return stamps, nil
}

// threadEnd is deferred by every thread that may run a call: a view it
// mounted goes with it.
func (a *agent) threadEnd() {
	if a.ov != nil {
		a.ov.ended()
	}
}
