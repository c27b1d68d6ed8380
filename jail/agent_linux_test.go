package jail

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A lying agent cannot be made of the real one: these tests run the test
// binary as an agent that speaks the real protocol over the real socket
// and breaks it in one way each (fakeAgent), and check that the server's
// side ends it, kills it, and never hangs or takes anything from it.

const fakeAgentEnv = "JAIL_MCP_TEST_FAKE_AGENT"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeAgentEnv); mode != "" {
		os.Exit(fakeAgent(mode))
	}
	os.Exit(m.Run())
}

// fakeAgent serves on fd 3 until the server is gone, lying as mode says.
func fakeAgent(mode string) int {
	f := os.NewFile(3, "control")
	c, err := net.FileConn(f)
	if err != nil {
		return 2
	}
	conn := c.(*net.UnixConn)
	if _, files, err := readFrame(conn, maxServerFrame, maxFrameFiles); err == nil {
		closeFiles(files)
	}
	if mode == "not-ready" {
		time.Sleep(time.Minute)
		return 0
	}
	writeFrame(conn, agentMsg{T: msgReady, Pid: os.Getpid()}, fakeListeners(mode)...)
	switch mode {
	case "spare-good":
		writeFrame(conn, agentMsg{T: msgSpare, ID: 1, Pid: unix.Gettid()})
	case "spare-alt":
		writeFrame(conn, agentMsg{T: msgSpare, ID: 2, Pid: unix.Gettid()})
		writeFrame(conn, agentMsg{T: msgSpare, ID: 1, Pid: unix.Gettid(), Armed: true})
	case "spare-wrong-used":
		writeFrame(conn, agentMsg{T: msgSpare, ID: 1, Pid: unix.Gettid()})
	case "spare-server":
		// The server's own main thread, named as a thread of the agent.
		writeFrame(conn, agentMsg{T: msgSpare, ID: 1, Pid: os.Getppid()})
	case "spare-thread":
		// A thread that is not the process's first, which vanishes from
		// /proc as soon as it exits.
		tids := make(chan int)
		for {
			go func() {
				runtime.LockOSThread()
				tids <- unix.Gettid()
				select {}
			}()
			if tid := <-tids; tid != os.Getpid() {
				writeFrame(conn, agentMsg{T: msgSpare, ID: 1, Pid: tid})
				break
			}
		}
	case "spare-flood":
		for i := range 100 {
			writeFrame(conn, agentMsg{T: msgSpare, ID: uint64(i + 1), Pid: unix.Gettid()})
		}
	}
	runs := 0
	for {
		m, files, err := readFrame(conn, maxServerFrame, maxFrameFiles)
		closeFiles(files)
		if err != nil {
			return 0
		}
		if m.T != msgRun {
			continue
		}
		runs++
		switch mode {
		case "spare-alt":
			// Each run as the server should offer it; the exit code says
			// which spares it was (200: not as it should).
			want := map[int][2]uint64{1: {1, 2}, 2: {3, 4}, 3: {4, 0}, 4: {5, 0}, 5: {6, 0}}[runs]
			used := map[int]uint64{1: 2, 2: 3, 3: 4, 5: 6}[runs]
			if [2]uint64{m.Spare, m.Alt} != want {
				writeFrame(conn, agentMsg{T: msgStarted, ID: m.ID, Used: m.Spare})
				writeFrame(conn, agentMsg{T: msgExited, ID: m.ID, Code: 200})
				continue
			}
			if runs == 4 {
				// The armed spare did not fit, and there was no plain one.
				writeFrame(conn, agentMsg{T: msgFailed, ID: m.ID, Respare: true, Err: "no spare thread fits"})
				writeFrame(conn, agentMsg{T: msgSpare, ID: 6, Pid: unix.Gettid()})
				continue
			}
			writeFrame(conn, agentMsg{T: msgStarted, ID: m.ID, Used: used})
			writeFrame(conn, agentMsg{T: msgExited, ID: m.ID, Code: int(10*m.Spare + m.Alt)})
			switch runs {
			case 1:
				writeFrame(conn, agentMsg{T: msgSpare, ID: 4, Pid: unix.Gettid()})
				writeFrame(conn, agentMsg{T: msgSpare, ID: 3, Pid: unix.Gettid(), Armed: true})
			case 3:
				writeFrame(conn, agentMsg{T: msgSpare, ID: 5, Pid: unix.Gettid(), Armed: true})
			}
		case "spare-wrong-used":
			// A command on a thread the call was not offered.
			writeFrame(conn, agentMsg{T: msgStarted, ID: m.ID, Used: m.Spare + 6})
		case "huge":
			var hdr [4]byte
			binary.BigEndian.PutUint32(hdr[:], 1<<20)
			conn.Write(hdr[:])
			conn.Write(make([]byte, 1<<20))
		case "unknown-id":
			writeFrame(conn, agentMsg{T: msgStarted, ID: m.ID + 1000})
		case "bad-exit":
			writeFrame(conn, agentMsg{T: msgStarted, ID: m.ID})
			writeFrame(conn, agentMsg{T: msgExited, ID: m.ID, Code: 1000})
		case "negative-tree":
			writeFrame(conn, agentMsg{T: msgStarted, ID: m.ID})
			writeFrame(conn, agentMsg{T: msgTree, ID: m.ID, Procs: -5})
		case "exit-twice":
			writeFrame(conn, agentMsg{T: msgStarted, ID: m.ID})
			writeFrame(conn, agentMsg{T: msgExited, ID: m.ID})
			writeFrame(conn, agentMsg{T: msgExited, ID: m.ID})
		case "garbage":
			conn.Write([]byte{0, 0, 0, 5, '{', '{', '{', '{', '{'})
		case "silent":
		case "spare-good":
			writeFrame(conn, agentMsg{T: msgStarted, ID: m.ID, Used: m.Spare})
			writeFrame(conn, agentMsg{T: msgExited, ID: m.ID, Code: int(m.Spare)})
		case "ignores-kill":
			writeFrame(conn, agentMsg{T: msgStarted, ID: m.ID})
		case "dies":
			writeFrame(conn, agentMsg{T: msgStarted, ID: m.ID})
			os.Exit(3)
		case "sends-fds":
			// Descriptors pushed at the server with every message.
			dup, _ := os.Open("/")
			oob := unix.UnixRights(int(dup.Fd()), int(dup.Fd()), int(dup.Fd()))
			payload := fmt.Sprintf(`{"t":"started","id":%d}`, m.ID)
			frame := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
			conn.WriteMsgUnix(append(frame, payload...), oob, nil)
			payload = fmt.Sprintf(`{"t":"exited","id":%d,"code":7}`, m.ID)
			frame = binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
			conn.WriteMsgUnix(append(frame, payload...), oob, nil)
		}
	}
}

