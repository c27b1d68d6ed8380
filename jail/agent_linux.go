package jail

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// agentClient is the server's side of a session agent: one confined
// process per session and policy, which runs the session's commands.
//
// The agent is not trusted once a command has run in it: what it sends is
// bounded (maxAgentFrame) and checked (known call ids, sane numbers, the
// right order), and anything else ends it. Whatever it does, it costs only
// its session: the server enforces every deadline from outside, and an
// agent that does not end a call it was told to kill, or that misbehaves,
// is killed whole with its sandbox (kill).
type agentClient struct {
	conn *net.UnixConn
	kill func() // kills the agent and everything of its calls
	pid  int    // the agent's process (bwrap's, under bwrap), in the host

	wmu sync.Mutex // one frame at a time

	mu     sync.Mutex
	calls  map[uint64]*agentCall
	nextID uint64
	err    error         // why it ended, once it did
	done   chan struct{} // closed once it ended

	stderr *tailBuffer // the agent's stderr, for why it ended

	// With a Placer, every call runs on a thread the agent reported as
	// spare and the server placed; guarded by mu.
	place      Placer
	agentPid   int                    // the agent process in the host, found at ready
	threads    *threadIDs             // the agent's threads' host ids; the placer's own
	spares     map[uint64]*agentSpare // reported and not yet used, placed or not
	placed     []*agentSpare          // placed, in order, for the next calls
	spareReady chan struct{}          // closed, and replaced, when a spare is placed
	toPlace    chan *agentSpare
}

// agentSpare is a thread the agent keeps ready for a call: armed (in the
// read view of a call of the session's default PATH) or plain.
type agentSpare struct {
	id        uint64
	tid       int // in the agent's pid namespace
	armed     bool
	placement Placement
}

// agentCall is one call of an agent, as the server sees it.
type agentCall struct {
	started chan agentMsg // started or failed, once
	ended   chan struct{} // closed when exit is set
	exit    agentMsg
	tree    atomic.Pointer[Count]
	state   int // 0 starting, 1 running, 2 ended; guarded by the client's mu
}

// agentEnv is an agent's environment. One processor for Go code is
// enough for an agent, which waits in system calls, and fewer threads at
// start make its confinement of every thread cheaper.
var agentEnv = []string{"GOMAXPROCS=1"}

// Deadlines the server holds an agent to (variables for the tests of
// agents that break them).
var (
	agentStartTimeout = 10 * time.Second // from spawn to ready
	callStartTimeout  = 10 * time.Second // from run to started or failed
	// killGrace is how long an agent has to end a call it was told to
	// kill: its own reaping takes up to reapGrace.
	killGrace = reapGrace + 2*time.Second
)

// agentStart is how startAgent starts an agent.
type agentStart struct {
	cmd    *exec.Cmd          // the agent, or the sandbox that runs it
	ctl    *os.File           // the agent's end of the control socket, a descriptor of cmd
	server *net.UnixConn      // the server's end
	sent   []*os.File         // descriptors of cmd to close once it started
	kill   func(*exec.Cmd)    // ends it whole
	serve  func(net.Listener) // serves the proxy's listener the agent sends with ready (cfg.Egress)
	place  Placer             // places the agent's spare threads (Spec.Place), or nil
	// confine, when set, confines the launching thread before it forks
	// cmd: the thread then dies at once, and cmd has no parent-death
	// signal tied to it. Otherwise the thread waits for cmd and dies with
	// it, so that such a signal fires only then.
	confine func() error
}

