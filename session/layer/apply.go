//go:build linux || darwin

package layer

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Apply writes the changes of the view at or below paths to the project,
// then drops them from the upper layer, so that the view shows the host's
// (now equal) entries again. paths are as Compute shows them (clean,
// relative, Go-quoted for an odd name); "." is every change Compute lists
// without Options.All: an ignored change is applied only by a path that is
// or lies in an ignored path ("node_modules"). It is all or nothing: with
// any refusal (a protected path, an entry that is not a file or directory,
// a conflict with a host change, a path through a host link, a bad name,
// a path with no change) nothing is written, so that the caller can
// narrow the paths and retry. dryRun checks and lists, and writes
// nothing.
//
// Each file is read from the upper layer without following a link and
// checked to be a regular file once open, copied to a staging directory
// in the project (.jail-apply-*) and renamed over its destination: no
// half-written file, and nothing of the host is touched until every file
// is staged. On an error once writing began, Applied lists what was
// written.
//
// The upper layer must not be mounted while Apply runs: overlayfs keeps
// using the upper entries it looked up, so that a command's write to a
// file dropped under a live mount goes to an unlinked inode and is lost,
// and a dropped opaque directory turns into one that takes no entry (seen
// on Linux 6.18). The caller applies between commands, with the view
// unmounted.
func Apply(upper, project string, paths []string, dryRun bool) (*Applied, error) {
	return ApplyWith(upper, project, paths, ApplyOptions{DryRun: dryRun})
}

// ApplyBounded is Apply, with the apparent size of the files written
// bounded by maxBytes (see ApplyOptions.MaxBytes).
func ApplyBounded(upper, project string, paths []string, dryRun bool, maxBytes int64) (*Applied, error) {
	return ApplyWith(upper, project, paths, ApplyOptions{DryRun: dryRun, MaxBytes: maxBytes})
}

// ApplyWith is Apply with options (see ApplyOptions).
func ApplyWith(upper, project string, paths []string, opt ApplyOptions) (*Applied, error) {
	dryRun, maxBytes := opt.DryRun, opt.MaxBytes
	w := &walker{apply: true}
	if err := w.run(upper, project); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(project)
	if err != nil {
		return nil, fmt.Errorf("opening the project %s: %w", project, err)
	}
	defer root.Close()
	extra, unknown, err := applyExtra(project, opt.Skip)
	if err != nil {
		return nil, fmt.Errorf("finding what git reads and runs in the project: %w", err)
	}

	if opt.Digest != "" && opt.Digest != w.dig.sum() {
		return nil, fmt.Errorf("%w (given %.12s, the layer's now %.12s): review jail_diff again, and pass its digest", ErrDigest, opt.Digest, w.dig.sum())
	}
	a := &applier{w: w, root: root, hooks: extra, hostKinds: map[string]string{}, views: opt.Views}
	res := &Applied{Changes: []Change{}, DryRun: dryRun, Digest: w.dig.sum()}
	sel := a.selectPaths(paths)
	for _, i := range sel {
		reason := a.check(&w.entries[i], sel)
		if reason == "" {
			reason = a.makesRepo(&w.entries[i], sel)
		}
		if reason == "" && unknown != "" {
			reason = unchecked(&w.entries[i], unknown)
		}
		if reason != "" {
			a.refused = append(a.refused, Refusal{Path: w.entries[i].Path, Reason: reason})
		}
	}
	if len(a.refused) == 0 {
		a.refused = a.checkSize(sel, project, maxBytes)
	}
	if len(a.refused) > 0 {
		res.Refused = a.refused
		return res, nil
	}
	if dryRun || len(sel) == 0 {
		for _, i := range sel {
			res.Changes = append(res.Changes, w.entries[i].Change)
		}
		return res, nil
	}

	u, ufd, err := openUpper(upper)
	if err != nil {
		return nil, fmt.Errorf("opening the upper layer %s: %w", upper, err)
	}
	defer u.Close()
	a.ufd = ufd
	if err := a.stage(sel); err != nil {
		a.unstage()
		if len(a.refused) > 0 {
			res.Refused = a.refused
			return res, nil
		}
		return nil, err
	}
	err = a.write(sel, res)
	a.unstage()
	if err != nil {
		return res, err
	}
	if err := a.drop(sel); err != nil {
		return res, err
	}
	return res, nil
}

// applier is one Apply's state.
type applier struct {
	w         *walker
	root      *os.Root
	ufd       int      // the upper directory
	hooks     []string // the project's further protected paths (applyExtra)
	repos     *repoCheck
	refused   []Refusal
	hostKinds map[string]string // the host's type at a path, "" when absent
	views     *Views            // when the views that wrote the layer ran
	staging   string            // the staging directory, relative to the project
	staged    map[int]stagedFile
	modes     []dirMode // the directories made or changed, in the order made
}

