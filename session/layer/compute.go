//go:build linux || darwin

package layer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"golang.org/x/sys/unix"
)

// entry is a change with what Apply needs to know of it.
type entry struct {
	Change
	rel      string // the path itself; Change.Path is how it is shown
	ignored  string // the outermost path .gitignore ignores at or above rel, "" for none
	upper    int    // what the upper layer holds at rel itself
	perm     uint32 // the view's permission bits
	sameData bool   // a modified file whose bytes the host has: a chmod applies it
	host     bool   // the host has an entry at rel
	ctime    int64  // the host entry's change time
	born     int64  // when the upper entry behind this change was made (Apply's walk only)
	ino      uint64 // the upper file's inode and change time: Apply drops it only if unchanged
	uctime   int64
}

// What the upper layer holds at a change's path.
const (
	upNone     = iota // a deletion below a whiteout, an opaque directory or a type change
	upWhiteout        // a deletion
	upDir
	upFile
	upSpecial
)

// dirRef is an open directory of a walk, of the upper layer or the host.
type dirRef struct {
	f  *os.File
	fd int
}

func (d dirRef) ok() bool { return d.f != nil }

func (d dirRef) close() {
	if d.f != nil {
		d.f.Close()
	}
}

// walker compares the upper layer with the host, one directory at a
// time, the upper directory and the host's at the same path open side by
// side.
type walker struct {
	opt        Options
	apply      bool // Apply's walk: every change, with its times, no patch
	ig         ignorer
	track      tracked  // what the host's git index tracks: never ignored
	comps      []string // the components of the path being looked at
	entries    []entry
	sums       map[string]*Summary
	opaque     map[string]bool // the upper directories marked opaque (Apply's walk)
	patch      patcher
	dig        digester
	bufA, bufB []byte
}

// Compute lists what the upper layer upper changes in the view of the
// project against the live project, never following a link of either.
// Names the layer holds are listed as shown says.
func Compute(upper, project string, opt Options) (*Diff, error) {
	w := &walker{opt: opt}
	if err := w.run(upper, project); err != nil {
		return nil, err
	}
	d := &Diff{Changes: []Change{}, Ignored: []Summary{}}
	for _, e := range w.entries {
		d.Changes = append(d.Changes, e.Change)
	}
	for _, s := range w.sums {
		d.Ignored = append(d.Ignored, *s)
	}
	slices.SortFunc(d.Ignored, func(a, b Summary) int { return strings.Compare(a.Dir, b.Dir) })
	if opt.Patch {
		d.Patch = w.patch.bytes()
	}
	d.Digest = w.dig.sum()
	return d, nil
}

func (w *walker) run(upper, project string) error {
	u, ufd, err := openUpper(upper)
	if err != nil {
		return fmt.Errorf("opening the upper layer %s: %w", upper, err)
	}
	defer u.Close()
	// The project's path is the host's: a link in it is followed.
	lfd, err := unix.Open(project, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the project %s: %w", project, err)
	}
	l := os.NewFile(uintptr(lfd), project)
	defer l.Close()
	w.bufA, w.bufB = make([]byte, 64<<10), make([]byte, 64<<10)
	w.sums = map[string]*Summary{}
	w.track = readTracked(project)
	// The kernel does not honour an opaque mark on the upper directory
	// itself: the root always merges the host's.
	return w.dir(dirRef{u, ufd}, dirRef{l, lfd}, "", 0, false, 0, "")
}