// startAgent starts an agent from a thread of launch, sends it cfg with
// files, and waits until it says it is ready.
func startAgent(st agentStart, launch Launcher, cfg agentMsg, files []*os.File) (*agentClient, error) {
	cmd, server, kill := st.cmd, st.server, st.kill
	a := &agentClient{conn: server, calls: map[uint64]*agentCall{}, done: make(chan struct{}), stderr: &tailBuffer{max: 4096},
		place: st.place, spares: map[uint64]*agentSpare{}, spareReady: make(chan struct{}), toPlace: make(chan *agentSpare, 2*AgentSpares)}
	// Spares everywhere, reported for placing with a Placer.
	cfg.Spares, cfg.Placed = AgentSpares, a.place != nil
	cmd.Stderr = a.stderr
	exited, err := st.launch(launch)
	if err != nil {
		server.Close()
		return nil, fmt.Errorf("start the session agent: %w", err)
	}
	a.pid = cmd.Process.Pid
	a.kill = func() { kill(cmd) }
	// Until it is ready, the start below says why it failed (its socket
	// sees the end too).
	gone, startDone := make(chan struct{}), make(chan struct{})
	go func() {
		err := <-exited
		close(gone)
		<-startDone
		a.end(fmt.Errorf("%w (%w)%s", ErrAgentEnded, agentLost{err}, a.stderr.line()))
	}()
	defer close(startDone)

	r := awaitReady(handshake(server, cfg, files))
	if err := r.err; err != nil {
		// An agent (or bwrap) that fails to set up says why on stderr as
		// it exits: wait a moment for that line.
		select {
		case <-gone:
		case <-time.After(time.Second):
		}
		a.end(&agentStartError{err: err, line: strings.TrimPrefix(a.stderr.line(), ": ")})
		return nil, a.Err()
	}
	if a.place != nil {
		// Found now, while nothing but the agent itself ran in its
		// sandbox: the threads it reports are looked up in this process.
		if a.agentPid, err = hostProcess(a.pid, r.pid); err != nil {
			if r.proxy != nil {
				r.proxy.Close()
			}
			a.end(&agentStartError{err: err})
			return nil, a.Err()
		}
		a.threads = newThreadIDs(a.agentPid, r.pid)
		go a.placeSpares()
	}
	if r.proxy != nil {
		st.serve(r.proxy)
	}
	go a.read()
	return a, nil
}

// launch starts st.cmd from a thread of launch (FreshThread if nil),
// confined first if st says so, and closes the descriptors the agent
// took. Its Wait's error arrives on exited.
func (st agentStart) launch(launch Launcher) (exited <-chan error, err error) {
	if launch == nil {
		launch = FreshThread
	}
	cmd := st.cmd
	started := make(chan error, 1)
	done := make(chan error, 1)
	launch(func() {
		if st.confine != nil {
			if err := st.confine(); err != nil {
				started <- err
				return
			}
		}
		err := cmd.Start()
		started <- err
		if err == nil && st.confine == nil {
			done <- cmd.Wait()
		}
	})
	err = <-started
	st.ctl.Close()
	closeFiles(st.sent)
	if err == nil && st.confine != nil {
		go func() { done <- cmd.Wait() }()
	}
	return done, err
}

// readiness is what an agent's first answer says.
type readiness struct {
	proxy net.Listener // the proxy's listener, for cfg.Egress
	pid   int          // the agent's own id, in its pid namespace
	err   error
}

// handshake sends the agent cfg with files and reads its first answer,
// in the background.
func handshake(server *net.UnixConn, cfg agentMsg, files []*os.File) <-chan readiness {
	ready := make(chan readiness, 1)
	go func() {
		if err := writeFrame(server, cfg, files...); err != nil {
			ready <- readiness{err: err}
			return
		}
		// The one descriptor the server takes from an agent: see
		// agentwire_linux.go.
		takeFiles := 0
		if cfg.Egress {
			takeFiles = 1
		}
		m, got, err := readFrame(server, maxAgentFrame, takeFiles)
		var r readiness
		switch {
		case err != nil:
			r.err = err
		case m.T == msgError:
			r.err = errors.New(oneLine(m.Err))
		case m.T != msgReady:
			r.err = fmt.Errorf("%w: %s before ready", errFrame, m.T)
		case cfg.Egress:
			r.proxy, r.err = proxyListener(got)
			got = nil
		}
		r.pid = m.Pid
		closeFiles(got)
		ready <- r
	}()
	return ready
}

