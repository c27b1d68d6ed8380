package jail

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A read view grants what it shows by rules on inodes, and Landlock's
// rules follow an inode wherever it is moved: a file or directory the
// view granted by a rule of its own (an entry of a directory it listed,
// or a path it shows), which the host then renames into a denied path
// (--deny-read, another project's jails) while a call runs, stays
// readable to that call there, and so does what the host writes into it
// later. No rule can be taken back from a running call, so the agent
// watches: it holds each such inode open, and while a call of the view
// runs it looks, every guardInterval, at the directories holding them;
// when one changed, it asks the kernel where each inode is now
// (/proc/self/fd), and ends the call whose view granted one that lies
// in a denied path. What the call read before it ended, it keeps.

// guardInterval is how often a running call's guard looks at the
// directories that held what its view granted.
const guardInterval = TreeInterval

// guardFull is every how many looks the guard reads where each held
// inode is, whatever the stamps say.
const guardFull = 10

// heldGrants are the inodes a read view granted by rules of their own,
// each held open (O_PATH), the directories that held them as they were,
// and the view as it was made. Shared by the calls of the view, with a
// reference each and one for the cache that keeps the view.
type heldGrants struct {
	refs  atomic.Int64
	fds   []int
	paths []string
	dirs  []dirStamp
	view  readView
}

// keep holds fd, a rule's inode at path (the guard's now).
func (g *heldGrants) keep(fd int, path string) {
	g.fds = append(g.fds, fd)
	g.paths = append(g.paths, path)
}

// hold takes a reference to g (nil: none).
func (g *heldGrants) hold() *heldGrants {
	if g != nil {
		g.refs.Add(1)
	}
	return g
}

// release lets go of a reference; the last one closes what g holds.
func (g *heldGrants) release() {
	if g == nil || g.refs.Add(-1) != 0 {
		return
	}
	for _, fd := range g.fds {
		unix.Close(fd)
	}
	g.fds = nil
}

// stampDirs records, once every rule is made, the directories holding
// what g holds.
func (g *heldGrants) stampDirs() {
	seen := map[string]bool{}
	for _, p := range g.paths {
		d := parentDir(p)
		if seen[d] {
			continue
		}
		seen[d] = true
		if st, ok := stampOf(d); ok {
			g.dirs = append(g.dirs, st)
		}
	}
}

func parentDir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "/"
}

// denied reports whether p lies in a path the view hides that no PATH
// may show: the deny list, other projects' and sessions' jails; not the
// shadowed directories (/tmp, /run), whose content is hidden for their
// FIFOs, not as secrets, and where a file moved from the home reveals
// nothing new.
func (v readView) denied(p string) bool {
	return v.hiddenPath(p) && v.sealed(p)
}

// moved looks at where each inode g holds is now, and names the first
// that lies in a denied path: "" when none does.
func (g *heldGrants) moved() string {
	for i, fd := range g.fds {
		now, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		if err != nil || now == g.paths[i] || !strings.HasPrefix(now, "/") || strings.HasSuffix(now, " (deleted)") {
			continue
		}
		if g.view.denied(now) {
			return fmt.Sprintf("the host moved %s to %s, a path no command reads, while the call ran; its read view had granted %s, so the call was ended", g.paths[i], now, g.paths[i])
		}
	}
	return ""
}

// viewGuard is one call's watch over what its view granted.
type viewGuard struct {
	g    *heldGrants
	dirs []dirStamp // as last looked at
}

// guard starts a call's watch over g (nil: an unguarded call).
func (g *heldGrants) guard() *viewGuard {
	if g == nil || len(g.fds) == 0 {
		return nil
	}
	return &viewGuard{g: g.hold(), dirs: append([]dirStamp(nil), g.dirs...)}
}

// check names an inode of the view moved into a denied path, when one
// of the directories that held them changed since it last looked, or
// always when full: a move between a grant's open and its directory's
// stamp, or within one tick of a coarse clock, changes no stamp.
func (w *viewGuard) check(full bool) string {
	changed := false
	for i, s := range w.dirs {
		now, ok := stampOf(s.path)
		if !ok {
			now = dirStamp{path: s.path} // gone: changed once
		}
		if now != s {
			changed = true
			w.dirs[i] = now
		}
	}
	if !changed && !full {
		return ""
	}
	return w.g.moved()
}

// end lets go of the guard's reference.
func (w *viewGuard) end() {
	if w != nil {
		w.g.release()
	}
}

// watchCall runs w for call r until stop is closed, on a goroutine of
// its own (never the call's thread, which is in the call's domain and
// view): when an inode the call's view granted lies in a denied path, it
// records why and kills the call.
func (a *agent) watchCall(id uint64, r *agentRun, w *viewGuard) (stop func()) {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer w.end()
		t := time.NewTicker(guardInterval)
		defer t.Stop()
		for n := 0; ; n++ {
			// At once, everything (what moved since the view was
			// made), then what the stamps say every guardInterval, and
			// everything every guardFull of them.
			why := w.check(n%guardFull == 0)
			select {
			case <-done:
				return // the call ended first: its result stands
			default:
			}
			if why != "" {
				r.stopped.CompareAndSwap(nil, &why)
				a.kill(id)
				return
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	// Not waited for: a look stuck on a hung file system must not hold
	// the call's end; the goroutine lets go of its own reference.
	return func() { close(done) }
}
