package jail

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// devices a shell needs to write, besides the jail.
var landlockDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom"}

// landlockJail confines with the kernel's Landlock LSM, needing neither
// user namespaces nor any program installed. The rules are applied to the
// locked OS thread that forks the command, never to the rest of the
// server:
//
//   - the thread drops every capability (a root server) and sets no new
//     privileges; a seccomp filter denies what Landlock cannot see (unix
//     sockets, SysV IPC, new namespaces, with network off every socket but
//     netlink, for root chmod and chown);
//   - a Landlock domain makes the whole filesystem read-only but the jail
//     and a few devices, denies TCP with network off, and scopes abstract
//     sockets and signals;
//   - a guard process is forked in that domain; the thread then enters a
//     nested, scoped domain and forks the command, which so can neither
//     signal nor trace the guard. The guard waits for the end of a pipe
//     only the server holds: when the server dies, however, the guard
//     kills every process of the call (kill -1 reaches only its domain);
//   - the thread counts the call's processes while the command runs and
//     kills them all once it exits, kill -1 from inside the command's
//     domain; the server is a child subreaper, so what left the command's
//     tree is reaped by the server, not left to an init that may not reap.
type landlockJail struct {
	abi     int
	cfg     landlock.Config // the handled rights of abi
	root    bool            // the server runs as uid 0
	filters [2][]byte       // seccomp programs, [0] network off, [1] on

	mu    sync.Mutex
	calls map[*exec.Cmd]landlockCall // between Command and Start
}

type landlockCall struct {
	jail    *os.File // nil: open Spec.Jail
	path    string
	network bool
}

func newLandlock(abi int) (*landlockJail, error) {
	presets := []landlock.Config{landlock.V6, landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11}
	cfg := presets[min(abi, 11)-MinLandlockABI]
	l := &landlockJail{abi: abi, cfg: cfg, root: os.Geteuid() == 0}
	for i, network := range []bool{false, true} {
		f, err := buildSeccomp(runtime.GOARCH, landlockPolicy(network, l.root))
		if err != nil {
			return nil, err
		}
		l.filters[i] = f
	}
	return l, nil
}

// reapOrphans makes the server a child subreaper: processes that leave a
// command's tree are reparented to it, not to an init that may never reap
// them, and killDomain reaps them. It is the whole server's setting, so it
// is made only once the landlock backend is the one in use: under bwrap,
// whose exiting sandboxes leave their init to be reparented, nothing would
// reap those.
func reapOrphans() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become child subreaper: %w", err)
	}
	return nil
}

func (l *landlockJail) Name() string                { return "landlock" }
func (l *landlockJail) Confined() bool              { return true }
func (l *landlockJail) Credentials() CredentialMode { return LinkCredentials }

