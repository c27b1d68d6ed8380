package jail

import (
	"crypto/rand"
	"encoding/hex"
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
	"time"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"golang.org/x/sys/unix"
)

// The project view (--overlay) under bubblewrap: calls see the project
// through an overlay mount, the live project below and the session's layer
// above, in a mount namespace of its own (a view) that each call's thread
// enters. Overlayfs leaves changes of its lower layer undefined under a
// mount that has looked them up (it caches their entries): a view serves
// calls only while the host changed nothing of the project's directories.
// The server watches them and numbers their states (Call.ViewGen, the
// watch of session/view): a call runs in a view made at its number,
// or the agent makes one; told of a change (msgView), the agent readies a
// view ahead of the next call. A job keeps the view it started in. A call
// numbered 0 (a watch that cannot see everything) gets a view of its own,
// mounted ahead of it and untouched until it runs: a mount that has looked
// nothing up caches nothing.
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

// agentWorkID names this agent's work directories in the session's
// layer, which every agent of the session shares: random, since an
// agent's pid is its sandbox's, where two agents of a session (one per
// policy, or one and the agent that replaced it) may have the same.
var agentWorkID = sync.OnceValue(func() string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic("agent: no randomness for a work directory's name: " + err.Error())
	}
	return hex.EncodeToString(b)
})

// agentOverlay is the project view's part of the agent's config.
type agentOverlay struct {
	Caches   []CacheMount `json:"caches,omitempty"` // targets under StagedJail
	Siblings string       `json:"siblings,omitempty"`
	// Native: bubblewrap mounted the view and the caches (NativeOverlay);
	// Close are the descriptors of their layer it left open, which the
	// agent closes before anything runs.
	Native bool   `json:"native,omitempty"`
	Close  []int  `json:"close,omitempty"`
	Gen    uint64 `json:"gen,omitempty"` // Overlay.Gen
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
			// To mount and enter views (setns takes SYS_CHROOT too); to
			// empty the bounding set of each call's thread
			// (dropCapabilitiesThread); and as the overlay's mounter,
			// whose credentials it works with in its work directory
			// (which it makes with no permission bits) and the upper
			// layer. In this namespace only the user's own files are
			// mapped: none of these reaches further than they do.
			AmbientCaps: []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SYS_CHROOT, unix.CAP_SETPCAP, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER},
			Pdeathsig:   syscall.SIGKILL,
		},
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "jail-mcp agent: "+nestedUsernsLine+":", err)
		return 1
	}
	ctl.Close()
	cmd.Wait()
	if st := cmd.ProcessState; st != nil && st.ExitCode() >= 0 {
		return st.ExitCode()
	}
	return 1
}

// overlayState is what an agent of the project view holds: where the jail
// and the layer are, the view calls enter, the watch of the project, and
// the work directories of views that ended.
type overlayState struct {
	project  string
	jailPath string   // where commands see the jail
	siblings string   // the jails' directory, masked but for the jail
	jail     *os.File // the jail, O_PATH: the write rule of each call's domain
	filter   []byte   // seccomp: no new namespaces (native ABI only, as the landlock backend's)
	abi      int
	// writable are the caches shown at their host paths, writable in
	// each view (their layers are the session's).
	writable []string
	// inPlace are the project's writable directories (--writable), bound
	// over each view at their places from StagedWritable, by descriptor in
	// the agent's layer.
	inPlace      []string
	inPlaceFiles []*os.File
	// unread is what no command reads in the project (Spec.Unread):
	// masked in each view as the view shows it when made.
	unread []string

	mu      sync.Mutex
	entered map[int]*view // by thread: the view it entered
	cur     *view         // the shared view, made at gen; nil: none yet
	// busy is the view calls run in, nil when none does: while one does,
	// every call enters it and no other view is made. A second view over
	// the session's layer, mounted beside it, would not see what its
	// calls write there, and could copy a file up again over their
	// writes (the kernel leaves two mounts over one upper directory
	// undefined). A call that wanted a newer state is told (Behind).
	busy *view
	// gen is the latest number of the project's state the server gave
	// (0: its watch is blind, every call gets a view of its own).
	gen  uint64
	dead []string // work directories of views that ended
	seq  uint64
}