// dir compares the upper directory u with the host's l (not ok when the
// host has no directory at rel) and walks below. hidden is true in an
// opaque directory or below one: then a host entry the upper lacks is
// deleted, born when the opaque directory was. ignored is the outermost
// ignored path above, if any.
func (w *walker) dir(u, l dirRef, rel string, depth int, hidden bool, hiddenBorn int64, ignored string) error {
	if depth > maxDepth {
		return fmt.Errorf("walking the upper layer at %s: more than %d directories deep", shown(rel), maxDepth)
	}
	un, err := names(u.f)
	if err != nil && !swapped(err) {
		return fmt.Errorf("reading the upper layer at %s: %w", shownDir(rel), err)
	}
	var ln []string
	if hidden && l.ok() {
		if ln, err = names(l.f); err != nil {
			return fmt.Errorf("reading the project at %s: %w", shownDir(rel), err)
		}
	}
	if ignored == "" {
		var ps []gitignore.Pattern
		if depth == 0 {
			ps = parseIgnore(readIgnore(l, ".git", "info", "exclude"), nil)
		}
		rules := readIgnore(l, ".gitignore")
		if !l.ok() && depth > 0 {
			// A directory new in the view: its own rules (pytest's
			// .pytest_cache/.gitignore, "*"), which can hide only what
			// is new in it, never a host path.
			rules = readIgnore(u, ".gitignore")
		}
		ps = append(ps, parseIgnore(rules, w.comps[:depth])...)
		mark := w.ig.push(ps)
		defer w.ig.pop(mark)
	}
	i, j := 0, 0
	for i < len(un) || j < len(ln) {
		switch {
		case j == len(ln) || i < len(un) && un[i] < ln[j]:
			err = w.upperEntry(u, l, rel, un[i], depth, hidden, hiddenBorn, ignored)
			i++
		case i == len(un) || ln[j] < un[i]:
			err = w.hostOnly(l, rel, ln[j], depth, hiddenBorn, ignored)
			j++
		default:
			err = w.upperEntry(u, l, rel, un[i], depth, hidden, hiddenBorn, ignored)
			i++
			j++
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// upperEntry compares the upper entry name of u with the host's of l,
// and walks below it.
func (w *walker) upperEntry(u, l dirRef, rel, name string, depth int, hidden bool, hiddenBorn int64, ignored string) error {
	p := Join(rel, name)
	w.at(depth, name)
	ust, ok, err := lstat(u.fd, name)
	if err != nil {
		return upperErr("looking at the upper layer's", p, err)
	}
	if !ok {
		return nil // gone since the listing
	}
	var lst unix.Stat_t
	lok := false
	if l.ok() {
		if lst, lok, err = lstat(l.fd, name); err != nil {
			return fmt.Errorf("looking at the project's %s: %w", shown(p), err)
		}
	}
	if isWhiteout(&ust) {
		if !lok {
			return nil // the host no longer has what the view deleted
		}
		var b int64
		if w.apply {
			// A whiteout is a link to the mount's one shared whiteout,
			// born at the mount's first deletion: no later than this
			// one, so that a host change in between is a conflict too.
			if b, err = born(u.fd, name); err != nil {
				return upperErr("looking at the upper layer's", p, err)
			}
		}
		return w.deleted(l, rel, name, depth, &lst, upWhiteout, b, ignored)
	}
	if !lok {
		return w.added(u, rel, name, depth, &ust, ignored, !l.ok())
	}

	e, change, err := w.compare(u, l, p, name, depth, ignored, &ust, &lst)
	if err != nil {
		return err
	}
	if change {
		if err := w.changed(&e, u, l, name, &ust, &lst); err != nil {
			return err
		}
	}
	return w.beneath(u, l, &e, name, depth, hidden, hiddenBorn)
}

// compare makes the entry of p, in both the upper layer (ust) and the
// host (lst), and says whether the view changed it: its type, its data
// or permissions, a link's target or a device's number.
func (w *walker) compare(u, l dirRef, p, name string, depth int, ignored string, ust, lst *unix.Stat_t) (e entry, change bool, err error) {
	vk, hk := kind(ust), kind(lst)
	e = entry{
		Change: Change{Path: shown(p), Type: vk, HostType: hk},
		rel:    p, upper: upperKind(ust), perm: perm(ust),
		host: true, ctime: lst.Ctim.Nano(),
		ino: ust.Ino, uctime: ust.Ctim.Nano(),
	}
	e.ignored = w.ignoredAt(ignored, p, depth, name, vk == "dir", false)
	if isReg(ust) {
		e.Size = ust.Size
	}
	if isReg(lst) {
		e.HostSize = lst.Size
	}
	e.Special = vk != "file" && vk != "dir"
	var target string
	if vk == "symlink" {
		if target, err = readLink(u.fd, name); err != nil {
			return e, false, upperErr("reading the upper layer's link", p, err)
		}
		e.Target = shown(target)
	}
	if vk != hk {
		return e, true, nil
	}
	switch vk {
	case "file":
		e.sameData = w.same(u, l, name, ust, lst)
		change = !e.sameData || perm(ust) != perm(lst)
	case "symlink":
		ht, err := readLink(l.fd, name)
		if err != nil {
			return e, false, fmt.Errorf("reading the project's link %s: %w", shown(p), err)
		}
		change = ht != target
	case "device":
		change = ust.Rdev != lst.Rdev || perm(ust) != perm(lst)
	default:
		change = perm(ust) != perm(lst)
	}
	return e, change, nil
}

// changed says how the view changed entry e, of the upper entry name of
// u and the host's of l, emits it, and patches a regular file's data.
func (w *walker) changed(e *entry, u, l dirRef, name string, ust, lst *unix.Stat_t) error {
	switch {
	case e.Type != e.HostType:
		e.Change.Change = typeChanged
		e.Mode = newMode(ust)
	case e.Type != "symlink" && perm(ust) != perm(lst):
		e.Change.Change = modified
		e.Mode = fmt.Sprintf("%04o", perm(ust))
	default:
		e.Change.Change = modified
	}
	if w.apply {
		var err error
		if e.born, err = born(u.fd, name); err != nil {
			return upperErr("looking at the upper layer's", e.rel, err)
		}
	}
	var view *side
	if isReg(ust) {
		view = w.viewFile(e, u, name, ust)
	}
	w.emit(e)
	if (isReg(ust) || isReg(lst)) && w.patching(e) {
		w.patchFile(e, u, l, name, ust, lst, view)
	}
	return nil
}

// beneath walks below entry e, the upper entry name of u and the host's
// of l: a directory of the view against the host's (hidden from where
// the view made one opaque), or the host's directory a file of the view
// hides, which goes with the type change.
func (w *walker) beneath(u, l dirRef, e *entry, name string, depth int, hidden bool, hiddenBorn int64) error {
	p, vk, hk := e.rel, e.Type, e.HostType
	if vk == "dir" {
		sub, err := w.openUpperDir(u, p, name)
		if err != nil || !sub.ok() {
			return err
		}
		defer sub.close()
		var subL dirRef
		if hk == "dir" {
			if subL, err = openHostDir(l, p, name); err != nil {
				return err
			}
			defer subL.close()
		}
		opaque := w.markOpaque(p, sub.fd)
		if hk == "dir" && !hidden && opaque {
			hidden = true
			if w.apply {
				if hiddenBorn, err = born(u.fd, name); err != nil {
					return upperErr("looking at the upper layer's", p, err)
				}
			}
		}
		if hk != "dir" {
			hidden = false
		}
		return w.dir(sub, subL, p, depth+1, hidden, hiddenBorn, e.ignored)
	}
	if hk == "dir" {
		// The view's file hides the host's directory: everything in it
		// goes with the type change.
		return w.below(l, p, name, depth, e.born, e.ignored)
	}
	return nil
}

// added lists the upper entry name of u, with stat st, which the host
// lacks, and, for a directory, everything below it; newDir: the host
// lacks the directory it is in too.
func (w *walker) added(u dirRef, rel, name string, depth int, st *unix.Stat_t, ignored string, newDir bool) error {
	p := Join(rel, name)
	vk := kind(st)
	e := entry{
		Change: Change{Path: shown(p), Change: added, Type: vk},
		rel:    p, upper: upperKind(st), perm: perm(st),
		ino: st.Ino, uctime: st.Ctim.Nano(),
	}
	e.ignored = w.ignoredAt(ignored, p, depth, name, vk == "dir", newDir)
	e.Special = vk != "file" && vk != "dir"
	e.Mode = newMode(st)
	switch vk {
	case "file":
		e.Size = st.Size
	case "symlink":
		target, err := readLink(u.fd, name)
		if err != nil {
			return upperErr("reading the upper layer's link", p, err)
		}
		e.Target = shown(target)
	}
	var view *side
	if vk == "file" {
		view = w.viewFile(&e, u, name, st)
	}
	w.emit(&e)
	if vk == "file" && w.patching(&e) {
		w.patchFile(&e, u, dirRef{}, name, st, nil, view)
	}
	if vk != "dir" {
		return nil
	}
	sub, err := w.openUpperDir(u, p, name)
	if err != nil || !sub.ok() {
		return err
	}
	defer sub.close()
	w.markOpaque(p, sub.fd)
	return w.dir(sub, dirRef{}, p, depth+1, false, 0, e.ignored)
}

// hostOnly lists the host entry name of l, in an opaque directory whose
// upper lacks it, as deleted.
func (w *walker) hostOnly(l dirRef, rel, name string, depth int, hiddenBorn int64, ignored string) error {
	st, ok, err := lstat(l.fd, name)
	if err != nil {
		return fmt.Errorf("looking at the project's %s: %w", shown(Join(rel, name)), err)
	}
	if !ok {
		return nil
	}
	return w.deleted(l, rel, name, depth, &st, upNone, hiddenBorn, ignored)
}

// deleted lists the host entry name of l, with stat st, which the view
// does not show, and, for a directory, everything below it. up is what
// the upper holds at its path, bornAt when the upper entry that hides it
// was made.
func (w *walker) deleted(l dirRef, rel, name string, depth int, st *unix.Stat_t, up int, bornAt int64, ignored string) error {
	p := Join(rel, name)
	e := entry{
		Change: Change{Path: shown(p), Change: deleted, Type: kind(st)},
		rel:    p, upper: up, host: true, ctime: st.Ctim.Nano(), born: bornAt,
	}
	e.ignored = w.ignoredAt(ignored, p, depth, name, isDir(st), false)
	if isReg(st) {
		e.HostSize = st.Size
	}
	w.emit(&e)
	if isReg(st) && w.patching(&e) {
		w.patchFile(&e, dirRef{}, l, name, nil, st, nil)
	}
	if !isDir(st) {
		return nil
	}
	return w.below(l, p, name, depth, bornAt, e.ignored)
}

// below lists everything in the host directory name of l (at p) as
// deleted.
func (w *walker) below(l dirRef, p, name string, depth int, bornAt int64, ignored string) error {
	if depth+1 > maxDepth {
		return fmt.Errorf("walking the project at %s: more than %d directories deep", shown(p), maxDepth)
	}
	sub, err := openHostDir(l, p, name)
	if err != nil {
		return err
	}
	defer sub.close()
	ns, err := names(sub.f)
	if err != nil {
		return fmt.Errorf("reading the project at %s: %w", shown(p), err)
	}
	for _, n := range ns {
		w.at(depth, name)
		st, ok, err := lstat(sub.fd, n)
		if err != nil {
			return fmt.Errorf("looking at the project's %s: %w", shown(Join(p, n)), err)
		}
		if ok {
			if err := w.deleted(sub, p, n, depth+1, &st, upNone, bornAt, ignored); err != nil {
				return err
			}
		}
	}
	return nil
}

// openUpperDir opens the upper directory name of u. One the command
// swapped since it was looked at (for a link, a file) or removed is not
// walked: what it held is no longer the view's, and Apply looks again.
func (w *walker) openUpperDir(u dirRef, p, name string) (dirRef, error) {
	f, fd, err := openDir(u.fd, name)
	switch {
	case err == nil:
		return dirRef{f, fd}, nil
	case swapped(err):
		return dirRef{}, nil
	default:
		return dirRef{}, fmt.Errorf("opening the upper layer's %s: %w", shown(p), err)
	}
}

// upperErr is the walk's answer to an error of the upper layer at p:
// an entry the command removed or swapped since it was listed is left
// out (the walk is no snapshot of a layer being written, and Apply looks
// again), anything else fails it.
func upperErr(doing, p string, err error) error {
	if swapped(err) {
		return nil
	}
	return fmt.Errorf("%s %s: %w", doing, shown(p), err)
}

// swapped reports whether err is what a call on an entry gets when the
// entry went or changed type since it was looked at.
func swapped(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) ||
		errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EINVAL)
}

func openHostDir(l dirRef, p, name string) (dirRef, error) {
	f, fd, err := openDir(l.fd, name)
	if err != nil {
		return dirRef{}, fmt.Errorf("opening the project's %s: %w", shown(p), err)
	}
	return dirRef{f, fd}, nil
}

// same reports whether the upper file name of u holds the bytes of the
// host's of l. One that cannot be read, or is no longer the regular file
// looked at, is taken for changed: it is listed, and Apply looks again.
func (w *walker) same(u, l dirRef, name string, ust, lst *unix.Stat_t) bool {
	if ust.Size != lst.Size {
		return false
	}
	uf, err := openFile(u.fd, name, ust)
	if err != nil {
		return false
	}
	defer uf.Close()
	lf, err := openFile(l.fd, name, lst)
	if err != nil {
		return false
	}
	defer lf.Close()
	same, err := sameFile(uf, lf, ust.Size, w.bufA, w.bufB)
	return same && err == nil
}

func (w *walker) emit(e *entry) {
	w.dig.add(e)
	if e.ignored != "" && !w.opt.All && !w.apply {
		w.summarise(e)
		return
	}
	w.entries = append(w.entries, *e)
}

// summarise counts an ignored change in its top directory's summary.
func (w *walker) summarise(e *entry) {
	top, _, nested := strings.Cut(e.rel, "/")
	if nested || e.Type == "dir" {
		top += "/"
	}
	s := w.sums[top]
	if s == nil {
		s = &Summary{Dir: shown(top)}
		w.sums[top] = s
	}
	c := e.Change.Change
	if c == typeChanged {
		c = modified
	}
	switch s.Change {
	case "":
		s.Change = c
	case c:
	default:
		s.Change = mixed
	}
	if e.Type != "dir" {
		s.Files++
	}
	if c == deleted {
		s.Bytes += e.HostSize
	} else {
		s.Bytes += e.Size
	}
}

func (w *walker) patching(e *entry) bool {
	return w.opt.Patch && !w.apply && (w.opt.All || e.ignored == "")
}

// patchFile adds the patch of a file change; ust and lst are nil for the
// side that has no entry; view is the view's side when already read.
func (w *walker) patchFile(e *entry, u, l dirRef, name string, ust, lst *unix.Stat_t, pre *side) {
	if w.patch.full() {
		w.patch.add("-") // counted, never read
		return
	}
	var host, view side
	if lst != nil && isReg(lst) && w.opt.Unread != nil && w.opt.Unread(e.rel) {
		w.patch.add(fmt.Sprintf("diff --git %s %s\n# no patch: the host's file is on the --deny-read list\n", shown("a/"+e.rel), shown("b/"+e.rel)))
		return
	}
	if lst != nil && isReg(lst) {
		host = readSide(l.fd, name, lst)
	}
	switch {
	case pre != nil:
		view = *pre
	case ust != nil && isReg(ust):
		view = readSide(u.fd, name, ust)
	}
	s, err := filePatch(e.rel, host, view)
	if err != nil {
		s = fmt.Sprintf("diff --git %s %s\n# %v\n", shown("a/"+e.rel), shown("b/"+e.rel), err)
	}
	w.patch.add(s)
}

// readSide reads a regular file for its patch. One too large, unreadable
// or swapped is diffed as binary.
func readSide(dirfd int, name string, st *unix.Stat_t) side {
	s := side{present: true, perm: perm(st), size: st.Size}
	if st.Size > maxText {
		return s
	}
	f, err := openFile(dirfd, name, st)
	if err != nil {
		s.size = maxText + 1
		return s
	}
	defer f.Close()
	s.data, err = io.ReadAll(io.LimitReader(f, maxText+1))
	if err != nil {
		s.size = maxText + 1
	}
	s.size = max(s.size, int64(len(s.data)))
	return s
}

func readSmall(dirfd int, name string, st *unix.Stat_t) []byte {
	if st.Size > maxIgnoreFile {
		return nil
	}
	f, err := openFile(dirfd, name, st)
	if err != nil {
		return nil
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxIgnoreFile+1))
	if err != nil || len(data) > maxIgnoreFile {
		return nil
	}
	return data
}