// awaitReady waits agentStartTimeout for the handshake's answer; one that
// comes later has its proxy's listener closed.
func awaitReady(ready <-chan readiness) readiness {
	select {
	case r := <-ready:
		return r
	case <-time.After(agentStartTimeout):
		go func() {
			if late := <-ready; late.proxy != nil {
				late.proxy.Close()
			}
		}()
		return readiness{err: errors.New("not ready in time")}
	}
}

// placeSpares places the threads the agent reports as spare, in the
// order it reports them, until the agent ends.
func (a *agentClient) placeSpares() {
	for {
		var sp *agentSpare
		select {
		case <-a.done:
			return
		case sp = <-a.toPlace:
		}
		p, err := a.placeThread(sp.tid)
		a.mu.Lock()
		if a.err != nil {
			a.mu.Unlock()
			if p != nil {
				p.Remove()
			}
			return
		}
		if err != nil {
			a.mu.Unlock()
			if p != nil {
				p.Remove()
			}
			if dying(a.agentPid) {
				// The thread went with its process (killed, say): the
				// read loop sees the agent lost, and a call on it is
				// run again on a new one.
				return
			}
			a.end(fmt.Errorf("%w: it broke the protocol (%v) and was killed", ErrAgentEnded, err))
			return
		}
		sp.placement = p
		a.placed = append(a.placed, sp)
		close(a.spareReady)
		a.spareReady = make(chan struct{})
		a.mu.Unlock()
	}
}

// placeThread places the agent's thread tid (in its pid namespace), which
// must be a thread of the agent process and stay one while it is moved.
// A thread's id is reused only after the kernel's cyclic allocation has
// gone round every other free id, which no command can make happen
// between the look before the move and the move.
func (a *agentClient) placeThread(tid int) (Placement, error) {
	host, err := a.threads.host(tid)
	if err != nil {
		return nil, err
	}
	p, err := a.place(a.agentPid, host)
	if err != nil {
		return nil, fmt.Errorf("place thread %d of the session agent: %w", tid, err)
	}
	if !a.threads.is(host, tid) {
		return p, fmt.Errorf("spare thread %d left the agent while it was placed", tid)
	}
	return p, nil
}

// takeSpares returns a placed spare thread for the next call, armed
// ones first unless plain, and with an armed one a plain alternate when
// there is one, waiting for a spare while the agent lives and
// callStartTimeout has not passed.
func (a *agentClient) takeSpares(plain bool) (sp, alt *agentSpare, err error) {
	deadline := time.NewTimer(callStartTimeout)
	defer deadline.Stop()
	take := func(armed bool) *agentSpare {
		for i, sp := range a.placed {
			if sp.armed == armed {
				a.placed = slices.Delete(a.placed, i, i+1)
				delete(a.spares, sp.id)
				return sp
			}
		}
		return nil
	}
	for {
		a.mu.Lock()
		if a.err != nil {
			err := a.err
			a.mu.Unlock()
			return nil, nil, err
		}
		if !plain {
			sp = take(true)
		}
		if sp == nil {
			sp = take(false)
		} else {
			alt = take(false)
		}
		if sp != nil {
			a.mu.Unlock()
			return sp, alt, nil
		}
		ready := a.spareReady
		a.mu.Unlock()
		select {
		case <-ready:
		case <-a.done:
		case <-deadline.C:
			a.end(fmt.Errorf("%w: it kept no thread ready for a call in %v and was killed", ErrAgentEnded, callStartTimeout))
			return nil, nil, a.Err()
		}
	}
}

// giveBack puts alt, a spare a call was offered and did not use, first
// in line again.
func (a *agentClient) giveBack(alt *agentSpare) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		if alt.placement != nil {
			alt.placement.Remove()
		}
		return
	}
	a.spares[alt.id] = alt
	a.placed = slices.Insert(a.placed, 0, alt)
	close(a.spareReady)
	a.spareReady = make(chan struct{})
}

