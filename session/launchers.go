package session

import (
	"fmt"
	"sync"

	"github.com/jail-mcp/jail-mcp/jail"
)

// A manager keeps up to spareLaunchers launchers ready and makes more, in
// one round, once fewer than refillBelow are left. Moving threads into
// cgroups takes a lock that every fork, exec and exit of the host waits for
// (cgroup_threadgroup_rwsem), across an RCU grace period: one move slows
// down every call in flight. In a round, the moves after the first find
// the grace period passed and cost little, so a round of several
// disturbs calls once where a move per call disturbed each (measured:
// 1.1 ms a call of /bin/true).
const (
	spareLaunchers = 8
	refillBelow    = 3
)

// launchers keeps a few launchers prepared in the background, so that a
// call takes one at once and the slow cgroup move happens between calls.
type launchers struct {
	mu      sync.Mutex // guards the fields below
	spare   []*launcher
	want    int           // how many spares to keep
	filling bool          // a goroutine is preparing spares
	ready   chan struct{} // closed when the current filling round ends
	seq     uint64
	closed  bool
	work    sync.WaitGroup // filling rounds and removals of ended calls' cgroups
}

// startLaunchers begins preparing spares as soon as the manager exists, so
// that the first call's cgroup move overlaps opening its session.
func (m *Manager) startLaunchers(want int) {
	m.ls.mu.Lock()
	defer m.ls.mu.Unlock()
	m.ls.want = want
	m.fillLocked()
}

// takeLauncher returns a prepared launcher, nil where the server has no
// cgroups. When none is ready but one is being prepared, it waits for that
// one rather than paying a second cgroup move; otherwise it prepares one
// now. Then the spares are refilled in the background.
func (m *Manager) takeLauncher() *launcher {
	if m.cg == nil {
		return nil
	}
	m.ls.mu.Lock()
	for len(m.ls.spare) == 0 && m.ls.filling && !m.ls.closed {
		ready := m.ls.ready
		m.ls.mu.Unlock()
		<-ready
		m.ls.mu.Lock()
	}
	var l *launcher
	if n := len(m.ls.spare); n > 0 {
		l, m.ls.spare = m.ls.spare[n-1], m.ls.spare[:n-1]
	}
	if m.cfg.OneCall {
		m.ls.want = 0
	}
	m.fillLocked()
	m.ls.mu.Unlock()
	if l == nil {
		l = m.prepareLauncher()
	}
	return l
}

// fillLocked starts a filling round when spares run low and none runs.
func (m *Manager) fillLocked() {
	if m.ls.filling || m.ls.closed || len(m.ls.spare) >= min(m.ls.want, refillBelow) {
		return
	}
	m.ls.filling = true
	m.ls.ready = make(chan struct{})
	m.ls.work.Go(func() {
		for {
			l := m.prepareLauncher()
			m.ls.mu.Lock()
			if l == nil || m.ls.closed {
				m.ls.filling = false
				close(m.ls.ready)
				m.ls.mu.Unlock()
				if l != nil {
					l.discard()
				}
				return
			}
			m.ls.spare = append(m.ls.spare, l)
			done := len(m.ls.spare) >= m.ls.want
			if done {
				m.ls.filling = false
				close(m.ls.ready)
			}
			m.ls.mu.Unlock()
			if done {
				return
			}
		}
	})
}

func (m *Manager) prepareLauncher() *launcher {
	m.ls.mu.Lock()
	m.ls.seq++
	id := fmt.Sprintf("c%d", m.ls.seq)
	m.ls.mu.Unlock()
	return m.cg.prepare(id, m.procLimit(), m.memLimit())
}

// memLimit is the memory bound of the cgroups a launcher is prepared in:
// a session agent's hold its calls (together to --max-memory, in cgroups
// nested in the agent's) and the agent itself.
func (m *Manager) memLimit() int64 {
	if m.cfg.MaxMemory > 0 && m.cfg.Backend.Agents() {
		return m.cfg.MaxMemory + agentMemory
	}
	return m.cfg.MaxMemory
}

// agentMemory is what a session agent's cgroups allow beyond --max-memory
// for the agent itself.
const agentMemory = 256 << 20

// procLimit is the pids.max of the cgroups a launcher is prepared in.
// cgroup v1 counts threads: a command on its own shares its cgroups with
// bwrap, bwrap's init and the thread that forks bwrap; a session agent's
// hold the agent's own threads (the Go runtime's, and one per call it
// runs), its guard or bwrap and its init, and every call of the session
// together.
func (m *Manager) procLimit() int64 {
	if m.cfg.MaxProcs <= 0 {
		return 0
	}
	if m.cfg.Backend.Agents() {
		return callsProcs(m.cfg.MaxProcs) + agentThreads
	}
	return m.cfg.MaxProcs + 3
}

// callsProcs is the pids.max of a session agent's calls together: twice
// what one call may have (its processes and its thread), so that a call
// at its bound leaves a whole one to the others (a neighbour's fork is
// not refused for it), plus the threads waiting for calls.
func callsProcs(maxProcs int64) int64 {
	if maxProcs <= 0 {
		return 0
	}
	return 2*(maxProcs+1) + jail.AgentSpares
}

// agentThreads is what a session agent's cgroups allow beyond --max-procs
// for the agent itself.
const agentThreads = 64

// removeCgroups removes a call's cgroups in the background, once its last
// process is gone; Close waits for it.
func (m *Manager) removeCgroups(cc *callCgroup) {
	m.ls.mu.Lock()
	defer m.ls.mu.Unlock()
	if m.ls.closed {
		go cc.remove() // Close is already waiting: no new work for it
		return
	}
	m.ls.work.Go(cc.remove)
}

// closeLaunchers stops preparing launchers, waits for the round in flight
// and for the removal of ended calls' cgroups, and discards the spares.
func (m *Manager) closeLaunchers() {
	if m.cg == nil {
		return
	}
	m.ls.mu.Lock()
	m.ls.closed = true
	m.ls.mu.Unlock()
	m.ls.work.Wait()
	m.ls.mu.Lock()
	spare := m.ls.spare
	m.ls.spare = nil
	m.ls.mu.Unlock()
	for _, l := range spare {
		l.discard()
	}
}
