// Package jail owns the confinement backends: it turns a Spec (what to run,
// where it may write, which host paths it sees read-only) into a command that
// runs confined, and reports honestly when it cannot.
package jail

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
)

// ErrUnavailable reports that a backend cannot confine commands on this host.
// Errors returned by Open and by a backend's Command wrap it.
var ErrUnavailable = errors.New("jail unavailable")

// Backend runs commands confined to a jail.
type Backend interface {
	// Name is the contract name of the backend: bwrap, landlock,
	// sandbox-exec, none for the unconfined fallback, or the name of the
	// one asked for when none can confine here (Refusing).
	Name() string
	// Confined is false only for the unconfined fallback and Refusing.
	Confined() bool
	// Agents reports whether the backend runs each session's commands
	// through a session agent, started once per session and policy by
	// Runner: a long-lived process that bounds apply to as a whole.
	// Otherwise Runner is cheap and each command is started on its own.
	Agents() bool
	// Runner returns what runs commands under spec (its Argv unused): a
	// session agent started now, from a thread of launch, or a runner that
	// starts each command itself.
	Runner(spec Spec, launch Launcher) (Runner, error)
	// Credentials is how the backend shows host credentials in the jail.
	Credentials() CredentialMode
	// Guarantees lists the promises of docs/security.md this backend keeps and
	// those it does not.
	Guarantees() Guarantees
	// Egress is nil when the backend can hold a sandbox's network to a
	// proxy (Spec.Egress), else why it cannot: an allowlist is then
	// refused, never run with the whole network.
	Egress() error
}

// ErrNoEgress is wrapped by the Egress of a backend that cannot hold a
// sandbox to a proxy.
var ErrNoEgress = errors.New("this backend cannot hold a command's network to an allowlist")

// CredentialMode is how a backend shows host credentials in the jail.
type CredentialMode int

const (
	// BindCredentials: the backend shows Spec.Mounts and Spec.Hide.
	BindCredentials CredentialMode = iota
	// LinkCredentials: the caller places symlinks to the host paths in
	// the jail for the call; the backend denies writes through them.
	LinkCredentials
	// CopyCredentials: the caller places copies in the jail for the call
	// and removes them after.
	CopyCredentials
)

// Launcher runs fn on a locked OS thread that is never handed back to the
// Go runtime: the thread exits when fn returns. A caller may give one
// whose thread it prepared ahead (moved into the call's cgroups, which is
// slow), so that the work is off the call's path.
type Launcher func(fn func())

// FreshThread is the Launcher of a new locked thread. The thread is never
// the process's main thread: what a backend does to a launcher thread
// (a Landlock domain, a cgroup) would otherwise become the face the whole
// server shows to others, since signals and cgroup membership are judged
// by the thread group's leader; and Go never ends the main thread.
func FreshThread(fn func()) {
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with fn
		if isMainThread() {
			// Hold the main thread until fn runs elsewhere, so that the
			// new goroutine cannot be scheduled on it, then give it back.
			running := make(chan struct{})
			FreshThread(func() { close(running); fn() })
			<-running
			runtime.UnlockOSThread()
			return
		}
		fn()
	}()
}

// Mount is a host path shown at a place inside the jail.
type Mount struct {
	Source   string // host path
	Target   string // path inside the jail
	Writable bool
	// File, when set, is Source opened with O_PATH|O_NOFOLLOW by the
	// caller: the backend binds what it refers to, never a path a command
	// could have swapped since (docs/security.md, promise 4).
	File *os.File
}

// WritableDir is a directory of the project a command writes in place.
type WritableDir struct {
	Path string // canonical host path, inside the project
	// File, when set, is Path opened O_PATH|O_DIRECTORY without following
	// a link at any component: the backend binds it or grants it rights,
	// never a path that might lead elsewhere since.
	File *os.File
}

// MaxWritable bounds Spec.Writable: each is a descriptor the server
// passes a session agent with its configuration.
const MaxWritable = 16

