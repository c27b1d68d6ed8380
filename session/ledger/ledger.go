// Package ledger owns what a session's layer (the project view's upper
// layer, session/view) holds against the host: for each entry of the
// layer, the host entry it was copied from (its identity, dev, inode,
// size, times, and the sha256 of its bytes); what the layer gained or
// lost since the ledger last looked (what a call changed in the project);
// the copies the host changed since they were taken (conflicts: commands
// see the session's copy, not the host's edit); and the copies that hold
// nothing of the session's own (a rewrite that changed nothing, a touch),
// dropped while the session is idle so that they never hide a later host
// edit.
//
// The ledger lives in the server, out of every command's reach: nothing
// in the layer says where an entry came from. It reads the layer and the
// host one name at a time from a directory's descriptor, never following
// a link (fs_linux.go).
package ledger

import (
	"crypto/sha256"
	"errors"
	"sort"
	"strings"
	"sync"

	"github.com/jail-mcp/jail-mcp/session/layer"
)

const (
	// maxEntries bounds the layer entries a look keeps: past it the
	// look stops and says the layer is larger (Changes.Partial).
	maxEntries = 200000
	// maxHash is the largest host file whose bytes are hashed: a larger
	// copy is told apart by its identity alone, and never dropped.
	maxHash = 64 << 20
	// maxBase is the largest text file whose bytes the ledger keeps, for
	// a conflict's patch (base to host, base to session); maxBases
	// bounds them all together.
	maxBase  = 1 << 20
	maxBases = 32 << 20
	// maxDepth bounds a walk's directories, each holding a descriptor.
	maxDepth = 512
	// FirstPaths is how many paths a report names.
	FirstPaths = 5
)

// ident is what the ledger knows of an entry, enough to tell that it was
// written, replaced or removed: two looks with the same ident saw the
// same entry as it was.
type ident struct {
	dev, ino     uint64
	mode         uint32 // type and permission bits
	rdev         uint64
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
}

type kind uint8

const (
	kindNone kind = iota
	kindFile
	kindDir
	kindLink
	kindWhiteout // a character device 0/0: the view deleted a host entry
	kindOther
)

// entry is one entry of the layer as a look saw it.
type entry struct {
	id   ident
	kind kind
	// opaque: a directory that hides the host's below it; hidden: an
	// entry in or below one (never a copy of the host's).
	opaque, hidden bool
}

// record is what a non-directory entry of the layer was copied from.
type record struct {
	host ident // the host's entry copied; kind none: the host had none
	kind kind  // of host
	// unknown: the host entry changed while the copy may have been
	// taken, so what was copied is not known: a conflict from the start.
	unknown bool
	sum     [sha256.Size]byte
	summed  bool
	base    []byte // the host file's bytes, when text and small
	kept    bool
	// noop: the layer's file, as noopOf, holds the host file's bytes
	// and mode: it keeps nothing of the session's.
	noop   bool
	noopOf ident
	// lastHost and lastVerdict cache the latest conflict look.
	lastHost    ident
	lastVerdict string
	looked      bool
}

// Floor is the earliest time (nanoseconds) at which the view may have
// looked up the host entry copied into a layer entry born at born
// (layer.Views.Floor).
type Floor func(born int64) int64

// Ledger is the record of one session's layer.
type Ledger struct {
	upper, project string
	floor          Floor

	mu      sync.Mutex
	entries map[string]entry
	records map[string]*record
	bases   int // bytes of base kept
	hostGen uint64
	noops   int // records with noop set
	partial bool
	synced  bool
}

// New is the ledger of the layer upper (an absolute path whose last two
// components lie in a jail: neither is followed) over project. floor
// tells when a call that may have copied an entry began; nil: at the
// entry's birth.
func New(upper, project string, floor Floor) *Ledger {
	if floor == nil {
		floor = func(born int64) int64 { return born }
	}
	return &Ledger{upper: upper, project: project, floor: floor, entries: map[string]entry{}, records: map[string]*record{}}
}

// Path is one path a report names, relative to the project, as jail_diff
// lists it (layer.Shown: quoted when it holds anything but printable
// characters), and how the layer changed it.
type Path struct {
	Path   string `json:"path"`
	Change string `json:"change"` // "added", "modified", "deleted"
}

// Changes is what the layer gained or lost between two looks: the
// project changes of the calls that ran meanwhile.
type Changes struct {
	Added    int    `json:"added"`
	Modified int    `json:"modified"`
	Deleted  int    `json:"deleted"`
	First    []Path `json:"first"` // the first FirstPaths, by path
	// Partial: the layer holds more than the ledger looks at; the
	// counts are of what it looked at.
	Partial bool `json:"partial"`
}

