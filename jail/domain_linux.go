package jail

import (
	"fmt"
	"os"
	"slices"
	"time"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The Landlock and seccomp pieces of a jail, used by a session agent to
// confine itself and, per call, each command.

// landlockDevices are the devices a shell needs to write, besides the jail.
// bwrapPrivate are bubblewrap's own directories that stay writable under
// the agent's layer, as they are without it: POSIX shared memory and
// message queues (Landlock's rules hold on inodes, so the queues' mount
// names the IPC namespace's own), and terminals.
var bwrapPrivate = []string{"/dev/shm", "/dev/mqueue", "/dev/pts"}

var landlockDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom"}

// landlockPreset is the Landlock configuration of ABI abi: every right
// that ABI knows.
func landlockPreset(abi int) landlock.Config {
	presets := []landlock.Config{landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6, landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11}
	return presets[min(max(abi, 1), len(presets))-1]
}

// fsRuleset makes the ruleset of a jail: the whole file system readable
// and executable, the jail and the project's writable directories (given
// by descriptors opened without following links) writable with every
// right, a few devices writable; with network
// off, no TCP bind or connect; held to a proxy (proxyPort), TCP connects
// to that port only and no bind; abstract unix sockets and signals scoped to the
// domain where the ABI has scopes. private lists directories of the
// sandbox's own (bubblewrap's /dev/shm, /dev/pts) writable too.
func fsRuleset(abi int, jail *os.File, writable []*os.File, network bool, proxyPort int, private ...string) (int, error) {
	cfg := landlockPreset(abi)
	attr := ll.RulesetAttr{HandledAccessFS: uint64(cfg.HandledAccessFS), Scoped: uint64(cfg.Scoped)}
	switch {
	case !network:
		attr.HandledAccessNet = uint64(cfg.HandledAccessNet)
	case proxyPort > 0:
		// Connects to the proxy's port only, and no bind: a listener
		// would serve the host's network (listen(2) without bind is
		// denied by seccomp, its bind being implicit).
		attr.HandledAccessNet = uint64(cfg.HandledAccessNet) & (ll.AccessNetConnectTCP | ll.AccessNetBindTCP)
		if attr.HandledAccessNet&ll.AccessNetConnectTCP == 0 {
			return -1, fmt.Errorf("landlock ABI %d cannot bound TCP connects (4 or later can)", abi)
		}
	}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return -1, fmt.Errorf("landlock ruleset: %w", err)
	}
	if network && proxyPort > 0 {
		if err := ll.LandlockAddNetPortRule(fd, &ll.NetPortAttr{AllowedAccess: ll.AccessNetConnectTCP, Port: uint64(proxyPort)}, 0); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("landlock rule for the proxy's port %d: %w", proxyPort, err)
		}
	}
	all := attr.HandledAccessFS
	read := uint64(ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir)
	dev := all & uint64(ll.AccessFSReadFile|ll.AccessFSWriteFile|ll.AccessFSIoctlDev)
	add := func(f *os.File, access uint64) error {
		return ll.LandlockAddPathBeneathRule(fd, &ll.PathBeneathAttr{AllowedAccess: access, ParentFd: int(f.Fd())}, 0)
	}
	fail := func(err error) (int, error) { unix.Close(fd); return -1, err }
	root, err := os.OpenFile("/", unix.O_PATH, 0)
	if err != nil {
		return fail(err)
	}
	err = add(root, read)
	root.Close()
	if err != nil {
		return fail(fmt.Errorf("landlock rule for /: %w", err))
	}
	if err := add(jail, all); err != nil {
		return fail(fmt.Errorf("landlock rule for the jail: %w", err))
	}
	for _, w := range writable {
		if err := add(w, all); err != nil {
			return fail(fmt.Errorf("landlock rule for the writable %s: %w", w.Name(), err))
		}
	}
	for _, p := range private {
		f, err := os.OpenFile(p, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			continue
		}
		err = add(f, all|dev)
		f.Close()
		if err != nil {
			return fail(fmt.Errorf("landlock rule for %s: %w", p, err))
		}
	}
	for _, d := range landlockDevices {
		f, err := os.OpenFile(d, unix.O_PATH, 0)
		if err != nil {
			continue // a device this host lacks
		}
		fi, serr := f.Stat()
		if serr == nil && fi.Mode()&os.ModeCharDevice != 0 {
			err = add(f, dev)
		}
		f.Close()
		if err != nil {
			return fail(fmt.Errorf("landlock rule for %s: %w", d, err))
		}
	}
	return fd, nil
}

// scopeRuleset makes a ruleset that scopes signals and abstract unix
// sockets: a domain nested with it cannot signal, trace or reach the
// abstract sockets of what is outside it. Given directories (the jail, the
// project's writable ones; nil ones are skipped), it grants renames and
// links across theirs (REFER), which every layer denies where it does not
// grant them, whatever it handles.
func scopeRuleset(refer ...*os.File) (int, error) {
	refer = slices.DeleteFunc(slices.Clone(refer), func(f *os.File) bool { return f == nil })
	attr := ll.RulesetAttr{Scoped: ll.ScopeAbstractUnixSocket | ll.ScopeSignal}
	if len(refer) > 0 {
		attr.HandledAccessFS = ll.AccessFSRefer
	}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return -1, fmt.Errorf("landlock scope: %w", err)
	}
	for _, d := range refer {
		if err := ll.LandlockAddPathBeneathRule(fd, &ll.PathBeneathAttr{AllowedAccess: ll.AccessFSRefer, ParentFd: int(d.Fd())}, 0); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("landlock rule for %s: %w", d.Name(), err)
		}
	}
	return fd, nil
}