// Spec is everything a backend needs to confine one command.
type Spec struct {
	Argv    []string // program and arguments; Argv[0] is looked up in Env's PATH
	Dir     string   // working directory, an absolute host path
	Env     []string // the complete environment, KEY=VALUE
	Jail    string   // the only host directory the command may write, absolute
	Network bool     // false cuts all network, loopback included
	// Egress, when set (with Network), holds the network to a proxy the
	// server runs: the sandbox reaches it and nothing else.
	Egress *Egress
	// JailFile is Jail opened with O_PATH|O_NOFOLLOW; bound by descriptor
	// when set.
	JailFile *os.File
	// Mounts are applied in order over the jail: host credentials shown
	// read-only at their places, and per-session copies of the state CLIs
	// rewrite shown writable at theirs. Hide lists directories of the jail
	// replaced, after the mounts, by an empty read-only tmpfs.
	Mounts []Mount
	Hide   []string
	// Writable are directories of the project that a command writes in
	// place (--writable): the operator's exception to the read-only
	// project, each bound writable over it (bwrap), given the jail's write
	// rights (Landlock), allowed by the profile (sandbox-exec).
	Writable []WritableDir
	// Visible lists canonical host paths the command must see even where
	// a backend hides host directories (bubblewrap's shadowed /tmp,
	// /var/tmp and /run): the project, so that a project kept under /tmp
	// still works. They are shown read-only; the jail inside stays
	// writable.
	Visible []string
	// Siblings, when set, is the directory holding the jail beside the
	// jails of other sessions (<project>/.agent-home): the command reads
	// nothing of it but its own jail (bwrap shows it empty but for the
	// jail; agents grant no read beneath it but the jail).
	Siblings string
	// Project is the project, read-only: a session agent reports the
	// writes the jail refused a command there (Exit.RefusedWrite).
	Project string
	// Unread are host files and directories a command reads nothing of,
	// wherever they are: the HTTP server's token file and the --deny-read
	// list, canonical; the last element may be a pattern (filepath.Match).
	// What exists when a sandbox starts is masked by mounts (bubblewrap:
	// a directory empty, a file unreadable); session agents' read views
	// refuse reads of all of it, made since too; sandbox-exec denies it
	// by rules. Visible paths below them stay readable.
	Unread []string
	// Jails, when set, is where this user's servers name their projects'
	// jails (a directory of symlinks to each project's .agent-home): a
	// session agent's read view hides each it names there, as it names
	// them when the view is made, but one that holds a shown path (the
	// session's own project's). For a backend without agents the server
	// puts those it names in Unread.
	Jails string
	// masks: how bubblewrap hides Unread, worked out when it starts.
	masks []Mask

	// CallPath is the PATH of the session's calls by default: a session
	// agent readies its read view for it before the first call (a PATH
	// entry the view hides is shown to the calls that have it).
	CallPath string

	// MaxMemory (--max-memory), when positive, bounds what the sandbox's
	// own shared memory may hold (bubblewrap's /dev/shm and System V
	// segments), which outlives calls: bubblewrap's /dev/shm is a tmpfs
	// of that size (read-only where bubblewrap cannot size one), and a
	// session agent starts no call while they hold more.
	MaxMemory int64
	// Place, when set, places each thread a session agent keeps ready for
	// a call before the call runs on it (Process.Placement); a backend
	// without agents ignores it.
	Place Placer

	// Overlay, when set, shows the project copy-on-write (--overlay):
	// writable to a command, every change in the session's layer. Only
	// a backend with session agents in sandboxes of their own (bwrap)
	// can; the others refuse the spec.
	Overlay *Overlay
}

// Overlay is the session's copy-on-write view of the project.
type Overlay struct {
	// Layer is the layer's directory (<jail>/.overlay), opened O_PATH by
	// the server and hidden from commands: upper/ holds the changes,
	// work/ the kernel's work directories, caches/ the layers of Caches.
	Layer *os.File
	// Caches are host caches shown read-only under a layer of the
	// session's own: a fresh session starts warm, and never writes the
	// host's cache nor shares one with another session.
	Caches []CacheMount
	// Gen is the number of the project's state when the agent starts
	// (Call.ViewGen; 0: none, a view per call): its armed spares enter a
	// view made at it, which the session's first call then fits.
	Gen uint64
	// mapRoot: the sandbox's user is root, whose mapping in the agent's
	// user namespace takes CAP_SETFCAP (bwrap.go).
	mapRoot bool
	// native: the layer's directories for bubblewrap's own overlay
	// (nativeoverlay.go), opened by the backend as the sandbox starts;
	// nil: the agent mounts the view.
	native *nativeLayer
}

// CacheMount is a host cache shown copy-on-write at a place in the jail.
type CacheMount struct {
	Name   string // the layer's name under caches/, [a-z0-9-]
	Lower  string // the host cache, canonical
	Target string // where the jail shows it, inside the jail
}

// ErrNoOverlay is a backend that cannot show the project copy-on-write.
var ErrNoOverlay = errors.New("--overlay needs bubblewrap with session agents (Landlock ABI 6)")

// ErrNestedUserns is a sandbox that gives its session agent no user
// namespace of its own, where it would mount the project view: bubblewrap
// run with --disable-userns, or an AppArmor profile that denies bwrap's
// children user namespaces (Ubuntu's bwrap-userns-restrict).
var ErrNestedUserns = errors.New("the sandbox refuses its session agent a user namespace of its own to mount the project view in")

