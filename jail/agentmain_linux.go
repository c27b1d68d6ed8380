package jail

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A session agent is the server's own binary, run as "<binary> agent FD"
// with its end of the control socket at FD: under bwrap inside the
// session's sandbox, under landlock in the host, where it confines itself
// before it serves. It runs each command of its session in a Landlock
// domain nested in its own, so that the command can neither signal nor
// trace it, and kills everything of the call when the call ends.
//
// It starts in this package's init, not in main: package initialisation
// runs packages in the order of their import paths as soon as their own
// imports are done (the Go spec, since 1.21), and jail, which the server
// imports, comes before the packages that serve MCP, whose JSON-schema
// compiler takes longer to initialise than an agent needs to start.
const agentArg = "agent"

func init() {
	if len(os.Args) == 3 && os.Args[1] == agentArg {
		os.Exit(serveAgent(os.Args[2]))
	}
	if len(os.Args) == 4 && os.Args[1] == agentArg && os.Args[3] == agentNSArg {
		os.Exit(agentInNamespaces(os.Args[2]))
	}
}

// serveAgent is the agent's main.
func serveAgent(fdArg string) int {
	fd, err := strconv.Atoi(fdArg)
	if err == nil && fd > 2 {
		_, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	}
	if err != nil || fd <= 2 {
		fmt.Fprintln(os.Stderr, "jail-mcp agent: jail-mcp starts its agents itself; this is not a command")
		return 2
	}
	// Its name in ps and /proc, rather than the descriptor it was run by.
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&[]byte("jail-mcp-agent\x00")[0])), 0, 0, 0)
	// Nothing else its starter left open reaches a command. Marked
	// close-on-exec, not closed: the Go runtime may hold some already
	// (its poller's, once a package's init opened a file).
	unix.CloseRange(3, uint(fd-1), unix.CLOSE_RANGE_CLOEXEC)
	unix.CloseRange(uint(fd+1), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	f := os.NewFile(uintptr(fd), "control")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "jail-mcp agent:", err)
		return 2
	}
	a := &agent{conn: c.(*net.UnixConn), calls: map[uint64]*agentRun{}, spares: map[uint64]*spareThread{}, shm: -1}
	return a.serve()
}

// agent is the agent's side of the protocol.
type agent struct {
	conn *net.UnixConn
	wmu  sync.Mutex // one frame at a time

	mu    sync.Mutex
	calls map[uint64]*agentRun
	wg    sync.WaitGroup

	// Threads kept ready for calls (config's Spares), by their number.
	// Placed (config's Placed), the server moves each into the cgroups
	// of the call that will run on it before it sends that call, and
	// names it in the call's run; else the agent picks one.
	spareN    int
	placed    bool
	spares    map[uint64]*spareThread
	lastSpare uint64
	refilling bool // a refill is due shortly after the last call's end
	// callPath is the PATH of the session's calls by default, whose read
	// view armed spares enter ahead of a call.
	callPath string

	// view is what each call may read (nil: the fake agent of tests,
	// whose calls only scope), and views its last ruleset.
	view  *readView
	views viewCache
	// project is where each call's write watch reports refused writes
	// ("": no watch).
	project string
	// shm is the sandbox's own /dev/shm (bwrap), -1 for none: what it
	// and the sandbox's System V segments hold counts in every call's
	// memory, and over maxShared no call starts.
	shm       int
	maxShared int64
	// maxWatches bounds the inotify watches of a call (0: none).
	maxWatches int

	// ov is the project view (--overlay), which each call's thread
	// enters (overlay_linux.go); nil: none.
	ov *overlayState
}

// agentRun is one call in the agent: the eventfd that wakes its thread,
// to kill the call or to pass it the signals queued in sigs.
type agentRun struct {
	wake   int
	killed atomic.Bool
	// stopped, when set, says why the agent ended the call: an inode its
	// read view granted was moved into a denied path (viewguard_linux.go),
	// or it held more inotify watches than its share (inotify_linux.go).
	stopped atomic.Pointer[string]
	mu      sync.Mutex
	sigs    []unix.Signal
}

func (a *agent) send(m agentMsg, files ...*os.File) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	return writeFrame(a.conn, m, files...)
}