// view is a mount namespace where the project is an overlay: calls enter
// it (setns) while it is current.
type view struct {
	gen   uint64
	made  time.Time // when it was made: the host's project as calls see it
	calls int       // calls that run in it (busy)
	ns    int       // the mount namespace
	work  string    // its work directory in the layer
	rules int       // the agent's Landlock layer, made inside it
	// views are the read views of calls made inside it, by key (viewKey),
	// with the directories each listed; guarded by overlayState.mu.
	views map[string]viewRules
	users int // threads that entered it or will; with released, its end
	// released: no longer current; it ends when its last thread does.
	released bool
	// private: made for one call (numbered 0), untouched until that call
	// runs.
	private bool
	// build: one thread at a time looks up or makes a read view of it,
	// so that spares armed together share one (each holds a descriptor
	// per inode it grants: four made at once held four times as many).
	build sync.Mutex
}

// newOverlayState readies the project view of project for a jail shown
// at jailPath in siblings, given by its descriptor, mounts the caches in
// the jail and starts watching the project.
func newOverlayState(project, jailPath, siblings string, jail *os.File, caches []CacheMount, abi int, inPlace []string, inPlaceFiles []*os.File) (*overlayState, error) {
	if project == "" || siblings == "" || !Within(jailPath, siblings) || jailPath == siblings {
		return nil, errors.New("agent: the project view needs the project and the jail inside it")
	}
	o := &overlayState{project: project, jailPath: jailPath, siblings: siblings, abi: abi, entered: map[int]*view{}, inPlace: inPlace}
	for _, p := range inPlace {
		if !Within(p, project) || p == project || Within(p, siblings) {
			return nil, fmt.Errorf("agent: the writable %s is not in the project", p)
		}
	}
	for _, f := range inPlaceFiles {
		fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			return nil, fmt.Errorf("agent: keep a writable directory: %w", err)
		}
		o.inPlaceFiles = append(o.inPlaceFiles, os.NewFile(uintptr(fd), f.Name()))
	}
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
		if c.Target == c.Lower {
			o.writable = append(o.writable, c.Target)
		}
	}
	return o, nil
}

// known is the latest number of the project's state the agent was told
// of, by its config (Overlay.Gen), a call or a change (0: none yet, or a
// call of its own view): the number armed spares enter a view at.
func (o *overlayState) known() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gen
}

// join makes v, which an armed spare entered, the view of a call
// numbered gen, and reports whether it may: the view calls run in (busy)
// while one does, else the shared view made at gen, or for a call
// numbered 0 a view of its own nothing looked into yet. behind: the call
// wanted a newer state than v shows (busy).
func (o *overlayState) join(v *view, gen uint64) (ok, behind bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if b := o.busy; b != nil {
		if v != b {
			return false, false
		}
		b.calls++
		return true, gen == 0 || b.gen < gen
	}
	if gen == 0 && !v.private || gen != 0 && (v != o.cur || v.gen != gen) {
		return false, false
	}
	v.calls++
	o.busy = v
	return true, false
}

// finish ends a call's run in v, which join or current(call) counted,
// once nothing it ran is left. It reports whether v was the last busy
// view and is behind the project's latest state, or was a call's own:
// the caller readies a view of that state (readyView), which no call
// could while v was busy.
func (o *overlayState) finish(v *view) (renew bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	v.calls--
	if v.calls > 0 || o.busy != v {
		return false
	}
	o.busy = nil
	return o.gen == 0 || v != o.cur || v.gen != o.gen
}

// current returns the view a call numbered gen enters (call: to run a
// command in it, else to be armed ahead of one), with one more user: the
// caller's thread, which leaves it when it ends. While a call runs in a
// view (busy), that is the one, and behind says whether gen asked for a
// newer state; else it is the shared view made at gen, made now when the
// shared one was made at another number. A call numbered 0 gets a view
// of its own.
func (o *overlayState) current(gen uint64, call bool) (v *view, behind bool, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if gen > o.gen || gen == 0 {
		o.gen = gen
	}
	if b := o.busy; b != nil {
		b.users++
		if call {
			b.calls++
		}
		return b, call && (gen == 0 || b.gen < gen), nil
	}
	if gen != 0 && o.cur != nil && o.cur.gen == gen {
		v = o.cur
	} else if v, err = o.makeView(gen); err != nil {
		return nil, false, err
	} else if gen == 0 {
		// A view of its own: nobody else enters it.
		v.released, v.private = true, true
	} else if gen >= o.gen {
		if old := o.cur; old != nil {
			old.released = true
			o.endIfUnused(old)
		}
		o.cur = v
	} else {
		// An older number than the shared view's: this call only.
		v.released = true
	}
	v.users++
	if call {
		v.calls++
		o.busy = v
	}
	return v, false, nil
}