// read takes the agent's messages until it ends; anything unexpected
// ends it.
func (a *agentClient) read() {
	for {
		m, _, err := readFrame(a.conn, maxAgentFrame, 0)
		if err != nil {
			a.end(fmt.Errorf("%w: %w%s", ErrAgentEnded, agentLost{err}, a.stderr.line()))
			return
		}
		if err := a.deliver(m); err != nil {
			a.end(fmt.Errorf("%w: it broke the protocol (%v) and was killed", ErrAgentEnded, err))
			return
		}
	}
}

// deliver routes one message to its call, checking that it fits.
func (a *agentClient) deliver(m agentMsg) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if m.T == msgSpare {
		// Each spare thread reports itself: in any order.
		if a.place == nil || m.ID == 0 || a.spares[m.ID] != nil || m.Pid <= 0 || len(a.spares) >= 2*AgentSpares {
			return fmt.Errorf("spare %d (thread %d) with %d spares", m.ID, m.Pid, len(a.spares))
		}
		sp := &agentSpare{id: m.ID, tid: m.Pid, armed: m.Armed}
		a.spares[m.ID] = sp
		// Never wait here, holding mu, which the placer takes after it
		// takes from toPlace: a spare placed and forgotten leaves its
		// place in a.spares while it may still be queued, so an agent
		// that floods spares can fill the queue first.
		select {
		case a.toPlace <- sp:
		default:
			return fmt.Errorf("spare %d (thread %d): %d spares wait to be placed", m.ID, m.Pid, len(a.toPlace))
		}
		return nil
	}
	c := a.calls[m.ID]
	if c == nil {
		return fmt.Errorf("%s for unknown call %d", m.T, m.ID)
	}
	switch {
	case (m.T == msgStarted || m.T == msgFailed) && c.state == 0:
		c.started <- m
		c.state = 1
		if m.T == msgFailed {
			c.state = 2
			delete(a.calls, m.ID)
		}
	case m.T == msgTree && c.state == 1:
		if m.Procs < 0 || m.RSS < 0 || m.Shared < 0 || m.Shared > m.RSS {
			return fmt.Errorf("tree of %d tasks, %d bytes, %d of them shared", m.Procs, m.RSS, m.Shared)
		}
		c.tree.Store(&Count{Tasks: m.Procs, Memory: m.RSS, Shared: m.Shared})
	case m.T == msgExited && c.state == 1:
		if m.Signal < 0 || m.Signal > 64 || m.Code < -1 || m.Code > 255 {
			return fmt.Errorf("exit %d, signal %d", m.Code, m.Signal)
		}
		c.exit = m
		close(c.ended)
		c.state = 2
		delete(a.calls, m.ID)
	default:
		return fmt.Errorf("%s for call %d in state %d", m.T, m.ID, c.state)
	}
	return nil
}

// end records why the agent ended, kills it whole and lets every call of
// it know; the first reason stays.
func (a *agentClient) end(err error) {
	a.mu.Lock()
	if a.err != nil {
		a.mu.Unlock()
		return
	}
	a.err = err
	a.calls = map[uint64]*agentCall{}
	close(a.done)
	var unused []Placement
	for _, sp := range a.spares {
		if sp.placement != nil {
			unused = append(unused, sp.placement)
		}
	}
	a.spares, a.placed = map[uint64]*agentSpare{}, nil
	a.mu.Unlock()
	defer func() {
		for _, p := range unused {
			p.Remove()
		}
	}()
	if a.kill != nil {
		a.kill()
	}
	a.conn.Close()
}

// Err is why the agent ended, or nil.
func (a *agentClient) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Close stops the agent: every call is killed and it exits; one that does
// not within killGrace is killed whole.
func (a *agentClient) Close() {
	if a.Err() != nil {
		return
	}
	a.send(agentMsg{T: msgStop})
	select {
	case <-a.done:
	case <-time.After(killGrace):
	}
	a.end(fmt.Errorf("%w: %w", ErrAgentEnded, errRunnerClosed))
}