func (a *agent) serve() int {
	m, files, err := readFrame(a.conn, maxServerFrame, maxFrameFiles)
	if err != nil || m.T != msgConfig {
		closeFiles(files)
		return 2
	}
	if err := a.confine(m, files); err != nil {
		a.send(agentMsg{T: msgError, Err: err.Error()})
		return 1
	}
	closeFiles(files)
	var proxy []*os.File
	if m.Egress {
		f, err := openProxyListener()
		if err != nil {
			a.send(agentMsg{T: msgError, Err: err.Error()})
			return 1
		}
		proxy = append(proxy, f)
	}
	err = a.send(agentMsg{T: msgReady, Pid: os.Getpid()}, proxy...)
	closeFiles(proxy)
	if err != nil {
		return 1
	}
	a.spareN = min(max(m.Spares, 0), maxSpares)
	a.placed, a.callPath = m.Placed, m.CallPath
	a.refill()
	// The read view of a call of the session's default PATH, made now
	// rather than by the first call (a walk of the project's ancestors):
	// the cache then serves it, and a call that comes meanwhile waits.
	// Armed spares make it as they arm.
	if a.view != nil && a.spareN == 0 {
		env := []string{"PATH=" + m.CallPath}
		go func() {
			if fd, _, held, err := a.views.ruleset(*a.view, callShown(*a.view, env, nil)); err == nil {
				unix.Close(fd)
				held.release()
			}
		}()
	}
	for {
		m, files, err := readFrame(a.conn, maxServerFrame, maxFrameFiles)
		if err != nil {
			break // the server is gone: end every call
		}
		switch m.T {
		case msgRun:
			a.start(m, files)
		case msgKill:
			a.kill(m.ID)
			closeFiles(files)
		case msgSignal:
			a.signal(m.ID, unix.Signal(m.Signal))
			closeFiles(files)
		case msgView:
			closeFiles(files)
			if a.ov != nil {
				go a.renewView(m.ViewGen)
			}
		case msgStop:
			closeFiles(files)
			a.stop()
			return 0
		default:
			closeFiles(files)
		}
	}
	a.stop()
	return 0
}

// confine finishes the agent's confinement: under landlock, where it
// starts in the session's domain, a guard in that domain and a nested
// scoped domain for the agent itself, out of the guard's reach; under
// bwrap, whose sandbox already drops capabilities and loads the seccomp
// filter, the file-system layer that a read-only mount cannot give (no
// FIFO of the host opened for writing). The agent is then not dumpable, so that no command can
// trace it or open its /proc files, and a child subreaper, so that what a
// command leaves is its to reap.
func (a *agent) confine(m agentMsg, files []*os.File) error {
	if len(files) != 1+len(m.Writable) || m.ABI < MinLandlockABI {
		return errors.New("agent: a jail, its writable directories and Landlock ABI 6 are needed")
	}
	jail, writable := files[0], files[1:]
	for _, d := range files {
		if fi, err := d.Stat(); err != nil || !fi.IsDir() {
			return errors.New("agent: the jail or a writable directory is not a directory")
		}
	}
	switch m.Kind {
	case "landlock":
		// The thread that forked the agent confined it (no capabilities,
		// no new privileges, the session's domain, seccomp) and forked the
		// guard in that domain: the agent nests itself out of the guard's
		// reach.
		fd, err := scopeRuleset(files...)
		if err != nil {
			return err
		}
		if err := restrictProcess(fd); err != nil {
			return err
		}
	case "bwrap":
		// Pages there and in System V segments outlive the calls that
		// wrote them, and belong to no process: they count in each call,
		// under the project view as without it.
		var err error
		if a.shm, err = unix.Open("/dev/shm", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return fmt.Errorf("agent: open the sandbox's /dev/shm: %w", err)
		}
		a.maxShared = max(m.MaxShared, 0)
		if m.Overlay != nil && !m.Overlay.Native {
			// Each call's thread mounts its view, then enters this layer
			// (enterView): a thread of a Landlock domain cannot mount.
			o, err := newOverlayState(m.Project, m.Jail, m.Overlay.Siblings, jail, m.Overlay.Caches, m.ABI, m.Writable, writable)
			if err != nil {
				return err
			}
			// What no command reads in the project: each view masks it.
			for _, h := range m.Hidden {
				if Within(h, m.Project) && h != m.Project {
					o.unread = append(o.unread, h)
				}
			}
			// The project's number when the server started the agent:
			// the spares arm in a view the first call fits.
			o.gen = m.Overlay.Gen
			a.ov = o
			break
		}
		fd, err := fsRuleset(m.ABI, jail, writable, true, 0, nativeView(m)...)
		if err != nil {
			return err
		}
		if err := restrictProcess(fd); err != nil {
			return err
		}
	default:
		return fmt.Errorf("agent: unknown kind %q", m.Kind)
	}
	a.maxWatches = max(m.MaxWatches, 0)
	a.view = &readView{hidden: m.Hidden, shown: append(m.Shown, m.Writable...), jail: m.Jail, writable: m.Writable, registry: m.Jails}
	if m.Overlay != nil {
		a.view.opaque = m.Project
	}
	a.project = m.Project
	if m.Overlay != nil {
		// The project is writable in the view: no refused write there
		// to report.
		a.project = ""
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("not dumpable: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("child subreaper: %w", err)
	}
	return nil
}

// nativeView readies the agent of bubblewrap's own view (NativeOverlay):
// the layer's descriptors bubblewrap left open are closed, and the
// project and the caches at their host paths join what the agent's
// Landlock layer lets commands write (the sandbox's own directories);
// without the view, those directories only.
func nativeView(m agentMsg) []string {
	private := slices.Clone(bwrapPrivate)
	if m.Overlay == nil || !m.Overlay.Native {
		return private
	}
	for _, fd := range m.Overlay.Close {
		var st unix.Stat_t
		if fd > 2 && unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			unix.Close(fd)
		}
	}
	private = append(private, m.Project)
	for _, c := range m.Overlay.Caches {
		if c.Target == c.Lower {
			private = append(private, c.Target)
		}
	}
	return private
}

