package session

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// spareLaunchers is how many prepared launchers a manager keeps ready.
const spareLaunchers = 2

// launchers keeps a few launchers prepared in the background, so that a
// call takes one at once and the slow cgroup move happens between calls.
type launchers struct {
	spare    chan *launcher
	filling  atomic.Bool
	seq      atomic.Uint64
	removing sync.WaitGroup // cgroups of ended calls on their way out
}

// take returns a prepared launcher, preparing one now when none is ready,
// and refills the spares in the background; nil where the server has no
// cgroups.
func (m *Manager) takeLauncher() *launcher {
	if m.cg == nil {
		return nil
	}
	var l *launcher
	select {
	case l = <-m.ls.spare:
	default:
		l = m.prepareLauncher()
	}
	if !m.cfg.OneCall {
		m.refillLaunchers()
	}
	return l
}

// removeCgroups removes a call's cgroups in the background, once its last
// process is gone; Close waits for it.
func (m *Manager) removeCgroups(cc *callCgroup) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		go cc.remove() // Close is already waiting: no new work for it
		return
	}
	m.ls.removing.Go(cc.remove)
}

func (m *Manager) prepareLauncher() *launcher {
	id := fmt.Sprintf("c%d", m.ls.seq.Add(1))
	return m.cg.prepare(id, m.cfg.MaxProcs, m.cfg.MaxMemory)
}

func (m *Manager) refillLaunchers() {
	if !m.ls.filling.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer m.ls.filling.Store(false)
		for len(m.ls.spare) < cap(m.ls.spare) {
			l := m.prepareLauncher()
			if l == nil {
				return
			}
			select {
			case m.ls.spare <- l:
			default:
				l.discard()
				return
			}
		}
	}()
}

// closeLaunchers discards the prepared launchers.
func (m *Manager) closeLaunchers() {
	if m.cg == nil {
		return
	}
	for {
		select {
		case l := <-m.ls.spare:
			l.discard()
		default:
			return
		}
	}
}