// dirMode is a directory's mode, given once everything in it is written.
type dirMode struct {
	rel  string
	perm uint32
}

// testHookStage runs as staging starts: a test swaps a file of the
// layer there, as a command may between the walk and the copy.
var testHookStage func()

// stagedFile is a file of the view copied to the staging directory, with
// the upper file's identity when it was read: the upper file is dropped
// only if still that one, unchanged.
type stagedFile struct {
	name  string
	ino   uint64
	ctime int64
}

// selectPaths returns the entries the paths select, in walk order, and
// refuses the paths that select none. An entry below a directory that a
// selected change deletes or replaces is selected with it, ignored or
// not: it goes too.
func (a *applier) selectPaths(paths []string) []int {
	es := a.w.entries
	sel := make([]bool, len(es))
	for _, given := range paths {
		raw, err := unquote(given)
		if err != nil {
			raw = given
		}
		p, err := Clean(raw)
		if err != nil {
			a.refused = append(a.refused, Refusal{Path: shown(raw), Reason: "bad name: " + err.Error()})
			continue
		}
		found := false
		for i := range es {
			if selects(p, &es[i]) {
				sel[i], found = true, true
			}
		}
		if !found {
			a.refused = append(a.refused, Refusal{Path: shown(p), Reason: "no change"})
		}
	}
	for i := range es {
		if sel[i] && removesHostDir(&es[i]) {
			for j := i + 1; j < len(es) && below(es[j].rel, es[i].rel); j++ {
				sel[j] = true
			}
		}
	}
	var out []int
	for i, s := range sel {
		if s {
			out = append(out, i)
		}
	}
	return out
}

// selects reports whether the path p selects the change e: e is at or
// below p, and p is or lies in e's ignored path if e has one.
func selects(p string, e *entry) bool {
	if p != "." && e.rel != p && !below(e.rel, p) {
		return false
	}
	return e.ignored == "" || p == e.ignored || below(p, e.ignored)
}

// below reports whether p lies below dir.
func below(p, dir string) bool {
	return len(p) > len(dir) && p[len(dir)] == '/' && strings.HasPrefix(p, dir)
}

// removesHostDir reports whether applying e removes a host directory.
func removesHostDir(e *entry) bool {
	return e.Change.Change == deleted && e.Type == "dir" ||
		e.Change.Change == typeChanged && e.HostType == "dir"
}

// unchecked is why e is refused when what the repositories nested in the
// project name is not all known (applyExtra's unknown says why): a file
// written could be one their configuration names. A deletion or a
// directory is no configuration nor program git could take up, and
// applies.
func unchecked(e *entry, unknown string) string {
	if e.Change.Change == deleted || e.Type == "dir" {
		return ""
	}
	return "not checked: " + unknown + ", whose configuration could name this file; only deletions and directories apply"
}

// check is why the selected change e may not be applied, "" when it may.
func (a *applier) check(e *entry, sel []int) string {
	if _, err := Clean(e.rel); err != nil {
		return "bad name: a control or format character, or not UTF-8"
	}
	extra := a.hooks
	if !removesHostDir(e) {
		// Only a removal takes along what a host directory holds: a new
		// directory above the hooks is not itself one.
		extra = slices.DeleteFunc(slices.Clone(extra), func(h string) bool { return below(h, e.rel) })
	}
	if n, ok := Protected(e.rel, extra...); ok {
		return "protected: " + n
	}
	if e.Special && e.Change.Change != deleted {
		return "special: a " + e.Type + " in the view is shown, never applied"
	}
	if e.host && !a.views.HostUnchanged(e.born, e.ctime) {
		return "conflict: the host's entry changed after the view's copy of it was made, " +
			"or after the view that made it looked it up"
	}
	dir := path.Dir(e.rel)
	if dir == "." {
		return ""
	}
	q := ""
	for _, c := range splitPath(dir) {
		q = Join(q, c)
		k, err := a.hostKind(q)
		if err != nil {
			return "not looked at on the host: " + err.Error()
		}
		if k == "" || k == "dir" {
			continue
		}
		if a.replacedByDir(q, sel) {
			return "" // what lies below the replaced entry is new
		}
		if k == "symlink" {
			return "through a host symlink: " + shown(q)
		}
		return "through a host " + k + ": " + shown(q)
	}
	return ""
}