// guardScript waits for the end of its standard input, the read end of a
// pipe whose write end only the server holds, then kills every process it
// may signal: those of its session's agent and calls, and nothing else.
const guardScript = `read -r _; kill -s KILL -- -1`

// startGuard starts the guard of a landlock agent from the confined
// thread that then forks the agent, in the agent's domain.
func startGuard(pipe *os.File) error {
	gc := &exec.Cmd{
		Path: "/bin/sh", Args: []string{"jail-mcp-guard", "-c", guardScript},
		Env: []string{}, Dir: "/", Stdin: pipe,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := gc.Start(); err != nil {
		return fmt.Errorf("start guard: %w", err)
	}
	// Reaped by the server when it exits; it outlives the agent only to
	// kill what the agent left.
	go gc.Wait()
	return nil
}

// start runs one call on a thread of its own that enters a domain nested
// in the agent's, forks the command, counts its processes while it runs,
// and kills them all when it ends: a spare thread, armed or plain, when
// there is one (placed: the one the run names), else a new one.
func (a *agent) start(m agentMsg, files []*os.File) {
	if m.filesLost {
		closeFiles(files)
		a.send(agentMsg{T: msgFailed, ID: m.ID, Err: "agent: the call's standard streams did not arrive: " + unix.EMFILE.Error()})
		return
	}
	if len(files) != 3 || m.ID == 0 || len(m.Argv) == 0 {
		closeFiles(files)
		a.send(agentMsg{T: msgFailed, ID: m.ID, Err: "agent: malformed run"})
		return
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		closeFiles(files)
		a.send(agentMsg{T: msgFailed, ID: m.ID, Err: "agent: " + err.Error()})
		return
	}
	r := &agentRun{wake: efd}
	var sp *spareThread
	used := m.Spare
	a.mu.Lock()
	switch {
	case m.Spare != 0 && a.placed:
		sp = a.spares[m.Spare]
		delete(a.spares, m.Spare)
	case m.Spare == 0 && !a.placed:
		used, sp = a.takeSpare()
	}
	if m.Spare != 0 && sp == nil {
		a.mu.Unlock()
		unix.Close(efd)
		closeFiles(files)
		a.send(agentMsg{T: msgFailed, ID: m.ID, Err: "agent: no such spare thread"})
		return
	}
	if !a.placed {
		used = 0 // the server knows no spares
	}
	a.calls[m.ID] = r
	a.wg.Add(1)
	// Fewer than a quarter left: more now, whatever the call costs;
	// else after the calls (refillLater).
	low := 4*len(a.spares) < a.spareN
	a.mu.Unlock()
	if sp == nil {
		a.onNewThread(m, files, r)
	} else {
		sp.run <- func(av *armedView) { a.onThread(m, files, r, used, av) }
	}
	if low {
		a.refill()
	}
}

// onThread runs call m on the calling thread, which entered av ahead of
// it (nil: nothing yet), as spare used, and ends it; or, when av does
// not fit the call, hands the call on (misfit) and returns, which ends
// the thread.
func (a *agent) onThread(m agentMsg, files []*os.File, r *agentRun, used uint64, av *armedView) {
	out, misfit := a.run(m, files, r, av, used)
	if misfit {
		a.misfit(m, files, r, used)
		return
	}
	if out.T == msgFailed {
		out.Used = used
	}
	a.send(out)
	a.done(m.ID, r)
	a.refillLater()
}

// onNewThread runs call m on a thread of its own, made now (an agent
// whose spares are not placed: the server knows no spare it ran on).
func (a *agent) onNewThread(m agentMsg, files []*os.File, r *agentRun) {
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the call
		defer a.threadEnd()
		a.onThread(m, files, r, 0, nil)
	}()
}