// leave ends the calling thread's use of v.
func (o *overlayState) leave(v *view) {
	o.mu.Lock()
	defer o.mu.Unlock()
	v.users--
	o.endIfUnused(v)
}

// endIfUnused closes v's descriptors once it is released and unused: its
// mounts go when the last process in it does, its work directory after
// them (reap). Callers hold mu.
func (o *overlayState) endIfUnused(v *view) {
	if !v.released || v.users > 0 || v.ns < 0 {
		return
	}
	unix.Close(v.ns)
	unix.Close(v.rules)
	for _, r := range v.views {
		unix.Close(r.fd)
		r.held.release()
	}
	v.ns, v.rules, v.views = -1, -1, nil
	o.dead = append(o.dead, v.work)
}

// viewRules is a read view's ruleset and the directories it listed.
type viewRules struct {
	fd     int
	stamps []dirStamp
	held   *heldGrants
}

// makeView makes a view on a thread of its own, which ends once the view
// is made (the namespace lives on by its descriptor). Callers hold mu.
func (o *overlayState) makeView(gen uint64) (*view, error) {
	o.seq++
	v := &view{gen: gen, made: time.Now(), ns: -1, rules: -1, views: map[string]viewRules{}, work: fmt.Sprintf("work/%s-%d", agentWorkID(), o.seq)}
	done := make(chan error, 1)
	FreshThread(func() {
		err := o.mountView(v.work)
		if err == nil {
			v.ns, err = unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		}
		if err == nil {
			// The agent's layer names the view's own project root.
			private := append(slices.Clone(bwrapPrivate), o.project)
			v.rules, err = fsRuleset(o.abi, o.jail, o.inPlaceFiles, true, 0, append(private, o.writable...)...)
		}
		done <- err
	})
	if err := <-done; err != nil {
		if v.ns >= 0 {
			unix.Close(v.ns)
		}
		o.dead = append(o.dead, v.work)
		return nil, err
	}
	return v, nil
}

// enterView enters the calling thread, locked and never to run anything
// else after its call, into view v (current gave it, counting the
// thread, which leaves it when it ends: threadEnd) and the call's
// domain: with
// every capability dropped, the agent's Landlock layer (the jail, the
// sandbox's own directories and the view writable), the read view of a
// call that shows extra, and the filter that denies new namespaces. It
// returns the directories the read view listed, and what it granted by
// rules of their own, held (a reference of the caller's to release).
func (a *agent) enterView(v *view, extra []string) ([]dirStamp, *heldGrants, error) {
	a.ov.mu.Lock()
	a.ov.entered[unix.Gettid()] = v
	a.ov.mu.Unlock()
	// A mount namespace is entered by a thread that shares no file
	// system attributes (the Go runtime's threads share them).
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return nil, nil, fmt.Errorf("overlay: a thread of its own: %w", err)
	}
	if err := unix.Setns(v.ns, unix.CLONE_NEWNS); err != nil {
		return nil, nil, fmt.Errorf("overlay: enter the view: %w", err)
	}
	if err := dropCapabilitiesThread(); err != nil {
		return nil, nil, err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return nil, nil, fmt.Errorf("no_new_privs: %w", err)
	}
	if err := ll.LandlockRestrictSelf(v.rules, 0); err != nil {
		return nil, nil, fmt.Errorf("landlock restrict: %w", err)
	}
	// The read view names the view's own entries: made in it, kept for
	// the next call of the same view that fits it.
	fd, stamps, held, err := a.ov.viewRules(v, viewKey(extra), func() (int, []dirStamp, *heldGrants, error) {
		return viewRuleset(*a.view, extra)
	})
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(fd)
	if err := ll.LandlockRestrictSelf(fd, 0); err != nil {
		held.release()
		return nil, nil, fmt.Errorf("landlock restrict: %w", err)
	}
	if err := loadSeccompThread(a.ov.filter); err != nil {
		held.release()
		return nil, nil, err
	}
	return stamps, held, nil
}