// String prints the policy of s for logs and errors; environment values are
// left out because they may carry secrets.
func (s Spec) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "write=%s dir=%s network=%t", s.Jail, s.Dir, s.Network)
	if len(s.Writable) > 0 {
		fmt.Fprintf(&b, " writable=%s", strings.Join(s.WritablePaths(), ","))
	}
	for _, m := range s.Mounts {
		mode := "ro"
		if m.Writable {
			mode = "rw"
		}
		fmt.Fprintf(&b, " %s=%s", mode, m.Target)
	}
	names := make([]string, 0, len(s.Env))
	for _, kv := range s.Env {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	if s.Overlay != nil {
		fmt.Fprintf(&b, " overlay=%s", s.Project)
		for _, c := range s.Overlay.Caches {
			fmt.Fprintf(&b, " cache=%s", c.Target)
		}
	}
	fmt.Fprintf(&b, " env=[%s] argv=%q", strings.Join(names, " "), s.Argv)
	return b.String()
}

// WritablePaths are the paths of s.Writable.
func (s Spec) WritablePaths() []string {
	paths := make([]string, len(s.Writable))
	for i, w := range s.Writable {
		paths[i] = w.Path
	}
	return paths
}

func (s Spec) validate() error {
	switch {
	case len(s.Argv) == 0 || s.Argv[0] == "":
		return errors.New("empty argv")
	case !strings.HasPrefix(s.Jail, "/"):
		return fmt.Errorf("jail %q is not absolute", s.Jail)
	case !strings.HasPrefix(s.Dir, "/"):
		return fmt.Errorf("dir %q is not absolute", s.Dir)
	case len(s.Writable) > MaxWritable:
		return fmt.Errorf("%d writable directories, more than %d", len(s.Writable), MaxWritable)
	}
	for _, w := range s.Writable {
		if !strings.HasPrefix(w.Path, "/") {
			return fmt.Errorf("writable %q is not absolute", w.Path)
		}
	}
	return nil
}

// UnavailableError says why a backend cannot confine here and how to fix it.
type UnavailableError struct {
	Backend string
	Reason  string // what is missing, one line
	Hint    string // the command that fixes it, when there is one
}

func (e *UnavailableError) Error() string {
	msg := fmt.Sprintf("%s: %s", e.Backend, e.Reason)
	if e.Hint != "" {
		msg += " (fix: " + e.Hint + ")"
	}
	return msg
}

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Report is the outcome of probing one backend on this host.
type Report struct {
	Backend   string `json:"backend"`
	Available bool   `json:"available"`
	Path      string `json:"path,omitempty"`
	ABI       int    `json:"abi,omitempty"` // landlock: the kernel's ABI version
	Reason    string `json:"reason,omitempty"`
	Hint      string `json:"hint,omitempty"`
}

// MinLandlockABI is the oldest Landlock ABI the landlock backend accepts:
// ABI 6 (Linux 6.12) is the first that fences signals to processes
// outside the sandbox. Below it the backend refuses to run rather than
// drop rights silently.
const MinLandlockABI = 6

// Names lists the backends of the contract in the order auto tries them.
var Names = []string{"bwrap", "landlock", "sandbox-exec"}

// Egress is a sandbox's way out to the proxy that holds its network to an
// allowlist.
type Egress struct {
	// Serve serves the proxy on ln, the only way out: a listener on the
	// host's loopback (landlock), or the one the session agent opened on
	// the loopback of the sandbox's own network namespace (bwrap) before
	// any command ran there. A backend calls it once the sandbox's agent
	// is ready (Runner then returns no error); the caller closes ln when
	// it is done with the runner.
	Serve func(ln net.Listener)
}

// DescribeEgress says how b holds a sandbox to a proxy and what it cannot
// exclude then (a backend that can says so with an egressHow method), or,
// when it cannot hold one at all, why.
func DescribeEgress(b Backend) (how string, gaps []string) {
	if err := b.Egress(); err != nil {
		return "refused (" + err.Error() + ")", []string{err.Error() + ": every call with an allowlist is refused"}
	}
	if d, ok := b.(interface{ egressHow() (string, []string) }); ok {
		return d.egressHow()
	}
	return "", []string{}
}

// AgentSpares is how many threads an agent with a Placer keeps ready,
// which its Placer's cgroups hold beside the calls: a round of placing
// (the agent refills when half are used) takes about one RCU grace
// period, which back-to-back calls should not wait for.
const AgentSpares = 6