// done forgets call id, whose thread is over. Its eventfd is closed
// under a.mu, as every write to it is made (wakeUp): a number closed
// between a lookup and a write could name another file by then.
func (a *agent) done(id uint64, r *agentRun) {
	a.mu.Lock()
	delete(a.calls, id)
	unix.Close(r.wake)
	a.mu.Unlock()
	a.wg.Done()
}

// wakeUp wakes the thread of call r; the caller holds a.mu, and r is in
// a.calls.
func (r *agentRun) wakeUp() {
	unix.Write(r.wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
}

// misfit runs call m, which the read view that spare from armed did not
// fit (a PATH that shows other directories, a terminal, a directory of
// the view changed since), on a thread that enters the call's own: a new
// one, or placed, the run's plain Alt. Without an Alt nothing runs, and
// the server runs the call again on a plain spare.
func (a *agent) misfit(m agentMsg, files []*os.File, r *agentRun, from uint64) {
	if !a.placed {
		a.onNewThread(m, files, r)
		return
	}
	var alt *spareThread
	a.mu.Lock()
	if m.Alt != 0 && m.Alt != from {
		alt = a.spares[m.Alt]
		delete(a.spares, m.Alt)
	}
	a.mu.Unlock()
	if alt == nil {
		closeFiles(files)
		a.send(agentMsg{T: msgFailed, ID: m.ID, Respare: true, Err: "agent: no spare thread fits the call"})
		a.done(m.ID, r)
		a.refill()
		return
	}
	alt.run <- func(av *armedView) { a.onThread(m, files, r, m.Alt, av) }
}

// maxSpares bounds the threads an agent keeps ready, whatever it is told.
const maxSpares = 16

// plainSpares is how many of its spares a placed agent keeps plain, for
// the calls that an armed one does not fit.
const plainSpares = 2

// refillDelay is how long after a call's end an agent makes its new
// spares: arming one takes a fraction of a millisecond of a processor,
// which the server's and the client's handling of the call's result
// should not wait for.
const refillDelay = 2 * time.Millisecond

// spareThread is a thread kept ready for a call, armed or plain: it runs
// the call's function with what it entered ahead (nil: nothing).
type spareThread struct {
	run   chan func(*armedView)
	armed bool
}

// armedView is what an armed spare entered ahead of a call: the read
// view of a call that shows extra (key), made from the directories
// stamped, and the call's write watch (nil: unwatched).
type armedView struct {
	key    string
	stamps []dirStamp
	watch  *writeWatch
	view   *view       // the project view it entered (--overlay), or nil
	held   *heldGrants // what the read view granted by rules of its own
	// spoiled: arming failed part way (the thread may have entered a
	// view's mount namespace and dropped its capabilities, which a
	// second entry then fails on with EPERM): it fits no call.
	spoiled bool
}

// spoiledView is what arm returns when it could not arm its thread.
var spoiledView = &armedView{spoiled: true}

// fits reports whether av is the read view of a call that shows extra,
// as it would be made now.
func (av *armedView) fits(extra []string) bool {
	return !av.spoiled && av.key == viewKey(extra) && fresh(av.stamps)
}

// drop lets go of what av holds, on a thread that will not run a call.
func (av *armedView) drop() {
	if av == nil {
		return
	}
	if av.watch != nil {
		av.watch.end()
	}
	av.held.release()
}

// arm enters, on the calling spare thread, the read view of a call of
// the session's default PATH, and loads the call's write watch: a call
// that this view fits then only forks. nil: nothing entered; spoiledView:
// arming failed (out of descriptors, say), and the thread runs no call.
func (a *agent) arm() *armedView {
	if a.view == nil {
		return nil
	}
	extra := callShown(*a.view, []string{"PATH=" + a.callPath}, nil)
	var stamps []dirStamp
	var v *view
	var held *heldGrants
	if a.ov != nil {
		var err error
		if v, _, err = a.ov.current(a.ov.known(), false); err != nil {
			return spoiledView
		}
		if stamps, held, err = a.enterView(v, extra); err != nil {
			return spoiledView
		}
	} else {
		fd, st, h, err := a.views.ruleset(*a.view, extra)
		if err != nil {
			return spoiledView
		}
		if restrictThread(fd) != nil {
			h.release()
			return spoiledView
		}
		stamps, held = st, h
	}
	av := &armedView{key: viewKey(extra), stamps: stamps, view: v, held: held}
	if a.project != "" {
		// A hint, as for a plain call's.
		av.watch, _ = startWriteWatch(a.project, a.view.jail, a.view.writable...)
	}
	return av
}

// takeSpare takes a spare of an agent whose spares are its own (not
// placed), armed ones first; 0 and nil when none is left. Callers hold mu.
func (a *agent) takeSpare() (uint64, *spareThread) {
	var id uint64
	for i, sp := range a.spares {
		best := a.spares[id] // nil while id is 0
		if best == nil || sp.armed && !best.armed || sp.armed == best.armed && i < id {
			id = i
		}
	}
	sp := a.spares[id]
	delete(a.spares, id)
	return id, sp
}

// refillLater refills shortly, once the calls that end now are handled.
func (a *agent) refillLater() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refilling || a.spareN == 0 {
		return
	}
	a.refilling = true
	time.AfterFunc(refillDelay, a.refill)
}