// fakeListeners are what a fake agent of mode sends with ready in place
// of the proxy's listener.
func fakeListeners(mode string) []*os.File {
	sock := func(domain, typ int, addr unix.Sockaddr, listen bool) *os.File {
		fd, err := unix.Socket(domain, typ, 0)
		if err != nil {
			return nil
		}
		unix.Bind(fd, addr)
		if listen {
			unix.Listen(fd, 1)
		}
		return os.NewFile(uintptr(fd), "fake")
	}
	loop := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
	good := func() *os.File { return sock(unix.AF_INET, unix.SOCK_STREAM, loop, true) }
	switch mode {
	case "listener-good", "listener-unasked":
		return []*os.File{good()}
	case "listener-two":
		return []*os.File{good(), good()}
	case "listener-any":
		return []*os.File{sock(unix.AF_INET, unix.SOCK_STREAM, &unix.SockaddrInet4{}, true)}
	case "listener-v6":
		return []*os.File{sock(unix.AF_INET6, unix.SOCK_STREAM, &unix.SockaddrInet6{Addr: [16]byte{15: 1}}, true)}
	case "listener-udp":
		return []*os.File{sock(unix.AF_INET, unix.SOCK_DGRAM, loop, false)}
	case "listener-not-listening":
		return []*os.File{sock(unix.AF_INET, unix.SOCK_STREAM, loop, false)}
	case "listener-unix":
		return []*os.File{sock(unix.AF_UNIX, unix.SOCK_STREAM, &unix.SockaddrUnix{Name: "@jail-mcp-fake"}, true)}
	case "listener-dir":
		f, _ := os.Open("/")
		return []*os.File{f}
	}
	return nil
}

