package jail

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// landlockJail confines with the kernel's Landlock LSM, needing neither
// user namespaces nor any program installed. Each session's commands run
// in a session agent: the server's own binary, which confines itself in
// the host before it serves:
//
//   - a thread of the server that dies right after (a fresh one, or a
//     launcher in the agent's cgroups) drops every capability (a root
//     server) and sets no new privileges; a seccomp filter denies what
//     Landlock cannot see (unix sockets, SysV IPC, key rings, new
//     namespaces, with network off every socket but routing netlink, for
//     root chmod and chown); a Landlock domain makes the whole filesystem
//     read-only but the jail and a few devices, denies TCP with network
//     off, and scopes abstract sockets and signals;
//   - that thread forks a guard in the domain, which waits for the end of
//     a pipe only the server holds: when the server dies, or ends the
//     agent, the guard kills every process of the domain (kill -1 reaches
//     only it); then it forks the agent and exits;
//   - the agent enters a nested scoped domain, out of the guard's reach,
//     and forks each command from a thread of its own in a domain nested
//     once more: the command can signal and trace neither the guard nor
//     the agent's other threads, and that thread kills every process of
//     its call when it ends.
//
// No living thread of the server is ever in a domain: the threads that
// confine themselves to fork an agent end at once.
type landlockJail struct {
	abi  int
	root bool        // the server runs as uid 0
	exe  *selfBinary // the server's own binary, which agents run
}

func newLandlock(abi int) (*landlockJail, error) {
	exe, err := selfExe()
	if err != nil {
		return nil, err
	}
	for _, network := range []bool{false, true} {
		if _, err := buildSeccomp(runtime.GOARCH, landlockPolicy(network, false, os.Geteuid() == 0)); err != nil {
			return nil, err
		}
	}
	return &landlockJail{abi: abi, root: os.Geteuid() == 0, exe: exe}, nil
}

// selfExe opens the binary the server runs, so that its agents run the
// very same one even when the file at its path is replaced meanwhile (a
// new go install): an agent of another version would not speak the same
// protocol, and under landlock it runs before it is confined.
func selfExe() (*selfBinary, error) {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("open the server's own binary: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("open the server's own binary: %w", err)
	}
	return &selfBinary{f: f, dev: st.Dev, ino: st.Ino}, nil
}

// selfBinary is the server's binary, open, and what it was when opened.
type selfBinary struct {
	f        *os.File
	dev, ino uint64
}

// file returns the open binary for an agent's start, once it checked that
// its descriptor still refers to it: a descriptor closed by mistake
// elsewhere in the server, and its number taken by another file since,
// would otherwise fail the start with a bare "permission denied", or run
// what is not the server.
func (b *selfBinary) file() (*os.File, error) {
	var st unix.Stat_t
	err := unix.Fstat(int(b.f.Fd()), &st)
	if err == nil && st.Dev == b.dev && st.Ino == b.ino {
		return b.f, nil
	}
	what, lerr := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", b.f.Fd()))
	if lerr != nil {
		what = lerr.Error()
	}
	return nil, fmt.Errorf("the server's own binary, open as descriptor %d, is not any more (now %s): a bug of jail-mcp, please report it", b.f.Fd(), what)
}

func (l *landlockJail) Name() string                { return "landlock" }
func (l *landlockJail) Confined() bool              { return true }
func (l *landlockJail) Credentials() CredentialMode { return LinkCredentials }
func (l *landlockJail) Agents() bool                { return true }

