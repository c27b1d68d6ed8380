package limits

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/jail-mcp/jail-mcp/jail"
)

// A pool keeps up to spareLaunchers launchers ready and makes more, in
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

// Config is what a pool prepares its launchers' cgroups for.
type Config struct {
	// MaxProcs and MaxMemory bound a command (--max-procs,
	// --max-memory); 0 is no bound.
	MaxProcs, MaxMemory int64
	// Agents says that the backend runs commands in session agents,
	// whose cgroups hold the agent and its calls.
	Agents bool
	// OneCall is for a server that runs one command and ends (jail-mcp
	// run): one launcher is prepared at once, no spare after it.
	OneCall bool
	// Log takes what the pool could not do in the background (a stale
	// cgroup left); nil logs nothing.
	Log *slog.Logger
}

// Pool is the server's cgroups and a few launchers prepared in them in
// the background, so that a call takes one at once and the slow cgroup
// move happens between calls.
type Pool struct {
	cfg Config
	cg  *cgroupSet

	mu      sync.Mutex // guards the fields below
	spare   []*Launcher
	want    int           // how many spares to keep
	filling bool          // a goroutine is preparing spares
	ready   chan struct{} // closed when the current filling round ends
	seq     uint64
	closed  bool
	work    sync.WaitGroup // filling rounds and removals of ended calls' cgroups
}

// NewPool makes the server's cgroups and begins preparing launchers in
// them, or returns nil where the server cannot make cgroups: the
// watchdog alone bounds commands then.
func NewPool(cfg Config) *Pool {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cg := newCgroups(log)
	if cg == nil {
		return nil
	}
	p := &Pool{cfg: cfg, cg: cg}
	// The first call finds its launcher ready, or nearly: the slow
	// cgroup move overlaps opening the session. One call needs no
	// spare beyond it, nor do session agents, which start once per
	// session and policy.
	spares := spareLaunchers
	if cfg.OneCall || cfg.Agents {
		spares = 1
	}
	p.start(spares)
	return p
}

// start begins preparing spares as soon as the pool exists, so that the
// first call's cgroup move overlaps opening its session.
func (p *Pool) start(want int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.want = want
	p.fillLocked()
}

// Take returns a prepared launcher, nil where the server has no cgroups
// (a nil pool). When none is ready but one is being prepared, it waits
// for that one rather than paying a second cgroup move; otherwise it
// prepares one now. Then the spares are refilled in the background.
func (p *Pool) Take() *Launcher {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	for len(p.spare) == 0 && p.filling && !p.closed {
		ready := p.ready
		p.mu.Unlock()
		<-ready
		p.mu.Lock()
	}
	var l *Launcher
	if n := len(p.spare); n > 0 {
		l, p.spare = p.spare[n-1], p.spare[:n-1]
	}
	if p.cfg.OneCall {
		p.want = 0
	}
	p.fillLocked()
	p.mu.Unlock()
	if l == nil {
		l = p.prepare()
	}
	return l
}

// fillLocked starts a filling round when spares run low and none runs.
func (p *Pool) fillLocked() {
	if p.filling || p.closed || len(p.spare) >= min(p.want, refillBelow) {
		return
	}
	p.filling = true
	p.ready = make(chan struct{})
	p.work.Go(func() {
		for {
			l := p.prepare()
			p.mu.Lock()
			if l == nil || p.closed {
				p.filling = false
				close(p.ready)
				p.mu.Unlock()
				if l != nil {
					l.discard()
				}
				return
			}
			p.spare = append(p.spare, l)
			done := len(p.spare) >= p.want
			if done {
				p.filling = false
				close(p.ready)
			}
			p.mu.Unlock()
			if done {
				return
			}
		}
	})
}

func (p *Pool) prepare() *Launcher {
	p.mu.Lock()
	p.seq++
	id := fmt.Sprintf("c%d", p.seq)
	p.mu.Unlock()
	return p.cg.prepare(id, p.procLimit(), p.memLimit())
}

// memLimit is the memory bound of the cgroups a launcher is prepared in:
// a session agent's hold its calls (together to --max-memory, in cgroups
// nested in the agent's) and the agent itself.
func (p *Pool) memLimit() int64 {
	if p.cfg.MaxMemory > 0 && p.cfg.Agents {
		return p.cfg.MaxMemory + agentMemory
	}
	return p.cfg.MaxMemory
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
func (p *Pool) procLimit() int64 {
	if p.cfg.MaxProcs <= 0 {
		return 0
	}
	if p.cfg.Agents {
		return callsProcs(p.cfg.MaxProcs) + agentThreads
	}
	return p.cfg.MaxProcs + 3
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

// Remove removes a call's cgroups in the background, once its last
// process is gone; Close waits for it.
func (p *Pool) Remove(cc *Group) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		go cc.remove() // Close is already waiting: no new work for it
		return
	}
	p.work.Go(cc.remove)
}

// Close stops preparing launchers, waits for the round in flight and for
// the removal of ended calls' cgroups, discards the spares, and removes
// the server's cgroups. A nil pool has nothing to close.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.work.Wait()
	p.mu.Lock()
	spare := p.spare
	p.spare = nil
	p.mu.Unlock()
	for _, l := range spare {
		l.discard()
	}
	p.cg.close()
}

// Dirs are the server's own cgroups, under which each call gets its own:
// the pids and the memory one, each "" when absent.
func (p *Pool) Dirs() (pids, memory string) { return p.cg.pids, p.cg.memory }
