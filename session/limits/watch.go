package limits

import (
	"sync"
	"time"

	"github.com/jail-mcp/jail-mcp/jail"
)

// diskEvery is how many watchdog ticks pass between two walks of a jail
// whose usage the usage watch does not keep: the age of the walk a call's
// disk checks may take.
const diskEvery = 20

// DiskAge is the age of the walk of a jail a call's disk checks may take
// (diskEvery ticks of the watchdog).
const DiskAge = diskEvery * watchInterval

// Watchdog enforces the process, memory, disk and file bounds of every
// running command of a server with one scan of /proc a tick, however
// many commands run; it runs only while some command does. Its zero value
// is ready to use.
type Watchdog struct {
	mu      sync.Mutex
	watched map[*watched]bool
	running bool
}

// Call is a running command the watchdog holds to its bounds.
type Call struct {
	// Root is the process the descendants of which are the call's, when
	// Tree is nil: bwrap, or the command itself.
	Root int
	// Tree is the backend's count of the call's processes, or nil.
	Tree func() jail.Count
	// Group is the call's cgroups (or its agent's), or nil, and Mark
	// their counters when the call started.
	Group *Group
	Mark  Mark
	// Shared says that Group is a session agent's, which its calls
	// share, not the call's own.
	Shared bool
	// MaxProcs and MaxMemory are its bounds; 0 is no bound.
	MaxProcs, MaxMemory int64
	// Disk is its jail, held to the disk bounds; nil where none is set.
	Disk Disk
	// Hit receives the name of the first bound exceeded.
	Hit chan<- Bound
}

// Disk is the jail of a watched call, held to --max-disk and --max-files.
// Over names the bound the latest look at its usage found it over, ""
// when none or before a first look; it must not wait for a look (a walk
// of a deep or large jail must not hold up the bounds of every other
// call). The calls of one jail share one question a tick: Disk values
// are compared with ==.
type Disk interface {
	Over() Bound
}

type watched struct {
	Call
	// memfds counts the memfds of Root's descendants (Tree nil).
	memfds memfdScan
}

// Watch starts watching c. The returned function stops it.
func (w *Watchdog) Watch(c Call) (stop func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watched == nil {
		w.watched = map[*watched]bool{}
	}
	c.Shared = c.Shared && c.Group != nil
	x := &watched{Call: c}
	w.watched[x] = true
	if !w.running {
		w.running = true
		go w.loop()
	}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.watched, x)
	}
}

func (w *Watchdog) loop() {
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
			shared := x.Shared
			if x.Group != nil && !shared {
				if lim := x.Group.ExceededSince(x.Mark); lim != "" {
					report(x, lim)
					continue
				}
			}
			countProcs := x.MaxProcs > 0 && (x.Group == nil || shared || !x.Group.enforced[BoundProcs])
			memory := x.MaxMemory > 0 && (x.Group == nil || shared || !x.Group.enforced[BoundMemory])
			if !Watchable || !(countProcs || memory) {
				continue
			}
			var tr procTree
			if x.Tree != nil {
				c := x.Tree()
				tr.procs, tr.rss = c.Tasks, c.Memory
			} else {
				if procs == nil {
					procs = scanProcs()
				}
				tr = descendants(x.Root, procs, &x.memfds)
			}
			switch {
			case countProcs && int64(tr.procs) > x.MaxProcs+1: // +1: bwrap's init, or the landlock guard
				report(x, BoundProcs)
			case memory && tr.rss > x.MaxMemory:
				report(x, BoundMemory)
			}
		}
		// The jail's usage is looked at off this loop (Disk.Over does
		// not wait for a look), once a tick per jail.
		over := map[Disk]Bound{}
		for _, x := range roots {
			if x.Disk == nil {
				continue
			}
			if _, done := over[x.Disk]; !done {
				over[x.Disk] = x.Disk.Over()
			}
		}
		for _, x := range roots {
			if b := over[x.Disk]; x.Disk != nil && b != "" {
				report(x, b)
			}
		}
	}
}

// report sends a bound once; a command already reported is being killed.
func report(x *watched, limit Bound) {
	select {
	case x.Hit <- limit:
	default:
	}
}