// at sets the walk's path to its components at depth with name last, and
// returns them.
func (w *walker) at(depth int, name string) []string {
	w.comps = append(w.comps[:depth], name)
	return w.comps
}

// ignoredAt is the outermost ignored path at or above p, the entry name
// at depth, given ignored, the one above it. newDir: p lies in a
// directory the host lacks, whose .gitignore is a rule of that directory
// alone, ignored as its other new files may be.
func (w *walker) ignoredAt(ignored, p string, depth int, name string, dir, newDir bool) string {
	if ignored != "" {
		return ignored
	}
	if name == ".gitignore" && !newDir || w.track[p] {
		return "" // a rule changed, or a path git lists whatever ignores it
	}
	if w.ig.ignored(w.at(depth, name), dir) {
		return p
	}
	return ""
}

// markOpaque records whether the upper directory p (open as fd) is
// opaque, and says so. Apply keeps what lies in one until all of it is
// applied, whether or not the host had the directory: once applied, the
// host has it, and the mark would hide the host's entries.
func (w *walker) markOpaque(p string, fd int) bool {
	if !isOpaque(fd) {
		return false
	}
	if !w.apply {
		return true
	}
	if w.opaque == nil {
		w.opaque = map[string]bool{}
	}
	w.opaque[p] = true
	return true
}

// newMode is Change.Mode of a file or directory the host has none of (or
// none of its type): its bits when they are not what one is made with
// (0644, 0755), so that a new executable shows.
func newMode(st *unix.Stat_t) string {
	switch {
	case isReg(st) && perm(st) != 0o644, isDir(st) && perm(st) != 0o755:
		return fmt.Sprintf("%04o", perm(st))
	}
	return ""
}

func upperKind(st *unix.Stat_t) int {
	switch {
	case isWhiteout(st):
		return upWhiteout
	case isDir(st):
		return upDir
	case isReg(st):
		return upFile
	default:
		return upSpecial
	}
}

// Join is rel/name, name alone at the top (rel "" is the top).
func Join(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}

func shownDir(rel string) string {
	if rel == "" {
		return "."
	}
	return shown(rel)
}