// hostKind is the host's type at q, "" when it has none; every directory
// above q has been found a real one.
func (a *applier) hostKind(q string) (string, error) {
	if k, ok := a.hostKinds[q]; ok {
		return k, nil
	}
	var k string
	fi, err := a.root.Lstat(q)
	switch {
	case err == nil:
		k = fileKind(fi.Mode())
	case errors.Is(err, fs.ErrNotExist):
	default:
		return "", err
	}
	a.hostKinds[q] = k
	return k, nil
}

// replacedByDir reports whether a selected change makes q a directory
// (a type change from the host's link or file).
func (a *applier) replacedByDir(q string, sel []int) bool {
	i, ok := slices.BinarySearchFunc(sel, q, func(i int, q string) int {
		return comparePaths(a.w.entries[i].rel, q)
	})
	if !ok {
		return false
	}
	e := &a.w.entries[sel[i]]
	return e.Change.Change == typeChanged && e.Type == "dir"
}

// comparePaths orders paths as the walk lists them, component by
// component.
func comparePaths(a, b string) int {
	for {
		ac, arest, amore := strings.Cut(a, "/")
		bc, brest, bmore := strings.Cut(b, "/")
		if c := strings.Compare(ac, bc); c != 0 {
			return c
		}
		switch {
		case !amore && !bmore:
			return 0
		case !amore:
			return -1
		case !bmore:
			return 1
		}
		a, b = arest, brest
	}
}

func fileKind(m fs.FileMode) string {
	switch m.Type() {
	case 0:
		return "file"
	case fs.ModeDir:
		return "dir"
	case fs.ModeSymlink:
		return "symlink"
	case fs.ModeNamedPipe:
		return "fifo"
	case fs.ModeSocket:
		return "socket"
	default:
		return "device"
	}
}

// needsData reports whether applying e writes the view's file.
func needsData(e *entry) bool {
	switch e.Change.Change {
	case added, typeChanged:
		return e.Type == "file"
	case modified:
		return e.Type == "file" && !e.sameData
	}
	return false
}

// stage copies every file the selected changes write to the staging
// directory. A file the command swapped since the walk is refused.
func (a *applier) stage(sel []int) error {
	if testHookStage != nil {
		testHookStage()
	}
	name := ".jail-apply-" + rand.Text()[:12]
	if err := a.root.Mkdir(name, 0o700); err != nil {
		return fmt.Errorf("making the staging directory %s: %w", name, err)
	}
	a.staging = name
	a.staged = map[int]stagedFile{}
	for _, i := range sel {
		e := &a.w.entries[i]
		if !needsData(e) {
			continue
		}
		sf, err := a.stageFile(e, path.Join(name, strconv.Itoa(i)))
		if errors.Is(err, errNotRegular) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			a.refused = append(a.refused, Refusal{Path: e.Path, Reason: "changed in the view during the apply"})
			return err
		}
		if err != nil {
			return fmt.Errorf("staging %s: %w", e.Path, err)
		}
		a.staged[i] = sf
	}
	return nil
}

func (a *applier) stageFile(e *entry, dst string) (stagedFile, error) {
	dir, name := path.Split(e.rel)
	dfd := a.ufd
	if dir != "" {
		d, fd, err := openPath(a.ufd, strings.TrimSuffix(dir, "/"))
		if err != nil {
			return stagedFile{}, err
		}
		defer d.Close()
		dfd = fd
	}
	st, ok, err := lstat(dfd, name)
	if err != nil {
		return stagedFile{}, err
	}
	if !ok {
		return stagedFile{}, unix.ENOENT
	}
	src, err := openFile(dfd, name, &st)
	if err != nil {
		return stagedFile{}, err
	}
	defer src.Close()
	// What the file holds now: the command may still be writing it, and
	// a file that grows for ever is copied as far as it was.
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return stagedFile{}, err
	}
	out, err := a.root.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return stagedFile{}, err
	}
	if st.Size > e.Size {
		err = errChanged // grown past what the apply's bounds counted
	} else {
		err = copySparse(out, src, st.Size)
	}
	if err == nil {
		err = out.Chmod(fs.FileMode(perm(&st)))
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return stagedFile{}, err
	}
	e.perm = perm(&st)
	return stagedFile{name: dst, ino: st.Ino, ctime: st.Ctim.Nano()}, nil
}

// unstage removes the staging directory.
func (a *applier) unstage() {
	if a.staging != "" {
		a.root.RemoveAll(a.staging)
		a.staging = ""
	}
}