// startFake starts a fake agent of mode; killed counts its kill.
func startFake(t *testing.T, mode string) (*agentClient, error, *atomic.Int32) {
	t.Helper()
	return startFakeWith(t, mode, agentMsg{T: msgConfig, Kind: "fake"}, nil)
}

// startFakeWith starts a fake agent of mode with cfg; serve is given the
// proxy's listener when cfg.Egress.
func startFakeWith(t *testing.T, mode string, cfg agentMsg, serve func(net.Listener)) (*agentClient, error, *atomic.Int32) {
	t.Helper()
	return startFakePlaced(t, mode, cfg, serve, nil)
}

// startFakePlaced is startFakeWith with a Placer for the agent's spare
// threads.
func startFakePlaced(t *testing.T, mode string, cfg agentMsg, serve func(net.Listener), place Placer) (*agentClient, error, *atomic.Int32) {
	t.Helper()
	server, ctl, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fakeAgentEnv+"="+mode)
	cmd.ExtraFiles = []*os.File{ctl}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	killed := &atomic.Int32{}
	kill := func(cmd *exec.Cmd) {
		killed.Add(1)
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
	}
	a, err := startAgent(agentStart{cmd: cmd, ctl: ctl, server: server, kill: kill, serve: serve, place: place}, nil, cfg, nil)
	if a != nil {
		t.Cleanup(a.Close)
	}
	return a, err, killed
}

func fds(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

func TestAgentThatBreaksTheProtocol(t *testing.T) {
	old := [3]time.Duration{agentStartTimeout, callStartTimeout, killGrace}
	agentStartTimeout, callStartTimeout, killGrace = 2*time.Second, 2*time.Second, 2*time.Second
	t.Cleanup(func() { agentStartTimeout, callStartTimeout, killGrace = old[0], old[1], old[2] })

	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	call := Call{Argv: []string{"/bin/true"}, Dir: "/", Stdin: devnull, Stdout: devnull, Stderr: devnull}

	t.Run("not-ready", func(t *testing.T) {
		start := time.Now()
		_, err, killed := startFake(t, "not-ready")
		if err == nil || killed.Load() == 0 || time.Since(start) > 5*time.Second {
			t.Errorf("an agent that never says ready: err %v, killed %d, after %v", err, killed.Load(), time.Since(start))
		}
	})
	for _, tt := range []struct {
		mode string
		// where the lie shows: Run, or Wait
		atRun bool
		want  string
	}{
		{"huge", true, "malformed frame"},
		{"unknown-id", true, "unknown call"},
		{"garbage", true, "malformed frame"},
		{"silent", true, "did not start a command"},
		{"dies", false, "session agent ended"},
		{"bad-exit", false, "exit 1000"},
		{"negative-tree", false, "tree of -5"},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			a, err, killed := startFake(t, tt.mode)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			p, err := a.Run(call)
			if err == nil {
				if tt.atRun {
					t.Fatalf("Run took the lie")
				}
				_, err = p.Wait()
			}
			if err == nil || !errors.Is(err, ErrAgentEnded) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want the agent ended: %s", err, tt.want)
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("it took %v", time.Since(start))
			}
			if killed.Load() == 0 || a.Err() == nil {
				t.Errorf("the agent was not killed (%d) or not marked ended (%v)", killed.Load(), a.Err())
			}
			if _, err := a.Run(call); err == nil {
				t.Error("an ended agent still runs calls")
			}
		})
	}
	t.Run("exit-twice", func(t *testing.T) {
		a, err, killed := startFake(t, "exit-twice")
		if err != nil {
			t.Fatal(err)
		}
		p, err := a.Run(call)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(); err != nil {
			t.Fatalf("the first exit: %v", err)
		}
		if !waitUntil(3*time.Second, func() bool { return a.Err() != nil }) || killed.Load() == 0 {
			t.Errorf("a second exit of the same call did not end the agent: %v", a.Err())
		}
	})
	t.Run("ignores-kill", func(t *testing.T) {
		a, _, killed := startFake(t, "ignores-kill")
		p, err := a.Run(call)
		if err != nil {
			t.Fatal(err)
		}
		p.Kill()
		// Wait returns once the agent is marked ended; it is killed whole
		// right after.
		_, err = p.Wait()
		if err == nil || !strings.Contains(err.Error(), "did not end a call") || !waitUntil(10*time.Second, func() bool { return killed.Load() > 0 }) {
			t.Errorf("an agent that keeps a killed call: err %v, killed %d", err, killed.Load())
		}
	})
	t.Run("sends-fds", func(t *testing.T) {
		a, err, _ := startFake(t, "sends-fds")
		if err != nil {
			t.Fatal(err)
		}
		before := fds(t)
		for range 5 {
			p, err := a.Run(call)
			if err != nil {
				t.Fatal(err)
			}
			if e, err := p.Wait(); err != nil || e.Code != 7 {
				t.Fatalf("exit %+v %v", e, err)
			}
		}
		if after := fds(t); after > before {
			t.Errorf("the server holds %d descriptors more after the agent sent some", after-before)
		}
	})
}