// refill makes new spare threads once fewer than half of spareN are left
// (or, placed, no plain one), as many as are missing at once: the server
// moves them into cgroups in one round, where the moves after the first
// are cheap.
func (a *agent) refill() {
	if a.ov != nil {
		a.ov.reap()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refilling = false
	if a.spareN == 0 {
		return
	}
	wantPlain := 0
	if a.placed {
		wantPlain = min(plainSpares, a.spareN-1)
	}
	plain := 0
	for _, sp := range a.spares {
		if !sp.armed {
			plain++
		}
	}
	if 2*len(a.spares) >= a.spareN && plain >= min(wantPlain, 1) {
		return
	}
	for armed := len(a.spares) - plain; armed < a.spareN-wantPlain; armed++ {
		a.newSpare(a.view != nil)
	}
	for ; plain < wantPlain; plain++ {
		a.newSpare(false)
	}
}

// newSpare makes one spare thread, armed or plain. Callers hold mu.
func (a *agent) newSpare(armed bool) {
	a.lastSpare++
	id, sp := a.lastSpare, &spareThread{run: make(chan func(*armedView), 1), armed: armed}
	a.spares[id] = sp
	// A fresh thread, never the main one: the server moves it alone into
	// a call's cgroups, and cgroup v1 judges a process by its leader.
	FreshThread(func() {
		defer a.threadEnd()
		if a.placed {
			if err := a.send(agentMsg{T: msgSpare, ID: id, Pid: unix.Gettid(), Armed: armed}); err != nil {
				return
			}
		}
		var av *armedView
		if armed {
			av = a.arm()
		}
		if fn, ok := <-sp.run; ok {
			fn(av)
			return
		}
		av.drop()
	})
}

// callDomain is what a call's thread entered: the view the call runs in
// (nil without the view), counted there (busy) until everything the call
// ran is gone (finish); whether that view shows an older state of the
// project than the call asked for, as another call runs in it (behind);
// the call's write watch, and what its read view granted, held.
type callDomain struct {
	view   *view
	behind bool
	watch  *writeWatch
	held   *heldGrants
}

// enter enters the calling thread, armed with nothing, into call m's
// domain: the view and its read view of a call that shows extra, or that
// read view alone, or the agent's scope alone; and starts the call's
// write watch. On an error, what it entered is in d still, for the
// caller to end.
func (a *agent) enter(m agentMsg, extra []string) (d callDomain, err error) {
	var fd int
	switch {
	case a.ov != nil:
		if d.view, d.behind, err = a.ov.current(m.ViewGen, true); err == nil {
			_, d.held, err = a.enterView(d.view, extra)
		}
	case a.view != nil:
		fd, _, d.held, err = a.views.ruleset(*a.view, extra)
	default:
		fd, err = scopeRuleset(nil)
	}
	if err == nil && a.ov == nil {
		err = restrictThread(fd)
	}
	if err != nil {
		return d, err
	}
	if a.project != "" && a.view != nil {
		// A hint, not a bound: a kernel without seccomp notifications,
		// or a listener already in the chain, leaves the call unwatched.
		d.watch, _ = startWriteWatch(a.project, a.view.jail, a.view.writable...)
	}
	return d, nil
}

// run is a call's thread, which entered av ahead of the call (nil:
// nothing yet) and is spare used: it returns the message that ends the
// call, or misfit, having touched nothing, when av does not fit the call.
func (a *agent) run(m agentMsg, files []*os.File, r *agentRun, av *armedView, used uint64) (out agentMsg, misfit bool) {
	var extra []string
	if a.view != nil {
		var tty *os.File
		if m.TTY {
			tty = files[0]
		}
		extra = callShown(*a.view, m.Env, tty)
	}
	var d callDomain
	if av != nil {
		ok := av.fits(extra)
		if ok && a.ov != nil {
			ok, d.behind = a.ov.join(av.view, m.ViewGen)
			d.view = av.view
		}
		if !ok {
			av.drop()
			return agentMsg{}, true
		}
		d.watch, d.held = av.watch, av.held
	}
	defer closeFiles(files)
	var err error
	if av == nil {
		d, err = a.enter(m, extra)
	}
	defer func() {
		// The watch of a call that did not start its command; the
		// grants; and the view, once everything the call ran is gone.
		if d.watch != nil {
			d.watch.end()
		}
		d.held.release()
		if d.view != nil && a.ov.finish(d.view) {
			go a.readyView(a.ov.known())
		}
	}()
	if err != nil {
		return agentMsg{T: msgFailed, ID: m.ID, Err: err.Error()}, false
	}
	if a.shm >= 0 && a.maxShared > 0 {
		if held := sandboxShared(a.shm); held > a.maxShared {
			return agentMsg{T: msgFailed, ID: m.ID, Err: fmt.Sprintf("shared memory holds %d bytes", held), Shared: held}, false
		}
	}
	path := m.Argv[0]
	if !strings.Contains(path, "/") {
		p, err := lookPath(path, envValue(m.Env, "PATH"))
		if err != nil {
			return agentMsg{T: msgFailed, ID: m.ID, Err: err.Error(), NotFound: true}, false
		}
		path = p
	}
	cmd := &exec.Cmd{
		Path: path, Args: m.Argv, Env: m.Env, Dir: m.Dir,
		Stdin: files[0], Stdout: files[1], Stderr: files[2],
		// Its own session: no controlling terminal to inject into, but
		// the call's own terminal (fd 0) when it runs on one.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Setctty: m.TTY, Ctty: 0},
	}
	if err := cmd.Start(); err != nil {
		notFound := errors.Is(err, os.ErrNotExist)
		f := agentMsg{T: msgFailed, ID: m.ID, Err: err.Error(), NotFound: notFound}
		if errors.Is(err, syscall.ENOMEM) {
			// The fork or exec was refused at the memory bound of the
			// agent's cgroups, which what the sandbox's shared memory
			// holds counts against.
			f.NoMemory = true
			if a.shm >= 0 {
				f.Shared = sandboxShared(a.shm)
			}
		}
		return f, false
	}
	closeFiles(files)
	files = nil
	a.send(agentMsg{T: msgStarted, ID: m.ID, Pid: cmd.Process.Pid, Used: used})
	stopGuard := a.watchCall(m.ID, r, d.held.guard())
	a.follow(m.ID, cmd.Process.Pid, r, d.watch)
	stopGuard() // before the kills below, which are not the guard's
	// The command first, so that it is reaped here (with its status) and
	// not among the zombies killDomain reaps; then whatever it left.
	unix.Kill(cmd.Process.Pid, unix.SIGKILL)
	cmd.Wait()
	killDomain()
	out = agentMsg{T: msgExited, ID: m.ID, Code: -1}
	if d.behind {
		out.Behind = d.view.made.UnixNano()
	}
	if why := r.stopped.Load(); why != nil {
		out.Stopped = *why
	}
	if d.watch != nil {
		out.Refused, out.RefusedN = d.watch.end()
		d.watch = nil
	}
	if st := cmd.ProcessState; st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			out.Signal = int(ws.Signal())
		} else {
			out.Code = st.ExitCode()
		}
	}
	return out, false
}