// write applies the selected changes, parents before what they hold.
// Directories get their modes last, deepest first, so that a read-only
// one is written into first.
func (a *applier) write(sel []int, res *Applied) error {
	viewDirs := map[string]uint32{}
	for i := range a.w.entries {
		if e := &a.w.entries[i]; e.Type == "dir" && e.Change.Change != deleted {
			viewDirs[e.rel] = e.perm
		}
	}
	for _, i := range sel {
		e := &a.w.entries[i]
		if err := a.writeOne(i, e, viewDirs); err != nil {
			return fmt.Errorf("applying %s: %w", e.Path, err)
		}
		if e.Type == "dir" && e.Change.Change != deleted {
			a.modes = append(a.modes, dirMode{e.rel, e.perm})
		}
		res.Changes = append(res.Changes, e.Change)
	}
	for i := len(a.modes) - 1; i >= 0; i-- {
		m := a.modes[i]
		if err := a.root.Chmod(m.rel, fs.FileMode(m.perm)); err != nil {
			return fmt.Errorf("applying the mode of %s: %w", shown(m.rel), err)
		}
	}
	return nil
}

func (a *applier) writeOne(i int, e *entry, viewDirs map[string]uint32) error {
	switch e.Change.Change {
	case deleted:
		return a.removeHost(e.rel, e.Type == "dir")
	case typeChanged:
		if err := a.removeHost(e.rel, e.HostType == "dir"); err != nil {
			return err
		}
	case modified:
		if e.Type == "dir" {
			return nil // its mode comes last
		}
		if e.sameData {
			return a.root.Chmod(e.rel, fs.FileMode(e.perm))
		}
	}
	if err := a.makeParents(e.rel, viewDirs); err != nil {
		return err
	}
	if e.Type == "dir" {
		err := a.root.Mkdir(e.rel, 0o700)
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return err
	}
	err := a.root.Rename(a.staged[i].name, e.rel)
	if errors.Is(err, unix.EXDEV) {
		// Another file system mounted in the project: a copy beside
		// the destination, renamed over it.
		return a.copyOver(a.staged[i].name, e.rel)
	}
	return err
}

// copyOver copies the staged file src to a temporary file beside dst and
// renames it over dst.
func (a *applier) copyOver(src, dst string) error {
	in, err := a.root.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	tmp := path.Join(path.Dir(dst), ".jail-apply-"+rand.Text()[:12])
	out, err := a.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = copySparse(out, in, fi.Size())
	if err == nil {
		err = out.Chmod(fi.Mode().Perm())
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = a.root.Rename(tmp, dst)
	}
	if err != nil {
		a.root.Remove(tmp)
	}
	return err
}