// viewRules returns the read view of v named key: a descriptor of its
// ruleset, the caller's to close, the directories it was made from as
// they were, and what it granted, held (a reference of the caller's).
// It is the one v keeps while those directories are as they were, else
// one made by build, kept in its place. The descriptor and the reference
// are taken under mu, where another thread's replacement closes the
// ones v kept: never a closed or reused number, never a released hold.
func (o *overlayState) viewRules(v *view, key string, build func() (int, []dirStamp, *heldGrants, error)) (int, []dirStamp, *heldGrants, error) {
	v.build.Lock()
	defer v.build.Unlock()
	o.mu.Lock()
	r, ok := v.views[key]
	fd, held := -1, (*heldGrants)(nil)
	if ok {
		if d, err := unix.Dup(r.fd); err == nil {
			fd, held = d, r.held.hold()
		}
	}
	o.mu.Unlock()
	if fd >= 0 && fresh(r.stamps) {
		return fd, r.stamps, held, nil
	}
	if fd >= 0 {
		unix.Close(fd)
		held.release()
	}
	nfd, stamps, nheld, err := build()
	if err != nil {
		return -1, nil, nil, err
	}
	fd, err = unix.Dup(nfd)
	if err != nil {
		unix.Close(nfd)
		nheld.release()
		return -1, nil, nil, fmt.Errorf("read view: %w", err)
	}
	held = nheld.hold()
	o.mu.Lock()
	if v.views != nil {
		if old, had := v.views[key]; had {
			unix.Close(old.fd)
			old.held.release()
		}
		v.views[key] = viewRules{fd: nfd, stamps: stamps, held: nheld}
	} else {
		unix.Close(nfd)
		nheld.release()
	}
	o.mu.Unlock()
	return fd, stamps, held, nil
}