// follow watches call id's command (pid) until it exits or the call is
// killed: it passes the call's signals on, lets its write watch look at
// the writes that wait for it, and counts its tree every TreeInterval,
// ending the call over its share of inotify watches.
func (a *agent) follow(id uint64, pid int, r *agentRun, watch *writeWatch) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(pidfd)
	memfds := MemfdScan{WatchBound: a.maxWatches}
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}, {Fd: int32(r.wake), Events: unix.POLLIN}}
	if watch != nil {
		fds = append(fds, unix.PollFd{Fd: int32(watch.listener), Events: unix.POLLIN})
	}
	// The count is due every TreeInterval, whatever else comes: a
	// command that floods the watch with writes, or the server with
	// signals, must not keep its tree from being counted.
	next := time.Now().Add(TreeInterval)
	for {
		n, err := unix.Poll(fds, max(int(time.Until(next).Milliseconds()), 0))
		if err != nil && err != unix.EINTR {
			break
		}
		if n > 0 && len(fds) > 2 && fds[2].Revents != 0 {
			// Writes the watch looks at, which wait for it: a bounded
			// number a round.
			watch.pending(watchRound)
			fds[2].Revents = 0
		}
		if n > 0 && fds[1].Revents&unix.POLLIN != 0 && !r.killed.Load() {
			// Signals for the call: every process of its domain that
			// this thread may signal, which is the call's and nothing
			// else (the agent itself is the caller).
			var b [8]byte
			unix.Read(r.wake, b[:])
			r.mu.Lock()
			sigs := r.sigs
			r.sigs = nil
			r.mu.Unlock()
			for _, sig := range sigs {
				unix.Kill(-1, sig)
			}
			fds[1].Revents = 0
		}
		if n > 0 && (fds[0].Revents != 0 || fds[1].Revents != 0) {
			// The command exited, or the call is killed.
			break
		}
		if time.Now().Before(next) {
			continue
		}
		_, c := domainCount(false, &memfds)
		if a.shm >= 0 {
			c.Shared = sandboxShared(a.shm)
			c.Memory += c.Shared
		}
		a.send(agentMsg{T: msgTree, ID: id, Procs: c.Tasks, RSS: c.Memory, Shared: c.Shared})
		if why := overWatches(memfds.Watches(), a.maxWatches); why != "" {
			r.stopped.CompareAndSwap(nil, &why)
			break
		}
		next = time.Now().Add(TreeInterval)
	}
}

