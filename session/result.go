package session

import (
	"time"

	"github.com/jail-mcp/jail-mcp/session/egress"
	"github.com/jail-mcp/jail-mcp/session/ledger"
	"github.com/jail-mcp/jail-mcp/session/limits"
	"github.com/jail-mcp/jail-mcp/session/output"
)

// Stream is the outcome of one captured output stream (session/output).
type Stream = output.Stream

// Result is the outcome of a command that ran.
type Result struct {
	// End is how it ended; Limit the bound it went over (End OverBound
	// or TimedOut), else a bound it met on its own way out:
	// limits.BoundFileSize (a write refused), limits.BoundDisk (the jail
	// found full once it ended).
	End          End
	Limit        limits.Bound
	ExitCode     int // -1 when killed by a signal
	Signal       string
	SignalNumber int
	// SharedMemory is, for a command the watchdog killed over
	// --max-memory, how many bytes of the memory it counted the session's
	// shared memory held (its /dev/shm and System V segments), which
	// outlives the call.
	SharedMemory int64
	// AgentRestarted says why the session agent of the call's policy had
	// ended, when this call started a new one.
	AgentRestarted string
	// AgentLost says why the session agent ended during the call, which
	// took the command with it.
	AgentLost string
	// RefusedWrite is the first path of the project the jail refused the
	// command a write to (the project is read-only), RefusedWrites how
	// many it refused; seen by the session agent's write watch, so empty
	// on a backend without agents.
	RefusedWrite  string
	RefusedWrites int
	// Stopped, when set, says why the session agent ended the command:
	// the host moved what its read view granted into a denied path while
	// it ran (a rule of the view would have let it read there), or it held
	// more inotify watches than its share of the user's.
	Stopped string
	// Refusals are the connections the proxy of an allowlist refused
	// while the command ran (in its session agent, all of its calls').
	Refusals []egress.Refusal
	// Project is what the call changed in the project view (--overlay):
	// in the session's layer, not on the host; nil without the view.
	// Calls that overlap share what changed meanwhile: each change is
	// told once, in the first of their results.
	Project *ledger.Changes
	// Conflicts are the paths the host changed after the session's
	// layer copied them: commands see the session's copy.
	Conflicts []ledger.Conflict
	// Refreshed are the copies dropped before the call, which held the
	// host's bytes unchanged: the call saw the host's files.
	Refreshed []string
	// ViewBehind, when set, is the state of the project the call saw:
	// the host's as it was then, older than the call asked for, as a call
	// of the session that still ran (a job) held that view (--overlay).
	ViewBehind time.Time
	Stdout     Stream
	Stderr     Stream
	OutputPath string // host path of the directory holding the whole output, when cut
	Duration   time.Duration
	Timeout    time.Duration // the timeout that applied
	Session    string
	Jail       string
	Backend    string
	Confined   bool
}

// finishOutput puts the call's output in res: what the captures hold, or
// (jail-mcp run, whose output went to its own writers) the byte counts.
func (s *Session) finishOutput(res *Result, out *output.Call, req Request, counted [2]*counter) {
	var where string
	res.Stdout, res.Stderr, where = out.Finish(s.Path)
	if req.Stdout != nil {
		res.Stdout = Stream{Bytes: counted[0].n}
	}
	if req.Stderr != nil {
		res.Stderr = Stream{Bytes: counted[1].n}
	}
	if where != "" {
		res.OutputPath = where
	}
}

// checkDiskAfter tells the call during which the jail crossed its disk
// bound, when the watchdog has not caught it (a fast writer can fill a
// jail between two of its looks): the usage after the call, its kept
// output included. Where the usage watch keeps it, the look costs what
// the call changed; elsewhere it is the walk of the last second.
func (s *Session) checkDiskAfter(res *Result) {
	cfg := &s.m.cfg
	if cfg.MaxDisk <= 0 && cfg.MaxFiles <= 0 || res.Limit != "" {
		return
	}
	if u, err := s.diskUsage(limits.DiskAge); err == nil {
		if b := cfg.diskOver(u); b != "" {
			res.Limit = b
		}
	}
}