// threadEnd is deferred by every thread that may run a call: it leaves
// the view it entered.
func (a *agent) threadEnd() {
	if a.ov == nil {
		return
	}
	a.ov.mu.Lock()
	v := a.ov.entered[unix.Gettid()]
	delete(a.ov.entered, unix.Gettid())
	a.ov.mu.Unlock()
	if v != nil {
		a.ov.leave(v)
	}
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
	if !(Within(c.Target, StagedJail) && c.Target != StagedJail || c.Target == c.Lower) || strings.ContainsAny(c.Name, "/.") {
		return fmt.Errorf("agent: cache %s: neither in the jail nor at its own place", c.Name)
	}
	base := "caches/" + c.Name
	// One work directory per agent: two mounts must never share one.
	work := fmt.Sprintf("%s/work-%s", base, agentWorkID())
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

// mountView gives the calling thread, locked and never to run anything
// else, a mount namespace of its own where the project is the overlay of
// a fresh mount with work directory work, the jails' directory an empty
// read-only tmpfs but for the jail (and git's ignore file), and the staged
// jail and layer hidden.
func (o *overlayState) mountView(name string) error {
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
	var inPlace []int
	defer func() {
		for _, fd := range inPlace {
			unix.Close(fd)
		}
	}()
	for i := range o.inPlace {
		fd, err := unix.OpenTree(unix.AT_FDCWD, StagedWritable(i), unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("overlay: clone the writable %s: %w", o.inPlace[i], err)
		}
		inPlace = append(inPlace, fd)
	}
	ignore := -1
	if fd, err := unix.OpenTree(unix.AT_FDCWD, filepath.Join(o.siblings, ".gitignore"), unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC); err == nil {
		ignore = fd
		defer unix.Close(ignore)
	}
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
	// The project's writable directories, over the view at their places
	// (the server made each before the session started: the view shows
	// it from the project).
	for i, fd := range inPlace {
		if err := unix.MoveMount(fd, "", unix.AT_FDCWD, o.inPlace[i], unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("overlay: bind the writable %s over the view: %w", o.inPlace[i], err)
		}
	}
	if err := maskUnread(append(o.unread, linkedUnread(o.unread, o.project)...), o.siblings); err != nil {
		return err
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

// maskUnread masks unread in the view's project as it is now: a
// directory by an empty read-only tmpfs, a file by an empty read-only one
// of mode 0000, never below the jails' directory (siblings).
func maskUnread(unread []string, siblings string) error {
	masks := masksOf(unread, func(p string) bool { return !Within(p, siblings) && !Within(siblings, p) })
	empty := -1 // a detached tmpfs holding the empty file
	defer func() {
		if empty >= 0 {
			unix.Close(empty)
		}
	}()
	for _, m := range masks {
		if m.Dir {
			if err := unix.Mount("tmpfs", m.Path, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=4k,nr_inodes=2"); err != nil {
				return fmt.Errorf("overlay: mask %s: %w", m.Path, err)
			}
			continue
		}
		if empty < 0 {
			fd, err := emptyFileMount()
			if err != nil {
				return err
			}
			empty = fd
		}
		fd, err := unix.OpenTree(empty, "unread", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("overlay: mask %s: %w", m.Path, err)
		}
		err = unix.MoveMount(fd, "", unix.AT_FDCWD, m.Path, unix.MOVE_MOUNT_F_EMPTY_PATH)
		unix.Close(fd)
		if err == nil {
			err = unix.Mount("", m.Path, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
		}
		if err != nil {
			return fmt.Errorf("overlay: mask %s: %w", m.Path, err)
		}
	}
	return nil
}

// linkedUnread are the places in the project that unread's links lead to
// as the view shows them now (the host's ln -sf config/production.env
// .env, made after the session started): masked too, as the read view
// hides what a hidden path leads to. A link's own path cannot be masked
// (a mount follows it), and the view grants the project whole. A place
// that is or holds the project stays shown.
func linkedUnread(unread []string, project string) []string {
	var out []string
	for _, h := range unread {
		matches := []string{h}
		if _, pat := filepath.Split(h); isPattern(pat) {
			matches, _ = filepath.Glob(h)
		}
		for _, m := range matches {
			if fi, err := os.Lstat(m); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				continue
			}
			r, err := filepath.EvalSymlinks(m)
			if err != nil || r == project || !Within(r, project) {
				continue
			}
			out = append(out, r)
		}
	}
	return out
}

// emptyFileMount mounts a small tmpfs nowhere (a detached mount) holding
// one empty file of mode 0000, "unread", and returns the mount.
func emptyFileMount() (int, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("overlay: a tmpfs for masks: %w", err)
	}
	defer unix.Close(fs)
	for _, kv := range [][2]string{{"mode", "0500"}, {"size", "4k"}, {"nr_inodes", "2"}} {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return -1, fmt.Errorf("overlay: a tmpfs for masks: %s: %w", kv[0], err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("overlay: a tmpfs for masks: %w", err)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return -1, fmt.Errorf("overlay: a tmpfs for masks: %w", err)
	}
	f, err := unix.Openat(mnt, "unread", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(mnt)
		return -1, fmt.Errorf("overlay: the empty file of masks: %w", err)
	}
	unix.Close(f)
	return mnt, nil
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

// renewView readies a view of the project at gen (a change the server
// saw) and spares in it (readyView), unless a call made it already.
func (a *agent) renewView(gen uint64) {
	if gen != 0 && gen <= a.ov.known() {
		return // a call made it already
	}
	a.readyView(gen)
}

// readyView readies a view of the project at gen, and spares in it: the
// armed spares of the old one end (the server places no spare of this
// agent; a placed agent's calls enter the new view on their own). While
// calls run in a view (busy) nothing is made: the last to end calls this
// again (finish).
func (a *agent) readyView(gen uint64) {
	if !a.ov.renew(gen) {
		return
	}
	a.mu.Lock()
	if a.placed {
		a.mu.Unlock()
		return
	}
	for id, sp := range a.spares {
		if sp.armed {
			delete(a.spares, id)
			close(sp.run)
		}
	}
	a.mu.Unlock()
	a.refill()
}

// renew makes the shared view at gen (0: none, each call gets a view of
// its own) and reports whether it did: not while calls run in one (busy),
// whose last call renews it then (finish).
func (o *overlayState) renew(gen uint64) bool {
	o.mu.Lock()
	if gen > o.gen || gen == 0 {
		o.gen = gen
	}
	busy := o.busy != nil
	o.mu.Unlock()
	if busy || gen == 0 {
		return !busy
	}
	v, _, err := o.current(gen, false)
	if err != nil {
		return false
	}
	o.leave(v)
	return true
}