func (l *landlockJail) Command(spec Spec) (*exec.Cmd, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if len(spec.Mounts) > 0 || len(spec.Hide) > 0 {
		return nil, errors.New("landlock cannot mount: credentials must be placed in the jail")
	}
	path := spec.Argv[0]
	if !strings.Contains(path, "/") {
		p, err := lookPath(path, envValue(spec.Env, "PATH"))
		if err != nil {
			return nil, err
		}
		path = p
	}
	cmd := &exec.Cmd{Path: path, Args: spec.Argv, Env: spec.Env, Dir: spec.Dir}
	// Started any other way than by Start, it would run unconfined: fail.
	cmd.Err = errNotStarted
	l.mu.Lock()
	if l.calls == nil {
		l.calls = map[*exec.Cmd]landlockCall{}
	}
	l.calls[cmd] = landlockCall{jail: spec.JailFile, path: spec.Jail, network: spec.Network}
	l.mu.Unlock()
	return cmd, nil
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

var errNotStarted = errors.New("a landlock command runs confined only when started by the backend's Start")

// guardScript waits for the end of its standard input, the read end of a
// pipe whose write end only the server holds, then kills every process it
// may signal: those of its call, and nothing else.
const guardScript = `read -r _; kill -s KILL -- -1`

// reapGrace bounds how long the thread waits for killed processes to go.
const reapGrace = 5 * time.Second

func (l *landlockJail) Start(cmd *exec.Cmd, launch Launcher) (Process, error) {
	l.mu.Lock()
	call, ok := l.calls[cmd]
	delete(l.calls, cmd)
	l.mu.Unlock()
	if !ok {
		return Process{}, errors.New("landlock: command not made by this backend")
	}
	if launch == nil {
		launch = FreshThread
	}
	started := make(chan error, 1)
	done := make(chan error, 1)
	var tree atomic.Pointer[[2]int64]
	tree.Store(&[2]int64{1, 0})
	launch(func() {
		g, err := l.confine(call)
		if err != nil {
			started <- err
			return
		}
		defer g.stop()
		cmd.Err = nil
		attr := cmd.SysProcAttr
		if attr == nil {
			attr = &syscall.SysProcAttr{}
		}
		// Its own session: no controlling terminal to inject into. The
		// session's id is also its process group's.
		attr.Setsid, attr.Setpgid, attr.Pgid = true, false, 0
		cmd.SysProcAttr = attr
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
		if err == nil {
			// Count the call's processes while the command runs.
			fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
			for {
				n, err := unix.Poll(fds, int(TreeInterval.Milliseconds()))
				if n > 0 || (err != nil && err != unix.EINTR) {
					break
				}
				procs, rss := domainTree(false)
				tree.Store(&[2]int64{int64(procs) + 1, rss}) // +1: the guard
			}
			unix.Close(pidfd)
		}
		err = cmd.Wait()
		killDomain()
		done <- err
	})
	if err := <-started; err != nil {
		return Process{}, err
	}
	return Process{
		Wait: func() error { return <-done },
		Tree: func() (int, int64) { t := tree.Load(); return int(t[0]), t[1] },
	}, nil
}

// TreeInterval is how often a backend that counts a command's processes
// itself (Process.Tree) looks.
const TreeInterval = 50 * time.Millisecond

// killDomain kills every process of the calling thread's Landlock domain,
// setsid and double-forked ones included, and waits up to reapGrace for
// them to be gone. Signals are scoped to the domain, so kill -1 reaches
// them and nothing else (the server's own threads are never signalled by
// it); which processes are in the domain is told by kill(pid, 0), which
// the scope also refuses outside it. Zombies the server was made parent
// of (it is a child subreaper) are reaped here.
func killDomain() {
	deadline := time.Now().Add(reapGrace)
	for {
		unix.Kill(-1, unix.SIGKILL)
		if procs, _ := domainTree(true); procs == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// domainTree counts the live processes of the calling thread's domain and
// their resident memory; with reap, it reaps those that are zombies and
// children of the server.
func domainTree(reap bool) (procs int, rss int64) {
	self := os.Getpid()
	d, err := os.Open("/proc")
	if err != nil {
		return 0, 0
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	page := int64(os.Getpagesize())
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self || unix.Kill(pid, 0) != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		f := bytes.Fields(b[i+2:])
		if len(f) > 1 && f[0][0] == 'Z' {
			if ppid, _ := strconv.Atoi(string(f[1])); reap && ppid == self {
				unix.Wait4(pid, nil, unix.WNOHANG|unix.WALL, nil)
			}
			continue
		}
		procs++
		if len(f) > 21 {
			n, _ := strconv.ParseInt(string(f[21]), 10, 64) // rss, in pages
			rss += n * page
		}
	}
	return procs, rss
}

// guard is a call's guard process and the write end of its pipe.
type guard struct {
	pid int
	w   *os.File
}

// stop ends the guard: it wakes, kills what is left of the call (nothing,
// normally) and exits; the thread that forked it reaps it.
func (g guard) stop() {
	g.w.Close()
	unix.Wait4(g.pid, nil, unix.WALL, nil)
}

// confine restricts the calling thread (and so all it forks from now
// on) and starts the call's guard.
func (l *landlockJail) confine(call landlockCall) (guard, error) {
	if l.root {
		if err := dropCapabilities(); err != nil {
			return guard{}, err
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return guard{}, fmt.Errorf("no_new_privs: %w", err)
	}
	if err := l.restrictFS(call); err != nil {
		return guard{}, err
	}
	filter := l.filters[0]
	if call.network {
		filter = l.filters[1]
	}
	if err := loadSeccomp(filter); err != nil {
		return guard{}, err
	}
	guardR, guardW, err := os.Pipe()
	if err != nil {
		return guard{}, err
	}
	gc := &exec.Cmd{
		Path: "/bin/sh", Args: []string{"jail-mcp-guard", "-c", guardScript},
		Env: []string{}, Dir: "/", Stdin: guardR,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	err = gc.Start()
	guardR.Close()
	if err != nil {
		guardW.Close()
		return guard{}, fmt.Errorf("start guard: %w", err)
	}
	g := guard{pid: gc.Process.Pid, w: guardW}
	gc.Process.Release() // reaped by g.stop
	// The command's own domain, nested in the guard's: it cannot signal
	// what is outside it, the guard included.
	if err := restrictScoped(); err != nil {
		g.stop()
		return guard{}, err
	}
	return g, nil
}

// restrictFS applies the filesystem, network and scope domain.
func (l *landlockJail) restrictFS(call landlockCall) error {
	attr := ll.RulesetAttr{
		HandledAccessFS: uint64(l.cfg.HandledAccessFS),
		Scoped:          uint64(l.cfg.Scoped),
	}
	if !call.network {
		attr.HandledAccessNet = uint64(l.cfg.HandledAccessNet)
	}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return fmt.Errorf("landlock ruleset: %w", err)
	}
	defer unix.Close(fd)
	all := attr.HandledAccessFS
	read := uint64(ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir)
	dev := all & uint64(ll.AccessFSReadFile|ll.AccessFSWriteFile|ll.AccessFSIoctlDev)
	add := func(f *os.File, access uint64) error {
		return ll.LandlockAddPathBeneathRule(fd, &ll.PathBeneathAttr{AllowedAccess: access, ParentFd: int(f.Fd())}, 0)
	}
	rootDir, err := os.OpenFile("/", unix.O_PATH, 0)
	if err != nil {
		return err
	}
	defer rootDir.Close()
	if err := add(rootDir, read); err != nil {
		return fmt.Errorf("landlock rule for /: %w", err)
	}
	jail := call.jail
	if jail == nil {
		j, err := os.OpenFile(call.path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY, 0)
		if err != nil {
			return fmt.Errorf("open jail: %w", err)
		}
		defer j.Close()
		jail = j
	}
	if err := add(jail, all); err != nil {
		return fmt.Errorf("landlock rule for the jail: %w", err)
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
			return fmt.Errorf("landlock rule for %s: %w", d, err)
		}
	}
	if err := ll.LandlockRestrictSelf(fd, 0); err != nil {
		return fmt.Errorf("landlock restrict: %w", err)
	}
	return nil
}

// restrictScoped nests a domain that only scopes signals and abstract
// unix sockets.
func restrictScoped() error {
	attr := ll.RulesetAttr{Scoped: ll.ScopeAbstractUnixSocket | ll.ScopeSignal}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return fmt.Errorf("landlock scope: %w", err)
	}
	defer unix.Close(fd)
	if err := ll.LandlockRestrictSelf(fd, 0); err != nil {
		return fmt.Errorf("landlock scope: %w", err)
	}
	return nil
}

// loadSeccomp loads a raw sock_filter program on the calling thread only.
func loadSeccomp(prog []byte) error {
	ins := make([]unix.SockFilter, len(prog)/8)
	for i := range ins {
		b := prog[8*i:]
		ins[i] = unix.SockFilter{
			Code: uint16(b[0]) | uint16(b[1])<<8, Jt: b[2], Jf: b[3],
			K: uint32(b[4]) | uint32(b[5])<<8 | uint32(b[6])<<16 | uint32(b[7])<<24,
		}
	}
	fprog := unix.SockFprog{Len: uint16(len(ins)), Filter: &ins[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("load seccomp filter: %w", err)
	}
	return nil
}

// dropCapabilities empties the calling thread's capability sets, its
// bounding set and its ambient set: uid 0 keeps its files but no power
// beyond them.
func dropCapabilities() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
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

func (l *landlockJail) Guarantees() Guarantees {
	g := guarantees(map[int]string{
		1: "Landlock does not cover changes of metadata: chmod, chown and utime of files the server's user owns outside the jail still work" + map[bool]string{true: " (as root, chmod and chown are denied by seccomp everywhere, in the jail too; utime is not)", false: ""}[l.root],
	})
	notes := map[int]string{
		2: "no unix sockets can be created and no unix datagram socket pairs (seccomp); netlink for routing only; SysV IPC, POSIX message queues and key rings denied (seccomp); host FIFOs denied by Landlock; signals, ptrace and abstract sockets scoped by Landlock; no capabilities, no new namespaces, no new privileges; no controlling terminal",
		3: "no pid namespace: a guard process in the call's Landlock domain and the server as child subreaper kill every process of the call, setsid and double-forked ones included, when it ends or the server dies",
		5: "every capability and the bounding set dropped; as root, chmod and chown are denied everywhere (root owns the host's files), so tools that set modes in the jail fail: run the server as a normal user, or use bwrap",
		7: "processes and memory exactly by cgroups where the server can create them, else by a watchdog every 50 ms; disk by a watchdog every 50 ms and after each call, from inotify; per-file size and core dumps by rlimit",
	}
	for i, p := range g.Kept {
		if n, ok := notes[p.ID]; ok {
			g.Kept[i].Note = n
		}
	}
	return g
}

// landlockABI reads the kernel's Landlock ABI version.
func landlockABI() (int, error) { return ll.LandlockGetABIVersion() }
