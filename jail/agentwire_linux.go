package jail

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// The server and a session agent talk over a unix stream socket pair in
// frames: a 4-byte big-endian length, then one JSON message. The server
// passes descriptors (a call's standard streams, the jail) with the frame
// that needs them. It takes one descriptor from an agent, once: the
// listener of an allowlist's proxy, sent with ready, before the agent ran
// anything; it checks it is a listening TCP socket on 127.0.0.1. From
// then on it reads with plain reads, so the kernel drops any an agent
// sends.

// agentMsg is every message of the protocol; T says which.
type agentMsg struct {
	T  string `json:"t"`
	ID uint64 `json:"id,omitempty"`
	// filesLost: the kernel could not give the reader every descriptor
	// sent with the message (MSG_CTRUNC: out of descriptors); not sent.
	filesLost bool

	// config (server to agent): the policy the agent confines itself to.
	Kind    string `json:"kind,omitempty"` // "bwrap" or "landlock"
	Jail    string `json:"jail,omitempty"`
	Network bool   `json:"network,omitempty"`
	ABI     int    `json:"abi,omitempty"` // Landlock ABI; 0: none
	Root    bool   `json:"root,omitempty"`
	// Egress: the agent opens a listener on the loopback of the
	// sandbox's own network namespace (bwrap) and sends it with ready,
	// for the server's proxy to serve.
	Egress bool `json:"egress,omitempty"`
	// Writable: the project's directories commands write in place
	// (Spec.Writable), by path; their descriptors follow the jail's.
	Writable []string `json:"writable,omitempty"`
	// MaxShared: bwrap's agent starts no call while its sandbox's own
	// shared memory (Count.Shared) holds more bytes; 0: no bound.
	MaxShared int64 `json:"max_shared,omitempty"`
	// MaxWatches: the inotify watches a call may hold (CallWatchBound);
	// 0: no bound.
	MaxWatches int `json:"max_watches,omitempty"`
	// CallPath: the PATH of the session's calls by default (Spec.CallPath).
	CallPath string `json:"call_path,omitempty"`
	// Jails is Spec.Jails: the registry of this user's projects' jails.
	Jails string `json:"jails,omitempty"`
	// Spares: how many threads the agent keeps ready for calls (armed:
	// in the read view of a call of CallPath, with its write watch
	// loaded); 0: none, each call gets a new thread.
	Spares int `json:"spares,omitempty"`
	// Placed: the agent reports each spare thread, armed or plain, with
	// spare, for the server to place (Spec.Place) before a call runs on
	// it, and runs each call on the spare its run names.
	Placed bool `json:"placed,omitempty"`
	// Hidden and Shown: the read view of every call (view_linux.go).
	Hidden []string `json:"hidden,omitempty"`
	// Project is the read-only project whose refused writes each call
	// reports; empty: none watched.
	Project string   `json:"project,omitempty"`
	Shown   []string `json:"shown,omitempty"`
	// Overlay: every call sees Project copy-on-write, its layer the
	// config's second descriptor (overlay_linux.go).
	Overlay *agentOverlay `json:"overlay,omitempty"`

	// run (server to agent).
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	TTY  bool     `json:"tty,omitempty"`
	// Spare: the placed thread the call runs on (a spare's ID), or 0.
	Spare uint64 `json:"spare,omitempty"`
	// Alt: a plain placed spare the call runs on instead when Spare is
	// armed in a read view that no longer fits the call, or 0.
	Alt uint64 `json:"alt,omitempty"`
	// ViewGen (run, view): the number of the project's state (Call.ViewGen).
	ViewGen uint64 `json:"view_gen,omitempty"`

	// reports (agent to server).
	// spare: the thread is armed (Spares); started, failed: the spare
	// the call ran on (Spare or Alt; 0: none). Respare (failed): Spare
	// did not fit the call and there was no Alt: nothing ran, run it
	// again on a plain spare.
	Armed    bool   `json:"armed,omitempty"`
	Used     uint64 `json:"used,omitempty"`
	Respare  bool   `json:"respare,omitempty"`
	Pid      int    `json:"pid,omitempty"`
	Procs    int    `json:"procs,omitempty"`
	RSS      int64  `json:"rss,omitempty"`    // tree: Count.Memory
	Shared   int64  `json:"shared,omitempty"` // tree: Count.Shared; failed: why it did not start
	Code     int    `json:"code,omitempty"`
	Signal   int    `json:"signal,omitempty"`
	Err      string `json:"err,omitempty"`
	NotFound bool   `json:"not_found,omitempty"`
	NoMemory bool   `json:"no_memory,omitempty"` // failed: the kernel had no memory for its start
	// exited: the first write the jail refused in the project, and how
	// many (the call's write watch).
	Refused  string `json:"refused,omitempty"`
	RefusedN int    `json:"refused_n,omitempty"`
	// Stopped says why the agent ended the call: an inode its read view
	// granted was moved into a denied path while it ran, or it held more
	// inotify watches than its share.
	Stopped string `json:"stopped,omitempty"`
	// Behind (exited, --overlay): the call ran in a view of an older
	// state of the project than it asked for, as another call ran in it
	// (a job): when that view was made, in Unix nanoseconds.
	Behind int64 `json:"behind,omitempty"`
}

