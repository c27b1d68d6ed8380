package layer

import (
	"slices"
	"sync"
	"time"
)

// ViewSlack widens each view's span when looking for the spans an upper
// entry's birth falls in: a file system stamps times from a clock that
// lags the server's by up to a tick (coarse timestamps). A wider span
// only lowers floors.
const ViewSlack = int64(100 * time.Millisecond)

// maxViewSpans bounds the spans kept; past it the oldest two are merged
// into one, which only adds conflicts.
const maxViewSpans = 4096

// Views records, for a session's layer, when the views that write it
// served calls, so that Apply knows which host file each entry of the
// layer was copied from. overlayfs leaves no usable trace of that: its
// origin attribute on the upper file (user.overlay.origin) is empty in an
// overlay mounted in a user namespace (no file handles without
// CAP_DAC_READ_SEARCH over the host), and the upper entry's birth time is
// when the view copied, not which host file it copied: a view that looked
// a file up before the host replaced it (an editor's atomic save) still
// serves the old inode, and copies that one up after the host's change.
//
// A call's view has looked nothing of the host up before the call began
// that the host changed since (the server's watch of the project gives a
// call a fresh view after any change of a directory: session/view's
// watch), and a command writes the layer only while its call runs. So
// an entry born while calls ran was copied from the host's entry as it
// was at some time no earlier than the earliest start of those calls (its
// floor): a host entry changed since then may have been replaced under
// the view, and is a conflict. An entry born while no call of this record
// ran (a layer written by an earlier server) has its birth as its floor:
// the host entry then must not have changed since the copy was made.
//
// The record lives in the server, out of every command's reach: nothing
// in the layer (which a command writes, through the view) says where an
// entry came from. A nil *Views has no span: every floor is the birth.
type Views struct {
	mu    sync.Mutex
	next  uint64
	spans map[uint64]viewSpan
	// clock stamps a call's start as the file system stamps a change
	// (StampIn); without it, fsNow.
	clock    fileClock
	hasClock bool
}

// StampIn makes v stamp each call's start in dir's file system, as it
// stamps a change of a file (an unnamed file of v's own there): a host
// change made before the call then has an earlier change time, one made
// after it a later or, on a file system without multigrain stamps, the
// same. Without it (or when dir takes no unnamed file), the kernel's
// coarse clock, which a multigrain file system's stamps may run ahead
// of. Call it before the first Begin.
func (v *Views) StampIn(dir string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.hasClock {
		v.clock.close()
	}
	v.clock, v.hasClock = openFileClock(dir), true
}

// Close lets go of v's file clock.
func (v *Views) Close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.hasClock {
		v.clock.close()
		v.clock, v.hasClock = -1, false
	}
}

// now is the start of a call, as v stamps it. Callers hold mu.
func (v *Views) now() int64 {
	if v.hasClock {
		if t, ok := v.clock.now(); ok {
			return t
		}
	}
	return fsNow()
}

// viewSpan is one call's time, in nanoseconds since the epoch: from its
// start, as a file system would stamp a change made then (Views.now), to
// its end, 0 while it runs. A host change stamped later than from was made
// after the call began (one in the same tick, after it, may be stamped
// equal: missed).
type viewSpan struct{ from, end int64 }

// Begin records that a call starts to use a view now, before the call
// learns which view it gets; the returned func records its end, once its
// command and every process it left are gone.
func (v *Views) Begin() func() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.spans == nil {
		v.spans = map[uint64]viewSpan{}
	}
	id := v.next
	v.next++
	v.spans[id] = viewSpan{from: v.now()}
	return sync.OnceFunc(func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		if s, ok := v.spans[id]; ok {
			s.end = time.Now().UnixNano()
			v.spans[id] = s
		}
		if len(v.spans) > maxViewSpans {
			v.mergeOldest()
		}
	})
}

// mergeOldest merges the two oldest spans that ended into one that runs
// while either did: a wider span only lowers floors.
func (v *Views) mergeOldest() {
	var ended []uint64
	for id, s := range v.spans {
		if s.end != 0 {
			ended = append(ended, id)
		}
	}
	if len(ended) < 2 {
		return
	}
	slices.Sort(ended)
	a, b := v.spans[ended[0]], v.spans[ended[1]]
	v.spans[ended[0]] = viewSpan{from: min(a.from, b.from), end: max(a.end, b.end)}
	delete(v.spans, ended[1])
}

// Floor is the earliest time at which the host entry copied into an
// upper entry born at born may have been looked up by the view that
// copied it: the earliest start of the calls running at born, born
// itself when none ran.
func (v *Views) Floor(born int64) int64 {
	if v == nil {
		return born
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	floor := born
	for _, s := range v.spans {
		if s.from-ViewSlack <= born && (s.end == 0 || born <= s.end+ViewSlack) {
			floor = min(floor, s.from)
		}
	}
	return floor
}

// HostUnchanged reports whether the host entry, with change time ctime,
// is still the one the view copied into an upper entry born at born: the
// host has not changed it since the earliest the view may have looked it
// up. A change stamped the same as a call's start is taken for one made
// before it (one the host made after, in the same tick of the file
// system's clock, is missed), so that the usual sequence (the host
// writes, a call runs at once) is no conflict. Issue 46 uses it too, to
// tell a copy whose host entry stayed as it was from one the host edited.
func (v *Views) HostUnchanged(born, ctime int64) bool {
	return ctime <= v.Floor(born)
}