// Total is how many paths changed.
func (c Changes) Total() int { return c.Added + c.Modified + c.Deleted }

// Conflict is a path the host changed after the session's layer took its
// copy: commands see the session's.
type Conflict struct {
	Path string `json:"path"` // as Path.Path
	// Host is what the host did: "modified", "deleted", "added" (made
	// a path the session made too), or "unknown" (it changed while the
	// copy was taken).
	Host string `json:"host"`
}

// ErrNoEntry refuses a Discard of a path the layer holds nothing at.
var ErrNoEntry = errors.New("the session's layer holds nothing there: commands already see the host's")

// Sync looks at the layer, records what each new entry was copied from,
// and returns what changed in it since the last look: a call's changes,
// when called at its end. The first Sync of a ledger only records.
func (l *Ledger) Sync() (Changes, error) {
	if l == nil {
		return Changes{}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sync(true)
}

// Resync looks at the layer after the server changed it (an apply, a
// discard, a reset): nothing is told as a command's change.
func (l *Ledger) Resync() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.sync(false)
	return err
}

func (l *Ledger) sync(report bool) (Changes, error) {
	now, partial, err := walkLayer(l.upper)
	if err != nil {
		return Changes{}, err
	}
	first := !l.synced
	old := l.entries
	l.entries, l.partial, l.synced = now, partial, true
	var c Changes
	c.Partial = partial
	h, ld := newHostDirs(l.project), newLayerDirs(l.upper)
	defer h.close()
	defer ld.close()
	for p, e := range now {
		o, had := old[p]
		if had && o == e {
			continue
		}
		if e.kind != kindDir {
			l.note(h, ld, p, e)
		}
		if report && !first {
			c.add(p, l.change(h, p, o, had, e))
		}
	}
	for p, o := range old {
		if _, ok := now[p]; ok {
			continue
		}
		l.forget(p)
		if report && !first && o.kind != kindDir && o.kind != kindWhiteout {
			c.add(p, "deleted")
		}
	}
	sort.Slice(c.First, func(i, j int) bool { return c.First[i].Path < c.First[j].Path })
	return c, nil
}

// change is how an entry changed between two looks, from the view's
// side: "" when the view shows no change (a directory the copy of a
// file below it made).
func (l *Ledger) change(h *hostDirs, p string, o entry, had bool, e entry) string {
	switch {
	case e.kind == kindWhiteout:
		return "deleted"
	case e.kind == kindDir:
		return dirChange(h, p, o, had, e)
	case had && o.kind != kindWhiteout && o.kind != kindDir:
		return "modified"
	case !had && !e.hidden:
		if r := l.records[p]; r != nil && r.kind != kindNone {
			return "modified"
		}
	}
	return "added"
}

// dirChange is how a directory of the layer changed: modified when its
// permissions changed since the last look, or differ from the host's
// directory it was copied from; added where the host has none or the
// view replaced the host's whole (opaque); else "" (a directory the copy
// of a file below it made, or one whose times alone changed).
func dirChange(h *hostDirs, p string, o entry, had bool, e entry) string {
	const perm = 0o777
	if had {
		if o.kind == kindDir && o.id.mode&perm != e.id.mode&perm {
			return "modified"
		}
		return ""
	}
	if e.opaque || e.hidden {
		return "added"
	}
	hid, hk, err := h.stat(p)
	switch {
	case err != nil || hk != kindDir:
		return "added"
	case hid.mode&perm != e.id.mode&perm:
		return "modified"
	}
	return ""
}

func (c *Changes) add(p, change string) {
	switch change {
	case "added":
		c.Added++
	case "modified":
		c.Modified++
	case "deleted":
		c.Deleted++
	default:
		return
	}
	// Kept sorted and bounded as they come: the first paths by name.
	sp := layer.Shown(p)
	if len(c.First) == FirstPaths && sp >= c.First[FirstPaths-1].Path {
		return
	}
	i := sort.Search(len(c.First), func(i int) bool { return c.First[i].Path >= sp })
	c.First = append(c.First[:i], append([]Path{{Path: sp, Change: change}}, c.First[i:]...)...)
	if len(c.First) > FirstPaths {
		c.First = c.First[:FirstPaths]
	}
}

// setNoop sets r.noop, keeping the count.
func (l *Ledger) setNoop(r *record, v bool) {
	switch {
	case v && !r.noop:
		l.noops++
	case !v && r.noop:
		l.noops--
	}
	r.noop = v
}

// forget drops p's record.
func (l *Ledger) forget(p string) {
	if r := l.records[p]; r != nil {
		l.setNoop(r, false)
		if r.kept {
			l.bases -= len(r.base)
		}
		delete(l.records, p)
	}
}