func waitUntil(d time.Duration, f func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if f() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return f()
}

// TestAgentProxyListener: the one descriptor the server takes from an
// agent, the proxy's listener with ready, only when it asked for one and
// only a listening TCP socket on 127.0.0.1; anything else ends the agent
// and leaves the server no descriptor.
func TestAgentProxyListener(t *testing.T) {
	old := killGrace
	killGrace = time.Second
	t.Cleanup(func() { killGrace = old })
	egress := agentMsg{T: msgConfig, Kind: "fake", Egress: true}
	var served net.Listener
	serve := func(ln net.Listener) { served = ln }
	before := fds(t)
	a, err, _ := startFakeWith(t, "listener-good", egress, serve)
	if err != nil || served == nil {
		t.Fatalf("a good listener: %v", err)
	}
	if addr := served.Addr().(*net.TCPAddr); !addr.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("served %v", addr)
	}
	served.Close()
	a.Close()
	for _, mode := range []string{"listener-two", "listener-any", "listener-v6", "listener-udp", "listener-not-listening", "listener-unix", "listener-dir", "silent"} {
		t.Run(mode, func(t *testing.T) {
			served = nil
			_, err, killed := startFakeWith(t, mode, egress, serve)
			if err == nil || served != nil || !strings.Contains(err.Error(), "malformed frame") {
				t.Errorf("err %v, served %v: want the agent refused", err, served)
			}
			if killed.Load() == 0 {
				t.Error("the agent was not killed")
			}
		})
	}
	t.Run("unasked", func(t *testing.T) {
		served = nil
		a, err, _ := startFakeWith(t, "listener-unasked", agentMsg{T: msgConfig, Kind: "fake"}, serve)
		if err != nil || served != nil {
			t.Errorf("a listener sent unasked: err %v, served %v", err, served)
		}
		a.Close()
	})
	// (The last agent killed may still be exiting, its stderr's pipe open
	// until it is reaped: wait for that.)
	after := fds(t)
	for deadline := time.Now().Add(5 * time.Second); after > before && time.Now().Before(deadline); after = fds(t) {
		time.Sleep(20 * time.Millisecond)
	}
	if after > before {
		t.Errorf("the server holds %d descriptors more", after-before)
	}
}

type fakePlacement struct{ removed *atomic.Int32 }

func (p fakePlacement) Remove() { p.removed.Add(1) }