// kill wakes a call's thread to kill it.
func (a *agent) kill(id uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r := a.calls[id]; r != nil {
		r.killed.Store(true)
		r.wakeUp()
	}
}

// signal wakes a call's thread to send sig to every process of the call.
func (a *agent) signal(id uint64, sig unix.Signal) {
	if sig <= 0 || sig > 64 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.calls[id]
	if r == nil {
		return
	}
	r.mu.Lock()
	if len(r.sigs) < 64 {
		r.sigs = append(r.sigs, sig)
	}
	r.mu.Unlock()
	r.wakeUp()
}

// stop kills every call and waits, a bounded time, for them to end.
func (a *agent) stop() {
	a.mu.Lock()
	for id, sp := range a.spares {
		close(sp.run)
		delete(a.spares, id)
	}
	a.spareN = 0
	for _, r := range a.calls {
		r.killed.Store(true)
		r.wakeUp()
	}
	a.mu.Unlock()
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(reapGrace + time.Second):
	}
}

// openProxyListener opens the listener of an allowlist's proxy on the
// loopback of the sandbox's own network namespace (bwrap), where nothing
// else leads out, for the server to serve: it goes with ready, before any
// command runs here, and the agent keeps no copy of it.
func openProxyListener() (*os.File, error) {
	ln, err := listenProxy()
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	defer ln.Close()
	return ln.File()
}