func (a *agentClient) send(m agentMsg, files ...*os.File) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	return writeFrame(a.conn, m, files...)
}

// startCall sends c to the agent, on a placed spare (plain: a plain one)
// with a Placer, and waits until the agent says it started or failed. It
// returns the call's id and state, what the agent said, and the spare it
// ran on (nil: none), whose placement is the caller's; of the spares it
// offered, an armed one the agent did not use is gone with its thread,
// and a plain alternate it did not use is given back.
func (a *agentClient) startCall(c Call, plain bool) (uint64, *agentCall, agentMsg, *agentSpare, error) {
	call := &agentCall{started: make(chan agentMsg, 1), ended: make(chan struct{})}
	call.tree.Store(&Count{Tasks: 1})
	var sp, alt *agentSpare
	if a.place != nil {
		var err error
		if sp, alt, err = a.takeSpares(plain); err != nil {
			return 0, nil, agentMsg{}, nil, err
		}
	}
	// Until the agent says which it used, both are the call's to undo.
	settled := false
	defer func() {
		if !settled {
			for _, s := range []*agentSpare{sp, alt} {
				if s != nil && s.placement != nil {
					s.placement.Remove()
				}
			}
		}
	}()
	a.mu.Lock()
	if a.err != nil {
		err := a.err
		a.mu.Unlock()
		return 0, nil, agentMsg{}, nil, err
	}
	a.nextID++
	id := a.nextID
	a.calls[id] = call
	a.mu.Unlock()
	run := agentMsg{T: msgRun, ID: id, Argv: c.Argv, Env: c.Env, Dir: c.Dir, TTY: c.TTY, ViewGen: c.ViewGen}
	if sp != nil {
		run.Spare = sp.id
	}
	if alt != nil {
		run.Alt = alt.id
	}
	if err := a.send(run, c.Stdin, c.Stdout, c.Stderr); err != nil {
		a.end(fmt.Errorf("%w: %w", ErrAgentEnded, agentLost{err}))
		return 0, nil, agentMsg{}, nil, a.Err()
	}
	// What the agent said before it ended counts (its reader delivers it
	// before it marks the end): a command it started is never reported as
	// lost before its start, and so never run twice.
	var m agentMsg
	select {
	case m = <-call.started:
	case <-a.done:
		select {
		case m = <-call.started:
		default:
			return 0, nil, agentMsg{}, nil, a.Err()
		}
	case <-time.After(callStartTimeout):
		a.end(fmt.Errorf("%w: it did not start a command in %v and was killed", ErrAgentEnded, callStartTimeout))
		return 0, nil, agentMsg{}, nil, a.Err()
	}
	var used *agentSpare
	switch {
	case sp != nil && m.Used == sp.id:
		used = sp
	case alt != nil && m.Used == alt.id:
		used = alt
	case sp != nil && (m.T == msgStarted || m.Used != 0):
		// A command on a thread that is not the call's: outside the
		// call's cgroups.
		offered := fmt.Sprint(sp.id)
		if alt != nil {
			offered += fmt.Sprintf(" and %d", alt.id)
		}
		a.end(fmt.Errorf("%w: it broke the protocol (%s on spare %d, offered %s) and was killed", ErrAgentEnded, m.T, m.Used, offered))
		return 0, nil, agentMsg{}, nil, a.Err()
	}
	settled = true
	if sp != nil && used != sp && sp.placement != nil {
		sp.placement.Remove()
	}
	if alt != nil && used != alt {
		a.giveBack(alt)
	}
	return id, call, m, used, nil
}