func (l *landlockJail) Runner(spec Spec, launch Launcher) (Runner, error) {
	if spec.Overlay != nil {
		return nil, ErrNoOverlay
	}
	if len(spec.Mounts) > 0 || len(spec.Hide) > 0 {
		return nil, errors.New("landlock cannot mount: credentials must be placed in the jail")
	}
	jail := spec.JailFile
	if jail == nil {
		j, err := os.OpenFile(spec.Jail, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY, 0)
		if err != nil {
			return nil, fmt.Errorf("open jail: %w", err)
		}
		defer j.Close()
		jail = j
	}
	writable, err := writableFiles(spec)
	if err != nil {
		return nil, err
	}
	exe, err := l.exe.file()
	if err != nil {
		return nil, err
	}
	guardR, guardW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	server, ctl, err := socketPair()
	if err != nil {
		guardR.Close()
		guardW.Close()
		return nil, err
	}
	// No parent-death signal: the thread that forks the agent dies at
	// once. The agent ends its calls and exits when the server's end of
	// the control socket closes, and the guard kills what is left when
	// the server's end of its pipe does, however the server ends.
	// The binary goes as the agent's descriptor 4, which its start marks
	// close-on-exec: the command held by cmd until the exec, numbered in
	// the child by the fork itself.
	cmd := &exec.Cmd{
		Path: "/proc/self/fd/4", Args: []string{"jail-mcp", agentArg, "3"},
		Env: agentEnv, Dir: "/", ExtraFiles: []*os.File{ctl, exe},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	kill := func(cmd *exec.Cmd) {
		// The guard kills every process of the agent's domain.
		guardW.Close()
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
	}
	filter, err := buildSeccomp(runtime.GOARCH, landlockPolicy(spec.Network, spec.Egress != nil, l.root))
	if err != nil {
		return nil, err
	}
	// The proxy of an allowlist listens on the host's loopback, the one
	// port the session's domain may connect to.
	var proxy *net.TCPListener
	proxyPort := 0
	if spec.Egress != nil {
		if proxy, err = listenProxy(); err != nil {
			return nil, err
		}
		proxyPort = proxy.Addr().(*net.TCPAddr).Port
	}
	// The session's domain is entered by the thread that forks the agent,
	// which dies right after, before any command of the agent exists: so
	// that every thread of the agent, and the guard, are in one domain.
	// Landlock before ABI 8 puts each thread of a running process that
	// restricts itself in a domain of its own, out of the guard's reach.
	confine := func() error {
		if l.root {
			if err := dropCapabilitiesThread(); err != nil {
				return err
			}
		}
		fd, err := fsRuleset(l.abi, jail, writable, spec.Network, proxyPort)
		if err != nil {
			return err
		}
		if err := restrictThread(fd); err != nil {
			return err
		}
		if err := loadSeccompThread(filter); err != nil {
			return err
		}
		// The guard, forked here in the session's domain, execs while the
		// agent starts.
		return startGuard(guardR)
	}
	cfg := agentMsg{T: msgConfig, Kind: "landlock", Jail: spec.Jail, Writable: spec.WritablePaths(), Network: spec.Network, ABI: l.abi, Root: l.root, MaxWatches: CallWatchBound(),
		Project: spec.Project, CallPath: spec.CallPath, Jails: spec.Jails, Hidden: viewHidden("landlock", spec.Siblings, spec.Unread...), Shown: viewShown("landlock", spec.Jail, append(slices.Clone(spec.Visible), siblingsShown(spec.Siblings)...))}
	a, err := startAgent(agentStart{cmd: cmd, ctl: ctl, server: server, kill: kill, confine: confine, place: spec.Place}, launch, cfg, append([]*os.File{jail}, writable...))
	guardR.Close()
	if err != nil {
		guardW.Close()
		if proxy != nil {
			proxy.Close()
		}
		return nil, err
	}
	if proxy != nil {
		spec.Egress.Serve(proxy)
	}
	return a, nil
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

func (l *landlockJail) Guarantees() Guarantees {
	notKept := map[int]string{
		9: "in part: another session's files and job outputs are unreadable (Landlock read view) but their names and listings are not hidden (Landlock cannot deny a listing below a directory it lets you list), and with no pid namespace the command lines of every process of the host, other sessions' commands included, are readable (/proc/PID/cmdline); what needs ptrace rights (environ, memory, descriptors) is refused. Use bwrap to keep sessions apart",
		1: "Landlock does not cover changes of metadata: chmod, chown and utime of files the server's user owns outside the jail still work" + map[bool]string{true: " (as root, chmod and chown are denied by seccomp everywhere, in the jail too; utime is not)", false: ""}[l.root],
	}
	how := map[int]string{
		2: "no unix sockets can be created and no unix datagram socket pairs (seccomp); netlink for routing only; SysV IPC, POSIX message queues and key rings denied (seccomp); host FIFOs denied by Landlock; signals, ptrace and abstract sockets scoped by Landlock; the server is in no domain and not dumpable; no capabilities, no new namespaces, no new privileges; no controlling terminal; internet sockets and routing netlink only (no AF_VSOCK, AF_PACKET...); limits, priorities, scheduling and affinity of the caller only (seccomp); no leases or directory notifications; of the file systems' ioctls only those that read (no inode flags, encryption policies, fs-verity or btrfs subvolumes); no SO_REUSEPORT; under an allowlist no bind, no listen, no TCP Fast Open. reads of other sessions' jails, /tmp, /var/tmp, /run and /dev (but the devices a shell needs) refused. Known gaps: flock and read locks on host files a command can read; " + fifoReadGap + "; the host's /proc and /sys read as your user reads them (other processes' command lines; what needs ptrace rights is refused). docs/security.md lists the host's surface class by class",
		6: "the environment is an allowlist; reads of the --deny-read list refused (EACCES) by each call's Landlock read view, paths made later included (their names stay listable)",
		3: "no pid namespace: the session agent kills every process of a call's Landlock domain when it ends, setsid and double-forked ones included, and a guard process kills every process of the session's domain when the server dies",
		5: "every capability and the bounding set dropped; as root, chmod and chown are denied everywhere (root owns the host's files), so tools that set modes in the jail fail: run the server as a normal user, or use bwrap",
		7: "processes (threads count as processes) and memory exactly by cgroups where the server can create them, else by a watchdog every 50 ms, which counts every thread and, as memory, resident sets and open memfds (/dev/shm is the host's, read-only; no System V IPC); it does not see shared memory a process keeps only through a partly unmapped mapping, nor the memfds of a process that is not dumpable (freed when the call ends); disk by a watchdog every 50 ms and after each call, from inotify; per-file size and core dumps by rlimit",
	}
	return guarantees(notKept, how)
}

// unreadHow: only each call's read view, which cannot hide names, and
// no pid namespace.
func (l *landlockJail) unreadHow() (string, []string) {
	return "refused (EACCES) by each call's Landlock read view, paths made later included; other sessions' jails: their files unreadable", []string{
		"names stay listable: a denied directory's entries, and other sessions' jails and what they hold (Landlock cannot deny a listing below a directory it lets you list)",
		"other processes of the host, other sessions' commands included, show their command lines (/proc/PID/cmdline: no pid namespace); their environments, memory and descriptors are refused",
	}
}

// landlockABI reads the kernel's Landlock ABI version.
func landlockABI() (int, error) { return ll.LandlockGetABIVersion() }

// Egress: Landlock bounds TCP connects to the proxy's port (ABI 4 and
// later; the backend needs 6) and seccomp denies every other socket.
func (l *landlockJail) Egress() error { return nil }

// egressHow: how Landlock holds an allowlist, and what it cannot exclude.
func (l *landlockJail) egressHow() (string, []string) {
	return "held: Landlock allows TCP connects to the proxy's port only, seccomp every socket but TCP", []string{"Landlock bounds TCP connects by port, not address: a command that ignores the proxy variables can still open TCP connections to any host on the port number of its session's proxy (a random loopback port); UDP and every other socket are denied"}
}