// Message types.
const (
	msgConfig  = "config"  // server: confine yourself (descriptors: the jail, then the writable directories)
	msgReady   = "ready"   // agent: confined, serving (descriptor: the proxy's listener, when asked for)
	msgRun     = "run"     // server: run a command (descriptors: stdin, stdout, stderr)
	msgSpare   = "spare"   // agent: thread Pid (its id in the agent's pid namespace) waits for a call, as spare ID
	msgStarted = "started" // agent: the command runs
	msgFailed  = "failed"  // agent: it could not start
	msgTree    = "tree"    // agent: its tasks (Procs) and their memory, now
	msgKill    = "kill"    // server: kill the call and everything it started
	msgSignal  = "signal"  // server: send Signal to every process of the call
	msgExited  = "exited"  // agent: it is over, and nothing of it is left
	msgStop    = "stop"    // server: end every call and exit
	msgView    = "view"    // server: the project is at ViewGen now (--overlay)
	msgError   = "error"   // agent: it cannot serve (it exits)
)

// Frame bounds. The server's frames carry a command line and its
// environment, which the kernel bounds (ARG_MAX, a few MiB at most); an
// agent's carry a few numbers and one line of error, and an agent is not
// trusted: anything larger ends it.
const (
	maxServerFrame = 16 << 20
	maxAgentFrame  = 16 << 10
	// maxFrameFiles is the most descriptors a server's frame carries:
	// a config's, the jail and the writable directories.
	maxFrameFiles = 1 + MaxWritable
)

var errFrame = errors.New("malformed frame")

// writeFrame sends m with files attached, whole.
func writeFrame(c *net.UnixConn, m agentMsg, files ...*os.File) error {
	payload, err := json.Marshal(m)
	if err != nil {
		return err
	}
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(payload)), uint32(len(payload)))
	b = append(b, payload...)
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	n, _, err := c.WriteMsgUnix(b, oob, nil)
	if err != nil {
		return err
	}
	// A stream socket may take a large frame in parts; the descriptors
	// went with the first.
	if n < len(b) {
		_, err = c.Write(b[n:])
	}
	return err
}

// readFrame reads one message of at most limit bytes and takes up to
// maxFiles descriptors sent with it; the kernel drops any others (with
// maxFiles 0, all: the server's side).
func readFrame(c *net.UnixConn, limit, maxFiles int) (agentMsg, []*os.File, error) {
	var m agentMsg
	var hdr [4]byte
	var files []*os.File
	got, lost := 0, false
	if maxFiles > 0 {
		oob := make([]byte, unix.CmsgSpace(maxFiles*4))
		n, oobn, flags, _, err := c.ReadMsgUnix(hdr[:], oob)
		if err != nil {
			return m, nil, err
		}
		got = n
		lost = flags&unix.MSG_CTRUNC != 0
		if files, err = parseRights(oob[:oobn]); err != nil {
			return m, nil, err
		}
	}
	if _, err := io.ReadFull(c, hdr[got:]); err != nil {
		closeFiles(files)
		return m, nil, err
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size == 0 || size > uint32(limit) {
		closeFiles(files)
		return m, nil, fmt.Errorf("%w: %d bytes", errFrame, size)
	}
	payload := make([]byte, size)
	if _, err := io.ReadFull(c, payload); err != nil {
		closeFiles(files)
		return m, nil, err
	}
	if err := json.Unmarshal(payload, &m); err != nil {
		closeFiles(files)
		return m, nil, fmt.Errorf("%w: %v", errFrame, err)
	}
	m.filesLost = lost
	return m, files, nil
}

func parseRights(oob []byte) ([]*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var files []*os.File
	for _, cm := range msgs {
		fds, err := unix.ParseUnixRights(&cm)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "passed"))
		}
	}
	return files, nil
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// proxyListener is the listener an agent sends with ready under an
// allowlist (files, taken from the frame, are its now), once it checked
// that it is what the agent was to open: a listening TCP socket on
// 127.0.0.1.
func proxyListener(files []*os.File) (net.Listener, error) {
	defer closeFiles(files)
	if len(files) != 1 {
		return nil, fmt.Errorf("%w: ready with %d descriptors, not the proxy's listener", errFrame, len(files))
	}
	rc, err := files[0].SyscallConn()
	if err != nil {
		return nil, err
	}
	var bad error
	err = rc.Control(func(fd uintptr) {
		for _, o := range []struct{ opt, want int }{
			{unix.SO_DOMAIN, unix.AF_INET}, {unix.SO_TYPE, unix.SOCK_STREAM},
			{unix.SO_PROTOCOL, unix.IPPROTO_TCP}, {unix.SO_ACCEPTCONN, 1},
		} {
			if v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, o.opt); err != nil || v != o.want {
				bad = errors.New("not a listening TCP socket")
				return
			}
		}
		sa, err := unix.Getsockname(int(fd))
		if in4, ok := sa.(*unix.SockaddrInet4); err != nil || !ok || in4.Addr != [4]byte{127, 0, 0, 1} {
			bad = errors.New("not on 127.0.0.1")
		}
	})
	if err = cmp.Or(err, bad); err != nil {
		return nil, fmt.Errorf("%w: the proxy's listener: %v", errFrame, err)
	}
	return net.FileListener(files[0])
}

// listenProxy opens the listener of an allowlist's proxy on 127.0.0.1,
// on a port of the kernel's choice, in the caller's network namespace:
// plain TCP (Go listens with MPTCP by default), which is what a command
// held to the proxy may connect with and what the server checks an
// agent's listener for.
func listenProxy() (*net.TCPListener, error) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("the proxy's listener: %w", err)
	}
	return ln.(*net.TCPListener), nil
}
