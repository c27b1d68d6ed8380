//go:build !linux

package limits

import (
	"log/slog"

	"github.com/jail-mcp/jail-mcp/jail"
)

// cgroups are Linux only: elsewhere the watchdog alone bounds commands.
type cgroupSet struct{ pids, memory string }

// Group is one call's cgroups: never any here.
type Group struct{ enforced map[Bound]bool }

// Launcher is a thread in a call's cgroups: never any here.
type Launcher struct{ cc *Group }

func newCgroups(*slog.Logger) *cgroupSet                                     { return nil }
func (cs *cgroupSet) close()                                                 {}
func (cs *cgroupSet) prepare(id string, maxProcs, maxMemory int64) *Launcher { return nil }

// Mark is what a cgroup's counters said: nothing here.
type Mark struct{}

// Mark marks nothing here.
func (cc *Group) Mark() Mark { return Mark{} }

// ExceededSince names no bound here.
func (cc *Group) ExceededSince(Mark) Bound { return "" }

func (cc *Group) remove() {}

// Group is the call's cgroups the launcher's thread is in.
func (l *Launcher) Group() *Group { return l.cc }

// Launch runs nothing here.
func (l *Launcher) Launch(fn func()) {}

func (l *Launcher) discard() {}

// CallPlacement is the cgroups of one call of a session agent: never any
// here.
type CallPlacement struct {
	cc   *Group
	mark Mark
}

// Remove does nothing here.
func (p *CallPlacement) Remove() {}

// Group is the call's cgroups.
func (p *CallPlacement) Group() *Group { return p.cc }

// Mark is the counters of the call's cgroups when the call got them.
func (p *CallPlacement) Mark() Mark { return p.mark }

// AgentPlacer places nothing here.
func (pool *Pool) AgentPlacer(*Group) jail.Placer { return nil }

// Leftovers lists none: cgroups are Linux only.
func Leftovers() LeftoverCgroups { return LeftoverCgroups{Owners: []string{}, Dirs: []string{}} }
