package session

import (
	"sync"
	"time"

	"github.com/jail-mcp/jail-mcp/jail"
)

// diskEvery is how many watchdog ticks pass between two walks of a jail
// whose usage the usage watch does not keep: the age of the walk a call's
// disk checks may take.
const diskEvery = 20

// watchdog enforces the process, memory, disk and file bounds of every
// running command of a manager with one scan of /proc a tick, however
// many commands run; it runs only while some command does.
type watchdog struct {
	mu      sync.Mutex
	watched map[*watched]bool
	running bool
}

type watched struct {
	s    *Session
	root int               // the process the descendants of which are the call's, when tree is nil
	tree func() jail.Count // the backend's count of the call's processes, or nil
	// memfds counts the memfds of root's descendants (tree nil).
	memfds memfdScan
	cc     *callCgroup // the call's cgroups (or its agent's), or nil
	mark   cgroupMark  // cc's counters when the call started
	// shared: cc is a session agent's, which its calls share, not the
	// call's own.
	shared bool
	hit    chan<- Bound // receives the name of the first bound exceeded
}

// watch starts watching a call: its processes are counted by tree, or
// are the descendants of root (bwrap, or the command itself) when tree is
// nil. The returned function stops it.
func (m *Manager) watch(s *Session, root int, tree func() jail.Count, cc *callCgroup, mark cgroupMark, shared bool, hit chan<- Bound) (stop func()) {
	w := &m.dog
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watched == nil {
		w.watched = map[*watched]bool{}
	}
	x := &watched{s: s, root: root, tree: tree, cc: cc, mark: mark, shared: shared && cc != nil, hit: hit}
	w.watched[x] = true
	if !w.running {
		w.running = true
		go m.watchLoop()
	}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.watched, x)
	}
}

func (m *Manager) watchLoop() {
	cfg := m.cfg
	w := &m.dog
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		<-t.C
		w.mu.Lock()
		if len(w.watched) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		roots := make([]*watched, 0, len(w.watched))
		for x := range w.watched {
			roots = append(roots, x)
		}
		w.mu.Unlock()

		var procs map[int]jail.Stat // scanned once a tick, only if some call needs it
		for _, x := range roots {
			// A session agent's call without cgroups of its own shares
			// the agent's: an event there may be another call's, so it is
			// held to its own bounds by its count, whatever the kernel
			// enforces for them all together.
			shared := x.shared
			if x.cc != nil && !shared {
				if lim := x.cc.exceededSince(x.mark); lim != "" {
					report(x, lim)
					continue
				}
			}
			countProcs := cfg.MaxProcs > 0 && (x.cc == nil || shared || !x.cc.enforced[BoundProcs])
			memory := cfg.MaxMemory > 0 && (x.cc == nil || shared || !x.cc.enforced[BoundMemory])
			if !Watchable || !(countProcs || memory) {
				continue
			}
			var tr procTree
			if x.tree != nil {
				c := x.tree()
				tr.procs, tr.rss = c.Tasks, c.Memory
			} else {
				if procs == nil {
					procs = scanProcs()
				}
				tr = descendants(x.root, procs, &x.memfds)
			}
			switch {
			case countProcs && int64(tr.procs) > cfg.MaxProcs+1: // +1: bwrap's init, or the landlock guard
				report(x, BoundProcs)
			case memory && tr.rss > cfg.MaxMemory:
				report(x, BoundMemory)
			}
		}
		if cfg.MaxDisk > 0 || cfg.MaxFiles > 0 {
			// The jail's usage is looked at off this loop, one look at
			// a time per jail (Session.meter): a walk of a deep or large
			// jail must not hold up the bounds of every other call. The
			// latest look is what the bounds are held to meanwhile.
			over := map[*Session]Bound{}
			for _, x := range roots {
				if _, done := over[x.s]; done {
					continue
				}
				over[x.s] = ""
				if u, ok := x.s.meter(0); ok {
					over[x.s] = cfg.diskOver(u)
				}
			}
			for _, x := range roots {
				if b := over[x.s]; b != "" {
					report(x, b)
				}
			}
		}
	}
}

// report sends a bound once; a command already reported is being killed.
func report(x *watched, limit Bound) {
	select {
	case x.hit <- limit:
	default:
	}
}
