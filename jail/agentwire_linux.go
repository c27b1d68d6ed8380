package jail

import (
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
// that needs them; it never accepts one from an agent: it reads with
// plain reads, so the kernel drops any an agent sends.

// agentMsg is every message of the protocol; T says which.
type agentMsg struct {
	T  string `json:"t"`
	ID uint64 `json:"id,omitempty"`

	// config (server to agent): the policy the agent confines itself to.
	Kind    string `json:"kind,omitempty"` // "bwrap" or "landlock"
	Jail    string `json:"jail,omitempty"`
	Network bool   `json:"network,omitempty"`
	ABI     int    `json:"abi,omitempty"` // Landlock ABI; 0: none
	Root    bool   `json:"root,omitempty"`
	// Egress: the port the agent forwards to the server's proxy from
	// inside the sandbox's network namespace (bwrap); 0: none.
	Egress int `json:"egress,omitempty"`

	// run (server to agent).
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	TTY  bool     `json:"tty,omitempty"`

	// reports (agent to server).
	Pid      int    `json:"pid,omitempty"`
	Procs    int    `json:"procs,omitempty"`
	RSS      int64  `json:"rss,omitempty"`
	Code     int    `json:"code,omitempty"`
	Signal   int    `json:"signal,omitempty"`
	Err      string `json:"err,omitempty"`
	NotFound bool   `json:"not_found,omitempty"`
}

// Message types.
const (
	msgConfig  = "config"  // server: confine yourself (descriptors: the jail, and the guard's pipe under landlock)
	msgReady   = "ready"   // agent: confined, serving
	msgRun     = "run"     // server: run a command (descriptors: stdin, stdout, stderr)
	msgStarted = "started" // agent: the command runs
	msgFailed  = "failed"  // agent: it could not start
	msgTree    = "tree"    // agent: its processes and their memory, now
	msgKill    = "kill"    // server: kill the call and everything it started
	msgSignal  = "signal"  // server: send Signal to every process of the call
	msgExited  = "exited"  // agent: it is over, and nothing of it is left
	msgStop    = "stop"    // server: end every call and exit
	msgError   = "error"   // agent: it cannot serve (it exits)
	msgDial    = "dial"    // agent: a connection to the proxy, for forwarded connection ID
	msgDialed  = "dialed"  // server: here it is (descriptor), or Err
)

// Frame bounds. The server's frames carry a command line and its
// environment, which the kernel bounds (ARG_MAX, a few MiB at most); an
// agent's carry a few numbers and one line of error, and an agent is not
// trusted: anything larger ends it.
const (
	maxServerFrame = 16 << 20
	maxAgentFrame  = 16 << 10
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

// readFrame reads one message of at most max bytes. With takeFiles it
// also takes the descriptors sent with it (the agent's side); without,
// any are dropped by the kernel (the server's side).
func readFrame(c *net.UnixConn, limit int, takeFiles bool) (agentMsg, []*os.File, error) {
	var m agentMsg
	var hdr [4]byte
	var files []*os.File
	got := 0
	if takeFiles {
		oob := make([]byte, unix.CmsgSpace(8*4))
		n, oobn, _, _, err := c.ReadMsgUnix(hdr[:], oob)
		if err != nil {
			return m, nil, err
		}
		got = n
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
