//go:build !linux

package session

import (
	"log/slog"

	"github.com/jail-mcp/jail-mcp/jail"
)

// cgroups are Linux only: elsewhere the watchdog alone bounds commands.
type cgroupSet struct{}

type callCgroup struct{ enforced map[Bound]bool }

type launcher struct{ cc *callCgroup }

func newCgroups(*slog.Logger) *cgroupSet                                     { return nil }
func (cs *cgroupSet) close()                                                 {}
func (cs *cgroupSet) prepare(id string, maxProcs, maxMemory int64) *launcher { return nil }

type cgroupMark struct{}

func (cc *callCgroup) mark() cgroupMark               { return cgroupMark{} }
func (cc *callCgroup) exceededSince(cgroupMark) Bound { return "" }
func (cc *callCgroup) remove()                        {}
func (l *launcher) launch(fn func())                  {}
func (l *launcher) discard()                          {}

type callPlacement struct {
	cc   *callCgroup
	mark cgroupMark
}

func (p *callPlacement) Remove() {}

func (m *Manager) agentPlacer(*callCgroup) jail.Placer { return nil }

// Leftovers lists none: cgroups are Linux only.
func Leftovers() LeftoverCgroups { return LeftoverCgroups{Owners: []string{}, Dirs: []string{}} }