// removeHost removes the host's entry at rel, a directory with all it
// holds; one already gone is fine (its directory went first).
func (a *applier) removeHost(rel string, dir bool) error {
	var err error
	if dir {
		err = a.root.RemoveAll(rel)
	} else {
		err = a.root.Remove(rel)
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	return err
}

// makeParents makes the host directories above rel that the host lacks
// (a file selected without its new directory), with the view's modes.
func (a *applier) makeParents(rel string, viewDirs map[string]uint32) error {
	dir := path.Dir(rel)
	if dir == "." {
		return nil
	}
	q := ""
	for _, c := range splitPath(dir) {
		q = Join(q, c)
		err := a.root.Mkdir(q, 0o700)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		p, ok := viewDirs[q]
		if !ok {
			p = 0o755
		}
		a.modes = append(a.modes, dirMode{q, p})
	}
	return nil
}

// drop removes from the upper layer what the apply wrote to the host, so
// that the view shows the host's entry: each file the command has not
// changed since it was staged, each whiteout, then, deepest first, each
// upper directory left with no change the apply did not write: an empty
// one, or an opaque one whole (what it still holds equals the host's). A
// directory holding a change not applied stays, as does anything the
// command changed meanwhile.
func (a *applier) drop(sel []int) error {
	es := a.w.entries
	applied := make([]bool, len(es))
	for _, i := range sel {
		applied[i] = true
	}
	busy := map[string]bool{} // paths at or above a change not applied
	for i := range es {
		if !applied[i] {
			for q := es[i].rel; !busy[q]; q = path.Dir(q) {
				busy[q] = true
			}
		}
	}
	// In an opaque directory the view shows the upper's entries alone:
	// one dropped there would vanish from the view, so they all go at
	// once, with the opaque directory, when nothing in it is left to
	// apply.
	inOpaque := func(p string) bool {
		for q := path.Dir(p); q != "."; q = path.Dir(q) {
			if a.w.opaque[q] {
				return true
			}
		}
		return false
	}
	dirs := map[string]bool{}
	var first error
	for k := len(sel) - 1; k >= 0; k-- {
		i := sel[k]
		e := &es[i]
		for q := path.Dir(e.rel); q != "."; q = path.Dir(q) {
			dirs[q] = true
		}
		if e.upper == upDir {
			dirs[e.rel] = true
		}
		if inOpaque(e.rel) {
			continue
		}
		var want func(st *unix.Stat_t) bool
		switch {
		case e.upper == upWhiteout:
			want = isWhiteout
		case e.upper == upFile:
			ino, ctime := e.ino, e.uctime
			if sf, ok := a.staged[i]; ok {
				ino, ctime = sf.ino, sf.ctime
			}
			want = func(st *unix.Stat_t) bool {
				return isReg(st) && st.Ino == ino && st.Ctim.Nano() == ctime
			}
		default:
			continue
		}
		if err := a.unlinkUpper(e.rel, want, 0); err != nil && first == nil {
			first = fmt.Errorf("dropping %s from the upper layer: %w", e.Path, err)
		}
	}
	order := make([]string, 0, len(dirs))
	for d := range dirs {
		if !busy[d] && !inOpaque(d) {
			order = append(order, d)
		}
	}
	// Deepest first: a directory after everything it holds.
	slices.SortFunc(order, func(x, y string) int { return -comparePaths(x, y) })
	for _, d := range order {
		if err := a.dropDir(d); err != nil && first == nil {
			first = fmt.Errorf("dropping %s from the upper layer: %w", shown(d), err)
		}
	}
	return first
}

// upperParent opens the upper directory holding rel without following a
// link (the upper's own descriptor for a top entry), and returns it with
// rel's name and what closes it.
func (a *applier) upperParent(rel string) (dfd int, name string, done func(), err error) {
	dir, name := path.Split(rel)
	if dir == "" {
		return a.ufd, name, func() {}, nil
	}
	d, fd, err := openPath(a.ufd, strings.TrimSuffix(dir, "/"))
	if err != nil {
		return -1, "", nil, err
	}
	return fd, name, func() { d.Close() }, nil
}

// unlinkUpper removes the upper entry rel when want says it is still the
// one applied.
func (a *applier) unlinkUpper(rel string, want func(*unix.Stat_t) bool, flags int) error {
	dfd, name, done, err := a.upperParent(rel)
	if err != nil {
		return ignoreGone(err)
	}
	defer done()
	st, ok, err := lstat(dfd, name)
	if err != nil || !ok || !want(&st) {
		return err
	}
	return ignoreGone(unlinkAt(dfd, name, flags))
}

// dropDir removes the upper directory rel: whole when it is opaque,
// only when empty otherwise.
func (a *applier) dropDir(rel string) error {
	dfd, name, done, err := a.upperParent(rel)
	if err != nil {
		return ignoreGone(err)
	}
	defer done()
	d, fd, err := openDir(dfd, name)
	if err != nil {
		return ignoreGone(err)
	}
	opaque := isOpaque(fd)
	d.Close()
	if opaque {
		return removeAllAt(dfd, name, 0)
	}
	err = unlinkAt(dfd, name, unix.AT_REMOVEDIR)
	if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
		return nil // unchanged copies, or the command's new entries
	}
	return ignoreGone(err)
}

// removeAllAt removes the upper entry name of dirfd and all it holds,
// never following a link.
func removeAllAt(dirfd int, name string, depth int) error {
	err := unlinkAt(dirfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	if depth > maxDepth {
		return fmt.Errorf("more than %d directories deep", maxDepth)
	}
	d, fd, err := openDir(dirfd, name)
	if err != nil {
		return ignoreGone(err)
	}
	ns, err := names(d)
	for _, n := range ns {
		if err == nil {
			err = removeAllAt(fd, n, depth+1)
		}
	}
	d.Close()
	if err != nil {
		return err
	}
	return ignoreGone(unlinkAt(dirfd, name, unix.AT_REMOVEDIR))
}

// unlinkAt is unlinkat, tried again with the owner's rights given to the
// directory for the while when it was refused for want of them (a
// command's chmod 555 in its own layer): the server owns the layer, and
// an entry left there would keep showing as a change.
func unlinkAt(dirfd int, name string, flags int) error {
	err := unix.Unlinkat(dirfd, name, flags)
	if !errors.Is(err, unix.EACCES) {
		return err
	}
	var st unix.Stat_t
	if unix.Fstat(dirfd, &st) != nil || uint32(st.Mode)&0o700 == 0o700 {
		return err
	}
	mode := uint32(st.Mode) & 0o7777
	if unix.Fchmod(dirfd, mode|0o700) != nil {
		return err
	}
	defer unix.Fchmod(dirfd, mode)
	return unix.Unlinkat(dirfd, name, flags)
}

func ignoreGone(err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return nil
	}
	return err
}