// Run starts c in the agent.
func (a *agentClient) Run(c Call) (Process, error) {
	// A run the agent could fit on no thread is run again, on a plain
	// spare (the armed one it was given entered a read view that no
	// longer fits, and there was no plain one beside).
	var id uint64
	var call *agentCall
	var m agentMsg
	var sp *agentSpare
	var err error
	for try := 0; ; try++ {
		id, call, m, sp, err = a.startCall(c, try > 0)
		if err != nil {
			return Process{}, err
		}
		if !(m.T == msgFailed && m.Respare && try < 2) {
			break
		}
	}
	// A call that does not start leaves its placement to be removed here;
	// one that does, to the caller (Process.Placement).
	if m.T == msgFailed {
		if sp != nil && sp.placement != nil {
			sp.placement.Remove()
		}
		if m.NotFound {
			return Process{}, fmt.Errorf("%s: %w", c.Argv[0], ErrNotFound)
		}
		if m.NoMemory {
			return Process{}, &NoMemoryError{Shared: m.Shared, Err: oneLine(m.Err)}
		}
		if m.Shared > 0 {
			return Process{}, &SharedMemoryError{Bytes: m.Shared}
		}
		return Process{}, fmt.Errorf("start %s: %s", c.Argv[0], oneLine(m.Err))
	}
	var killOnce sync.Once
	var placement Placement
	if sp != nil {
		placement = sp.placement
	}
	return Process{
		Placement: placement,
		Wait: func() (Exit, error) {
			// An exit the agent reported before it ended is the call's.
			select {
			case <-call.ended:
			case <-a.done:
				select {
				case <-call.ended:
				default:
					return Exit{Code: -1, Signal: syscall.SIGKILL}, a.Err()
				}
			}
			ex := Exit{Code: call.exit.Code, Signal: syscall.Signal(call.exit.Signal), RefusedWrite: call.exit.Refused, RefusedWrites: call.exit.RefusedN, Stopped: call.exit.Stopped}
			if call.exit.Behind != 0 {
				ex.ViewBehind = time.Unix(0, call.exit.Behind)
			}
			return ex, nil
		},
		Kill: func() {
			select {
			case <-call.ended:
				// The agent says a call ended once it killed what the
				// call left (killDomain), and then forgets it: a kill
				// would reach nothing.
				return
			default:
			}
			killOnce.Do(func() {
				a.send(agentMsg{T: msgKill, ID: id})
				go func() {
					select {
					case <-call.ended:
					case <-a.done:
					case <-time.After(killGrace):
						a.end(fmt.Errorf("%w: it did not end a call within %v of being told to kill it, and was killed", ErrAgentEnded, killGrace))
					}
				}()
			})
		},
		Tree: func() Count { return *call.tree.Load() },
		Signal: func(sig syscall.Signal) error {
			if sig <= 0 || sig > 64 {
				return fmt.Errorf("signal %d: out of range", sig)
			}
			select {
			case <-call.ended:
				return errCallEnded
			default:
			}
			return a.send(agentMsg{T: msgSignal, ID: id, Signal: int(sig)})
		},
	}, nil
}

// errCallEnded is a signal for a command that has ended.
var errCallEnded = errors.New("the command has ended")

// agentLost is how an agent went on its own, as its process or its
// connection told: it died, was killed from outside, or hung up. It is
// ErrAgentLost; the end of an agent the server closed, or killed for not
// starting a command in time, is not.
type agentLost struct{ error }

func (c agentLost) Unwrap() []error { return []error{c.error, ErrAgentLost} }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

// line is the last line written, as ": line", or "".
func (t *tailBuffer) line() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return ""
	}
	return ": " + oneLine(s)
}

// oneLine is s on one line, at most 300 bytes.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// socketPair is a connected pair of unix stream sockets, close-on-exec:
// the server's end as a connection, the agent's as a file to pass on.
func socketPair() (*net.UnixConn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socket pair: %w", err)
	}
	sf := os.NewFile(uintptr(fds[0]), "agent-control")
	c, err := net.FileConn(sf)
	sf.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, err
	}
	return c.(*net.UnixConn), os.NewFile(uintptr(fds[1]), "agent-control"), nil
}

// RenewView tells the agent that the project is at gen now (--overlay):
// it readies a view of it ahead of the next call.
func (a *agentClient) RenewView(gen uint64) {
	a.send(agentMsg{T: msgView, ViewGen: gen})
}
