package jail

import "errors"

// Refusing is the backend of a host where no backend confines and the
// operator chose --fallback fail: it refuses every command with why and
// the command that fixes it, so that callers need no special case.
type Refusing struct {
	Err *UnavailableError
}

func (r Refusing) Name() string                { return r.Err.Backend }
func (r Refusing) Confined() bool              { return false }
func (r Refusing) Agents() bool                { return false }
func (r Refusing) Credentials() CredentialMode { return CopyCredentials }

func (r Refusing) Runner(Spec, Launcher) (Runner, error) { return nil, r.Err }

func (r Refusing) Guarantees() Guarantees {
	return Guarantees{Kept: []Promise{{ID: 8, Name: promises[8], Note: "no command runs"}}, NotKept: []Promise{}}
}

// IsRefusing reports whether b refuses every command.
func IsRefusing(b Backend) bool {
	_, ok := b.(Refusing)
	return ok
}

// ErrAgentEnded is wrapped by the error of a call whose session agent
// ended under it, and by a runner's Err once its agent ended.
var ErrAgentEnded = errors.New("the session agent ended")

// ErrAgentLost is wrapped by the error of a runner whose session agent
// went on its own (killed from outside, crashed), not closed or timed out
// by the server. An error of Run that wraps it means the agent was lost
// before it said the command started: the command never started, or went
// down with the agent within moments of its exec; the call may run on a
// new agent.
var ErrAgentLost = errors.New("the session agent was lost")

// Egress: no command runs.
func (r Refusing) Egress() error { return r.Err }
