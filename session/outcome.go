package session

import (
	"errors"
	"fmt"
	"time"

	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/limits"
)

// End is how a command ended: exactly one, decided once, by settle, when
// it ends.
type End int

const (
	// Exited: on its own, with ExitCode.
	Exited End = iota
	// Signalled: killed by a signal the server did not send (Signal).
	Signalled
	// TimedOut: killed at its time bound (Limit is limits.BoundTimeout).
	TimedOut
	// OverBound: killed for going over Limit.
	OverBound
	// Cancelled: killed because its call was cancelled.
	Cancelled
	// AgentLost: its session agent ended under it and took it along.
	AgentLost
)

// String is e as metrics name it.
func (e End) String() string {
	switch e {
	case Exited:
		return "exited"
	case Signalled:
		return "signalled"
	case TimedOut:
		return "timed_out"
	case OverBound:
		return "over_bound"
	case Cancelled:
		return "cancelled"
	case AgentLost:
		return "agent_lost"
	}
	return "unknown"
}

// RefusedWriteNote is the line a result adds when the jail refused the
// command a write in the read-only project: the path, and the way out;
// "" when it refused none.
func (r *Result) RefusedWriteNote() string {
	if r.RefusedWrites == 0 {
		return ""
	}
	more := ""
	switch n := r.RefusedWrites - 1; {
	case n == 1:
		more = " (and 1 more write there)"
	case n > 1:
		more = fmt.Sprintf(" (and %d more writes there)", n)
	}
	return fmt.Sprintf("write refused: %s is in the project, which is read-only in the jail%s; write under $HOME (the session's jail) instead, for instance a copy of the project", r.RefusedWrite, more)
}

// settle decides how a command ended from what stopped it (stopped: the
// timeout, a bound, the call's cancellation, or nothing: Exited), the
// bound the kernel enforced by itself meanwhile (kernel), and its exit;
// it sets End, Limit, ExitCode and Signal. The agent's loss wins over the
// rest (it took the command with it), then the server's timeout, then a
// bound, then the cancellation. A write stopped at the per-file bound is
// the command's own end with Limit limits.BoundFileSize: the command was
// not killed for it (it got SIGXFSZ, or its shell reports 128+SIGXFSZ).
func (r *Result) settle(stopped End, bound, kernel limits.Bound, exit jail.Exit, lost error) {
	r.ExitCode = exit.Code
	r.RefusedWrite, r.RefusedWrites = exit.RefusedWrite, exit.RefusedWrites
	r.Stopped, r.ViewBehind = exit.Stopped, exit.ViewBehind
	if exit.Signal != 0 {
		r.ExitCode = -1
		r.Signal, r.SignalNumber = signalName(exit.Signal), int(exit.Signal)
	}
	switch {
	case lost != nil:
		r.End, r.AgentLost = AgentLost, lost.Error()
	case stopped == TimedOut:
		r.End, r.Limit = TimedOut, limits.BoundTimeout
	case stopped == OverBound:
		r.End, r.Limit = OverBound, bound
	case kernel != "":
		r.End, r.Limit = OverBound, kernel
	case stopped == Cancelled:
		r.End = Cancelled
	case exit.Signal != 0:
		r.End = Signalled
	default:
		r.End = Exited
	}
	xfsz := r.SignalNumber == fileSizeSignal || r.Signal == "" && r.ExitCode == 128+fileSizeSignal
	if xfsz && (r.Limit == "" || r.Limit == limits.BoundDisk) {
		// A file stopped at its bound can fill the jail too (the two
		// bounds are one size): what ended the command is what it says.
		r.Limit = limits.BoundFileSize
		r.End = Exited
		if r.Signal != "" {
			r.End = Signalled
		}
	}
}

// Failed says whether the result is an error for the caller: the command
// did not exit 0 on its own, or it went over a bound.
func (r *Result) Failed() bool {
	return r.End != Exited || r.ExitCode != 0 || r.Limit != ""
}

// LimitAfterExit says that Limit (limits.BoundDisk, limits.BoundFiles)
// was found crossed once the command had ended, between two looks of the
// watchdog: it was not killed for it, and no call runs until the jail is
// back under the bound.
func (r *Result) LimitAfterExit() bool {
	return (r.Limit == limits.BoundDisk || r.Limit == limits.BoundFiles) && r.End != OverBound
}

// ExitStatus is the command's status as a shell reports it: its exit
// code, or 128 plus the signal that killed it.
func (r *Result) ExitStatus() int {
	if r.SignalNumber > 0 {
		return 128 + r.SignalNumber
	}
	return r.ExitCode
}

// Status is one line that says how the command ended, for a model or a
// person to act on.
func (r *Result) Status() string {
	d := r.Duration.Round(time.Millisecond)
	var s string
	switch r.End {
	case TimedOut:
		return fmt.Sprintf("timed out after %v (timeout %v); the command and everything it started were killed", d, r.Timeout)
	case OverBound:
		s = fmt.Sprintf("killed after %v: the command went over its %s bound (%s); it and everything it started were killed", d, r.Limit, r.Limit.Flag())
		if r.SharedMemory > 0 {
			s += fmt.Sprintf("; %d bytes of it are the session's shared memory (/dev/shm, System V segments), which outlives calls: remove what is not needed there (rm, ipcrm) or call jail_reset", r.SharedMemory)
		}
		return s
	case Cancelled:
		s = fmt.Sprintf("cancelled after %v; the command and everything it started were killed", d)
	case AgentLost:
		s = fmt.Sprintf("lost after %v with its session agent", d)
	case Signalled:
		s = fmt.Sprintf("killed by %s after %v", r.Signal, d)
	default:
		s = fmt.Sprintf("exit %d in %v", r.ExitCode, d)
	}
	switch {
	case r.LimitAfterExit():
		s += fmt.Sprintf(", but the jail went over its %s bound (%s) during the call: no command runs in it until files are removed or jail_reset is called", r.Limit, r.Limit.Flag())
	case r.Limit == limits.BoundFileSize:
		s += " (a process wrote past the per-file size bound, --max-disk)"
	}
	return s
}

// Refusal is the one line that says why a command did not run: a request
// the caller must fix, no jail that confines here, or a start that failed.
func Refusal(err error) string {
	switch RefusalKind(err) {
	case "input":
		return "refused: " + err.Error()
	case "no_jail":
		return "refused: no jail can confine commands here: " + err.Error()
	}
	return "could not start the command: " + err.Error()
}

// RefusalKind names why err kept a command from running: "input" (a
// request the caller must fix), "no_jail" (nothing confines here: the
// server fails closed), or "start" (its start failed).
func RefusalKind(err error) string {
	var inputErr *InputError
	switch {
	case errors.As(err, &inputErr):
		return "input"
	case errors.Is(err, jail.ErrUnavailable):
		return "no_jail"
	}
	return "start"
}