// TestAgentSpares: the server places only threads of the agent process
// itself, looked up in its task list, never what the agent names: a
// thread of the server (its main thread, by the agent's word) or more
// spares than it keeps end the agent, and nothing is placed. A spare it
// did place is the call's (Process.Placement), and the call runs on it.
func TestAgentSpares(t *testing.T) {
	for _, mode := range []string{"spare-server", "spare-flood"} {
		t.Run(mode, func(t *testing.T) {
			var placed atomic.Int32
			a, err, killed := startFakePlaced(t, mode, agentMsg{T: msgConfig, Kind: "fake"}, nil, func(agentPid, tid int) (Placement, error) {
				placed.Add(1)
				return nil, errors.New("placed")
			})
			if err != nil {
				t.Fatal(err)
			}
			if !waitUntil(10*time.Second, func() bool { return a.Err() != nil && killed.Load() > 0 }) {
				t.Fatalf("the agent was not ended: %v", a.Err())
			}
			// A flood of the agent's own thread may see some placed
			// before the bound ends it; the server's thread never is.
			if mode == "spare-server" && placed.Load() != 0 || !strings.Contains(a.Err().Error(), "protocol") {
				t.Errorf("placed %d threads; ended with %v", placed.Load(), a.Err())
			}
		})
	}
	// The agent killed while its spare is placed: the thread goes with
	// it, and the agent is lost (a call on it runs again on a new one),
	// not ended for breaking the protocol.
	t.Run("killed-while-placed", func(t *testing.T) {
		var removed atomic.Int32
		a, err, _ := startFakePlaced(t, "spare-thread", agentMsg{T: msgConfig, Kind: "fake"}, nil, func(agentPid, tid int) (Placement, error) {
			syscall.Kill(agentPid, syscall.SIGKILL)
			waitUntil(10*time.Second, func() bool {
				_, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", agentPid, tid))
				return err != nil
			})
			return fakePlacement{&removed}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !waitUntil(10*time.Second, func() bool { return a.Err() != nil }) {
			t.Fatal("the killed agent was not ended")
		}
		if !errors.Is(a.Err(), ErrAgentLost) || strings.Contains(a.Err().Error(), "protocol") {
			t.Errorf("ended with %v, want the agent lost", a.Err())
		}
	})
	t.Run("spare-good", func(t *testing.T) {
		var removed atomic.Int32
		got := make(chan [2]int, 1)
		a, err, _ := startFakePlaced(t, "spare-good", agentMsg{T: msgConfig, Kind: "fake"}, nil, func(agentPid, tid int) (Placement, error) {
			got <- [2]int{agentPid, tid}
			return fakePlacement{&removed}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer devnull.Close()
		p, err := a.Run(Call{Argv: []string{"/bin/true"}, Dir: "/", Stdin: devnull, Stdout: devnull, Stderr: devnull})
		if err != nil {
			t.Fatal(err)
		}
		ids := <-got
		if ids[0] != a.pid || ids[1] <= 0 {
			t.Errorf("placed thread %d of process %d, want a thread of the agent %d", ids[1], ids[0], a.pid)
		}
		if _, ok := p.Placement.(fakePlacement); !ok {
			t.Errorf("the call's placement: %#v", p.Placement)
		}
		if e, err := p.Wait(); err != nil || e.Code != 1 {
			t.Errorf("the call on spare 1: %+v %v", e, err)
		}
		if removed.Load() != 0 {
			t.Errorf("the server removed a placement the caller owns")
		}
	})
}

// numberedPlacement is the nth a test's placer made.
type numberedPlacement struct {
	n       int
	removed *removedList
}

type removedList struct {
	mu sync.Mutex
	ns []int
}

func (p numberedPlacement) Remove() {
	p.removed.mu.Lock()
	p.removed.ns = append(p.removed.ns, p.n)
	p.removed.mu.Unlock()
}

// TestAgentArmedSpares: a call is offered an armed spare first and, with
// it, a plain one it runs on instead when the armed one's read view does
// not fit it. The spare it ran on is the call's placement; an armed one
// it did not use is removed (its thread is gone), a plain one it did not
// use is offered to the next call; a call no spare fitted is run again on
// a plain one. A start on a spare the call was not offered ends the agent.
func TestAgentArmedSpares(t *testing.T) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	call := Call{Argv: []string{"/bin/true"}, Dir: "/", Stdin: devnull, Stdout: devnull, Stderr: devnull}
	t.Run("alt", func(t *testing.T) {
		removed := &removedList{}
		var made atomic.Int32
		a, err, _ := startFakePlaced(t, "spare-alt", agentMsg{T: msgConfig, Kind: "fake"}, nil, func(agentPid, tid int) (Placement, error) {
			return numberedPlacement{int(made.Add(1)), removed}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		placed := func(n int) {
			t.Helper()
			if !waitUntil(10*time.Second, func() bool {
				a.mu.Lock()
				defer a.mu.Unlock()
				return len(a.placed) == n
			}) {
				t.Fatalf("%d spares not placed", n)
			}
		}
		// Spares are numbered as the agent reports them, placements as
		// they are made: spare 2 is placement 1, spare 1 is 2, 4 is 3, 3
		// is 4, 5 is 5, 6 is 6.
		for _, step := range []struct {
			placed, code, placement int
		}{
			{2, 12, 1}, // armed 1 does not fit: on plain 2, and 1 is gone
			{2, 34, 4}, // armed 3 fits: plain 4 is given back
			{1, 40, 3}, // plain 4 alone
			{1, 60, 6}, // armed 5 alone, does not fit: again on plain 6
		} {
			placed(step.placed)
			p, err := a.Run(call)
			if err != nil {
				t.Fatal(err)
			}
			if e, err := p.Wait(); err != nil || e.Code != step.code {
				t.Fatalf("the call on spares %d: %+v %v", step.code, e, err)
			}
			if pl, ok := p.Placement.(numberedPlacement); !ok || pl.n != step.placement {
				t.Errorf("the call on spares %d has placement %#v, want %d", step.code, p.Placement, step.placement)
			}
		}
		removed.mu.Lock()
		gone := slices.Clone(removed.ns)
		removed.mu.Unlock()
		if fmt.Sprint(gone) != "[2 5]" {
			t.Errorf("removed placements %v, want those of the armed spares the calls did not use, [2 5]", gone)
		}
		if err := a.Err(); err != nil {
			t.Errorf("the agent ended: %v", err)
		}
	})
	t.Run("wrong-used", func(t *testing.T) {
		a, err, killed := startFakePlaced(t, "spare-wrong-used", agentMsg{T: msgConfig, Kind: "fake"}, nil, func(agentPid, tid int) (Placement, error) {
			return fakePlacement{&atomic.Int32{}}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !waitUntil(10*time.Second, func() bool {
			a.mu.Lock()
			defer a.mu.Unlock()
			return len(a.placed) == 1
		}) {
			t.Fatal("the spare was not placed")
		}
		if _, err := a.Run(call); err == nil || !strings.Contains(err.Error(), "protocol") || killed.Load() == 0 {
			t.Errorf("a start on a spare the call was not offered: %v, killed %d times", err, killed.Load())
		}
	})
}

// TestDying: a process a fatal signal took reads as dying from the moment
// kill returns (its SIGKILL pending, then exiting, then a zombie, then
// gone), so that the placer tells a thread that went with its killed agent
// from one that left a live agent; a live process never does.
func TestDying(t *testing.T) {
	if dying(os.Getpid()) {
		t.Fatal("this process reads as dying")
	}
	for i := range 100 {
		cmd := exec.Command("sleep", "100")
		if i%2 == 1 {
			// A process of several threads, as the agent is.
			cmd = exec.Command("python3", "-c", "import threading, time\nfor _ in range(4): threading.Thread(target=time.sleep, args=(100,), daemon=True).start()\ntime.sleep(100)")
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		if dying(pid) {
			t.Fatalf("a live process %d reads as dying", pid)
		}
		syscall.Kill(pid, syscall.SIGKILL)
		if !dying(pid) {
			t.Fatalf("process %d, killed, does not read as dying (round %d)", pid, i)
		}
		cmd.Wait()
		if !dying(pid) {
			t.Fatalf("process %d, reaped, does not read as dying", pid)
		}
	}
}