// writableFiles are the descriptors of spec's writable directories, which
// the caller opened: a backend grants rights to what they are, never to
// a path.
func writableFiles(spec Spec) ([]*os.File, error) {
	files := make([]*os.File, len(spec.Writable))
	for i, w := range spec.Writable {
		if w.File == nil {
			return nil, fmt.Errorf("the writable %s must be given by a descriptor", w.Path)
		}
		files[i] = w.File
	}
	return files, nil
}

// restrictThread enters the domain of ruleset fd on the calling thread
// only, and closes fd.
func restrictThread(fd int) error {
	return restrict(fd, unix.Prctl, ll.LandlockRestrictSelf)
}

// restrictProcess enters the domain of ruleset fd on every thread of the
// process, and closes fd.
func restrictProcess(fd int) error {
	return restrict(fd, ll.AllThreadsPrctl, ll.AllThreadsLandlockRestrictSelf)
}

// restrict sets no_new_privs and enters the domain of ruleset fd with
// prctl and restrictSelf (of one thread, or of all), and closes fd.
func restrict(fd int, prctl func(option int, arg2, arg3, arg4, arg5 uintptr) error, restrictSelf func(fd int, flags uint32) error) error {
	defer unix.Close(fd)
	if err := prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := restrictSelf(fd, 0); err != nil {
		return fmt.Errorf("landlock restrict: %w", err)
	}
	return nil
}

// sockFprog turns a raw sock_filter program into the kernel's structure;
// ins must stay alive while it is used.
func sockFprog(prog []byte) (unix.SockFprog, []unix.SockFilter) {
	ins := make([]unix.SockFilter, len(prog)/8)
	for i := range ins {
		b := prog[8*i:]
		ins[i] = unix.SockFilter{
			Code: uint16(b[0]) | uint16(b[1])<<8, Jt: b[2], Jf: b[3],
			K: uint32(b[4]) | uint32(b[5])<<8 | uint32(b[6])<<16 | uint32(b[7])<<24,
		}
	}
	return unix.SockFprog{Len: uint16(len(ins)), Filter: &ins[0]}, ins
}

// loadSeccompThread loads a raw sock_filter program on the calling thread
// only (no_new_privs must be set on it).
func loadSeccompThread(prog []byte) error {
	fprog, ins := sockFprog(prog)
	err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0)
	_ = ins
	if err != nil {
		return fmt.Errorf("load seccomp filter: %w", err)
	}
	return nil
}

// dropCapabilitiesThread empties the calling thread's capability sets,
// its bounding set and its ambient set: uid 0 keeps its files but no
// power beyond them.
func dropCapabilitiesThread() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		// One not in the bounding set already (a container's root with
		// its capabilities dropped) needs no dropping, nor CAP_SETPCAP.
		if in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err == nil && in == 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("drop capabilities: %w", err)
	}
	return nil
}

// reapGrace bounds how long a call's thread waits for its killed
// processes to go.
const reapGrace = 5 * time.Second

// TreeInterval is how often the processes of a running call are counted.
const TreeInterval = 50 * time.Millisecond

// killDomain kills every process of the calling thread's Landlock domain,
// setsid and double-forked ones included, and waits up to reapGrace for
// them to be gone. Signals are scoped to the domain, so kill -1 reaches
// them and nothing else (the caller's own process is never signalled by
// it). Zombies the caller was made parent of (it is a child subreaper)
// are reaped here.
//
// The caller's process is a child subreaper, and the caller has reaped
// its command: whatever the command left is then a descendant of the
// caller's process (an orphan goes to the nearest subreaper, and
// CLONE_PARENT reaches no higher than the caller), so a process without
// a child has nothing left to kill. One waitid tells that, where a kill
// -1 looks at every process of the pid namespace, the host's under
// landlock, and never says ESRCH there (the processes the domain may not
// signal count as tried): a walk of /proc would follow at every call.
func killDomain() {
	if noChildren() {
		return
	}
	deadline := time.Now().Add(reapGrace)
	for {
		unix.Kill(-1, unix.SIGKILL)
		// Nothing left that this thread may signal, zombies included: the
		// call is over without a walk of /proc.
		if unix.Kill(-1, 0) == unix.ESRCH {
			return
		}
		if procs, _ := domainCount(true, nil); procs == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// noChildren reports whether the calling process has no child at all,
// running, stopped or a zombie, of any of its threads.
func noChildren() bool {
	var info unix.Siginfo
	const every = unix.WEXITED | unix.WSTOPPED | unix.WCONTINUED | unix.WNOHANG | unix.WNOWAIT | unix.WALL
	return unix.Waitid(unix.P_ALL, 0, &info, every, nil) == unix.ECHILD
}
