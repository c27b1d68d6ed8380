package jail

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Call is one command for a Runner to run.
type Call struct {
	Argv []string // program and arguments; Argv[0] is looked up in Env's PATH
	Env  []string // the complete environment, KEY=VALUE
	Dir  string   // working directory, an absolute path
	// The command's standard streams; the runner closes nothing of them.
	Stdin, Stdout, Stderr *os.File
	// ViewGen, under --overlay, is the number of the project's state the
	// call must see (the server's watch of it): a session agent runs it
	// in a view made at that number, or makes one; 0 is a view of the
	// call's own, made ahead and untouched until it runs.
	ViewGen uint64
	// TTY: the streams are one terminal, which becomes the command's
	// controlling terminal where the runner forks the command itself (a
	// session agent); elsewhere it has the terminal as its streams only.
	TTY bool
	// Launch, for a runner that starts each command itself (Agents is
	// false), forks it from a thread the caller prepared (moved into the
	// call's cgroups); nil: a fresh one.
	Launch Launcher
}

// Exit is how a command ended.
type Exit struct {
	Code   int            // its exit status; -1 when a signal ended it
	Signal syscall.Signal // the signal that ended it, or 0
	// RefusedWrite is the first path of Spec.Project the jail refused the
	// command a write to, and RefusedWrites how many it refused, as a
	// session agent's write watch saw them (none without agents).
	RefusedWrite  string
	RefusedWrites int
	// Stopped, when set, says why the session agent ended the command:
	// the host moved a file or directory its read view granted into a
	// denied path while it ran, or it held more inotify watches than its
	// share of the user's.
	Stopped string
	// ViewBehind, under --overlay, is when the view the command ran in
	// was made, when that is an older state of the project than the
	// call asked for: another call of the session ran in it (a job), and
	// no second view is made over the session's layer beside it. Zero:
	// the call saw the state it asked for.
	ViewBehind time.Time
}

// Process is a started command.
type Process struct {
	// Wait waits for the command and every process it started to be gone.
	// An error means the runner lost the command (its agent ended).
	Wait func() (Exit, error)
	// Kill kills the command and everything it started; Wait returns soon
	// after.
	Kill func()
	// Tree, when set, counts the processes of the command wherever they
	// went and their memory, as last seen (at most TreeInterval ago);
	// when nil, the caller counts the descendants of Pid.
	Tree func() Count
	// Signal sends sig to every process of the command that the runner
	// can reach: under a session agent every process of the call, else
	// the command's process group.
	Signal func(sig syscall.Signal) error
	Pid    int
	// Placement is what the Spec's Placer made for the thread that forked
	// the command (the call's own cgroups), or nil. The caller removes it
	// once the call is over.
	Placement Placement
}

// Count is what a running command holds, as its runner counts it.
type Count struct {
	// Tasks are its processes and their threads: each takes a pid.
	Tasks int
	// Memory is in bytes: the resident memory of its processes, the
	// memfds they hold open, and Shared.
	Memory int64
	// Shared is what, of Memory, the sandbox's own shared memory holds
	// (bubblewrap's /dev/shm, System V segments): it outlives calls, and
	// counts in the memory of each call of the sandbox.
	Shared int64
}

// Placement is what a Placer made to hold one call of a session agent.
type Placement interface {
	// Remove undoes it once the call (or its agent) is over: in the
	// background, after what it holds is gone, never killing the agent.
	Remove()
}

// Placer moves the thread tid of the session agent agentPid (both ids in
// the host) into what will hold one call of the agent, the call's own
// cgroups, ahead of that call: a move is slow (an RCU grace period), so
// the agent keeps threads ready and the server places them between calls.
type Placer func(agentPid, tid int) (Placement, error)

// Runner runs the commands of one session under one policy: the Spec it
// was made from, but for the command itself.
type Runner interface {
	// Run starts c. It returns ErrNotFound when the program does not
	// exist in the jail's view.
	Run(c Call) (Process, error)
	// Close kills every command it runs and ends it; it is idempotent.
	Close()
	// Err is nil while the runner can run commands, and why it cannot
	// once it has ended (an agent that died or was killed).
	Err() error
}

// ErrNotFound reports a program the jail does not have.
var ErrNotFound = errors.New("not found in the jail's PATH")

// SharedMemoryError is a call a session agent did not start: its
// sandbox's own shared memory (Count.Shared), which outlives calls, holds
// more than Spec.MaxMemory. Only ending the agent frees what the commands
// left there.
type SharedMemoryError struct{ Bytes int64 }

func (e *SharedMemoryError) Error() string {
	return fmt.Sprintf("the sandbox's shared memory (/dev/shm and System V segments) holds %d bytes, over its bound", e.Bytes)
}

// NoMemoryError is a call whose start the kernel refused for want of
// memory (ENOMEM from its fork or exec): under a memory bound, the bound
// was reached, by the calls running at once or by what the sandbox's
// shared memory holds (Shared bytes, where the sandbox has its own).
type NoMemoryError struct {
	Shared int64
	Err    string
}

func (e *NoMemoryError) Error() string { return e.Err }

// errRunnerClosed is the Err of a runner that was closed.
var errRunnerClosed = errors.New("closed")

// agentStartError is why an agent did not get ready: the first line it
// (or bwrap) wrote when it has one, what went wrong on the socket else.
type agentStartError struct {
	err  error
	line string
}

func (e *agentStartError) Error() string {
	if e.line != "" {
		return "the session agent did not start: " + e.line
	}
	return "the session agent could not confine itself: " + e.err.Error()
}

func (e *agentStartError) Unwrap() error { return e.err }

// startLine is the first line an agent that did not start wrote, or "".
func startLine(err error) string {
	var ase *agentStartError
	if errors.As(err, &ase) {
		return ase.line
	}
	return ""
}
