package session

import (
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/jailfs"
	"github.com/jail-mcp/jail-mcp/session/limits"
)

// watchBounds starts the watchdog on a call of s: its processes are counted by
// tree, or are the descendants of root (bwrap, or the command itself)
// when tree is nil; cc are its cgroups (or its agent's, shared), mark
// their counters when it started. The returned function stops it.
func (m *Manager) watchBounds(s *Session, root int, tree func() jail.Count, cc *limits.Group, mark limits.Mark, shared bool, hit chan<- limits.Bound) (stop func()) {
	c := limits.Call{Root: root, Tree: tree, Group: cc, Mark: mark, Shared: shared, MaxProcs: m.cfg.MaxProcs, MaxMemory: m.cfg.MaxMemory, Hit: hit}
	if m.cfg.MaxDisk > 0 || m.cfg.MaxFiles > 0 {
		c.Disk = jailDisk{s}
	}
	return m.dog.Watch(c)
}

// jailDisk is a session's jail as the watchdog holds it to --max-disk and
// --max-files: by the latest look at its usage, taken off the watchdog's
// loop, one look at a time per jail (Session.meter), so that a walk of a
// deep or large jail does not hold up the bounds of every other call.
type jailDisk struct{ s *Session }

func (d jailDisk) Over() limits.Bound {
	if u, ok := d.s.meter(0); ok {
		return d.s.m.cfg.diskOver(u)
	}
	return ""
}

// diskOver names the bound of the operator's that u, a jail's usage, is
// over, or "".
func (cfg *Config) diskOver(u jailfs.Usage) limits.Bound {
	switch {
	case cfg.MaxDisk > 0 && u.Bytes > cfg.MaxDisk:
		return limits.BoundDisk
	case cfg.MaxFiles > 0 && u.Files > cfg.MaxFiles:
		return limits.BoundFiles
	}
	return ""
}