// note records what the new or changed layer entry e at p was copied
// from, once (a later write changes the copy, not what it came from),
// and whether a file now holds the host's bytes (noop).
func (l *Ledger) note(h, ld *dirs, p string, e entry) {
	if e.hidden {
		// In an opaque directory: the session's own, no copy.
		l.forget(p)
		return
	}
	r := l.records[p]
	if r == nil {
		r = &record{}
		hid, hk, err := h.stat(p)
		switch {
		case err != nil:
			r.unknown = true
		case hk == kindNone:
		case hid.ctime > l.floor(bornOf(ld, p, e)):
			// Changed since the call that copied it began: which of
			// its states was copied is not known.
			r.host, r.kind, r.unknown = hid, hk, true
		default:
			r.host, r.kind = hid, hk
			if hk == kindFile {
				l.sumBase(h, p, r)
			}
		}
		l.records[p] = r
	}
	l.setNoop(r, false)
	r.looked = false
	if e.kind == kindFile && r.kind == kindFile && r.summed && !r.unknown &&
		e.id.size == r.host.size && e.id.mode&0o7777 == r.host.mode&0o7777 {
		if sum, _, ok := ld.sum(p, e.id, false); ok && sum == r.sum {
			l.setNoop(r, true)
			r.noopOf = e.id
		}
	}
}

// sumBase hashes the host file r records, and keeps its bytes when text
// and small.
func (l *Ledger) sumBase(h *hostDirs, p string, r *record) {
	if r.host.size > maxHash {
		return
	}
	keep := r.host.size <= maxBase && l.bases+int(r.host.size) <= maxBases
	sum, data, ok := h.sum(p, r.host, keep)
	if !ok {
		r.unknown = true
		return
	}
	r.sum, r.summed = sum, true
	if keep && !binary(data) {
		r.base, r.kept = data, true
		l.bases += len(data)
	}
}

// binary is what git would take for a binary file: a NUL early on.
func binary(data []byte) bool {
	n := min(len(data), 8000)
	return strings.IndexByte(string(data[:n]), 0) >= 0
}

// Conflicts are the paths the host changed after the layer took its copy
// (sorted by path). A host entry whose identity changed but whose bytes
// did not (a touch) is none, nor one the session's copy now equals.
//
// hostGen is the number of the project's state by the server's watch of
// its directories (session/view), 0 when it is blind: a path the host
// had none of when the session made its own is looked at again only
// when the number moved (the host making an entry is an event of its
// directory), so that a layer of many added files (a package install)
// costs no look at the host each call. A copy is looked at every time:
// an edit in place is no event of a directory.
func (l *Ledger) Conflicts(hostGen uint64) []Conflict {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ld := newHostDirs(l.project), newLayerDirs(l.upper)
	defer h.close()
	defer ld.close()
	recheck := hostGen == 0 || hostGen != l.hostGen
	l.hostGen = hostGen
	var out []Conflict
	for p, r := range l.records {
		if r.kind == kindNone && !r.unknown && r.looked && !recheck {
			if r.lastVerdict != "" {
				out = append(out, Conflict{Path: layer.Shown(p), Host: r.lastVerdict})
			}
			continue
		}
		if v := l.verdict(h, ld, p, r); v != "" {
			out = append(out, Conflict{Path: layer.Shown(p), Host: v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// verdict is how the host changed p since r was taken, "" when it did
// not (or the session's copy equals the host's now).
func (l *Ledger) verdict(h, ld *dirs, p string, r *record) string {
	if e := l.entries[p]; r.noop && e.kind == kindFile && !e.hidden {
		return "" // dropped before the next call: the host's file shows
	}
	if r.unknown {
		return "unknown"
	}
	now, nk, err := h.stat(p)
	if err != nil {
		return "unknown"
	}
	if r.looked && now == r.lastHost {
		return r.lastVerdict
	}
	v := ""
	switch {
	case nk == r.kind && (nk == kindNone || now == r.host):
	case nk == kindNone:
		if e := l.entries[p]; e.kind != kindWhiteout {
			v = "deleted"
		}
	case r.kind == kindNone:
		v = "added"
	default:
		v = "modified"
		if nk == kindFile && r.kind == kindFile && r.summed && now.size == r.host.size {
			if sum, _, ok := h.sum(p, now, false); ok && sum == r.sum {
				v = "" // touched, not changed: what the copy came from
			}
		}
		if v != "" && nk == kindFile && l.entries[p].kind == kindFile && l.entries[p].id.size == now.size {
			if a, _, ok := h.sum(p, now, false); ok {
				if b, _, ok := ld.sum(p, l.entries[p].id, false); ok && a == b {
					v = "" // the session's copy is the host's now
				}
			}
		}
	}
	r.looked, r.lastHost, r.lastVerdict = true, now, v
	return v
}
