package jailfs

import (
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// UsageWatch keeps the usage of every jail in use current from the
// kernel's inotify events, so that a look at a jail's usage costs what
// changed since the last look, not a walk of the jail (half a second for
// 100,000 files). One inotify instance serves a manager: the kernel allows
// a user 128 of them.
//
// A jail is scanned once, on the first look, with a watch on each of its
// directories added before the directory is read, so that nothing made
// after the read goes unseen. An event names an entry of a watched
// directory; the entry is looked at again (fstatat, never following a
// symlink) when the events are next read: on every look, which the
// watchdog makes every tick while commands run. When the kernel's queue
// overflowed, or an entry cannot be looked at, the jail is scanned again.
// Where no watch can be added (the user's inotify watches are used up),
// the jail is left to the walk the other systems use.
type UsageWatch struct {
	log  *slog.Logger
	base *os.Root // the jail base: a jail is a directory of it, by name

	mu     sync.Mutex
	fd     int // the inotify instance; -1: none, every jail is walked
	budget int // watches this manager may hold at once
	buf    []byte
	wds    map[int32]*wdir
	jails  map[string]*wjail // by the jail's name
	// tick numbers the events read and the jails scanned (Changes).
	tick uint64
}

// errNoWatches reports that a jail needs more watches than the budget
// leaves.
var errNoWatches = fmt.Errorf("more directories than the inotify watches jail-mcp may use: %w", unix.ENOSPC)

// watchDepth is the deepest directory of a watched jail, below the jail:
// a look at a directory opens it from the jail base down, a step per
// level, so a jail deeper than this is walked instead (by descriptors,
// off the watchdog's loop: walk_unix.go) rather than made to cost each
// event its depth. No project's tree comes near it.
const watchDepth = 128

// errTooDeep reports a jail with a directory deeper than watchDepth.
var errTooDeep = fmt.Errorf("a directory more than %d levels deep", watchDepth)

// wjail is a jail's watched tree.
type wjail struct {
	base  *os.Root // the jail base
	name  string   // the jail's name in it
	root  *wdir
	usage Usage
	// inodes are the jail's inodes but directories, by number: the
	// blocks each takes and how many of its names the jail holds, so
	// that a hard link counts once.
	inodes map[uint64]inode
	rescan bool // scan again at the next look
	walked bool // not watched: walked by the caller until the next reset
	seed   maphash.Seed
	// scanned is the tick of its scan, changed the tick of the latest
	// event below each directory two levels down (Changes).
	scanned uint64
	changed map[string]uint64
}

// inode is a counted inode: no pointer, so that the garbage collector
// does not scan a jail's map of them.
type inode struct {
	blocks int64 // bytes
	names  int32
}

// key is the hash of an entry's name, with a seed of the jail's that no
// command can know: names a command makes to collide would merge two
// files into one count.
func (j *wjail) key(name string) uint64 { return maphash.String(j.seed, name) }

// wdir is a watched directory of a jail.
type wdir struct {
	j      *wjail
	wd     int32 // -1 once the watch is gone
	ino    uint64
	parent *wdir // nil for the jail itself
	name   string
	depth  int   // below the jail: 0 for the jail itself
	blocks int64 // the directory's own bytes on disk, counted unless the jail itself
	// files holds every entry but directories, by the hash of its name
	// (key): its inode number, in j.inodes. A map with neither keys nor
	// values that point is not scanned by the garbage collector: a jail
	// of 100,000 files would otherwise cost the server's every collection
	// a walk of them (measured: a call 20% slower).
	files map[uint64]uint64
	dirs  map[string]*wdir
	// pending are the entries events named since the last look.
	pending map[string]bool
}

// watchMask is what changes the usage below a directory: entries made,
// removed, moved in or out, and a file's size (write, truncate and
// fallocate all report IN_MODIFY). Writes to a file already unlinked are
// not reported: no walk of the jail counts such a file either.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// NewUsageWatch returns the usage watch of the jails of base.
func NewUsageWatch(log *slog.Logger, base *os.Root) *UsageWatch {
	w := &UsageWatch{log: log, base: base, fd: -1, wds: map[int32]*wdir{}, jails: map[string]*wjail{}}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		log.Warn("no inotify instance: the disk bound walks each jail instead, at most once a second", "err", err)
		return w
	}
	w.fd, w.buf = fd, make([]byte, 64<<10)
	// Watches are the user's, shared with every program it runs (an
	// editor, a file manager): a jail of a million directories must not
	// take them all. Half is left to the rest.
	w.budget = 8192 / 2
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
			w.budget = n / 2
		}
	}
	return w
}

// Close stops watching every jail.
func (w *UsageWatch) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
	w.wds, w.jails = map[int32]*wdir{}, map[string]*wjail{}
}

// Usage returns the usage of the jail name, exact as of now, scanning
// the jail on its first look; ok is false when it cannot be kept here,
// and the caller walks the jail instead.
func (w *UsageWatch) Usage(name string) (u Usage, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return Usage{}, false
	}
	w.read()
	j := w.jails[name]
	if j != nil && j.walked {
		return Usage{}, false
	}
	if j == nil || j.rescan {
		if j != nil {
			w.drop(j)
		}
		var err error
		if j, err = w.scan(name); err != nil {
			// Not watched until a reset empties the jail: a scan that
			// failed would fail again, and cost a walk each time.
			w.jails[name] = &wjail{walked: true}
			if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.ENOMEM) {
				w.log.Warn("no inotify watch left for this jail: the disk bound walks it instead, at most once a second",
					"session", name, "err", err, "watching", len(w.wds), "fix", "sudo sysctl -w fs.inotify.max_user_watches=1048576")
			} else {
				w.log.Warn("the disk bound walks this jail, at most once a second: it cannot be watched", "session", name, "err", err)
			}
			return Usage{}, false
		}
		w.jails[name] = j
	}
	return j.usage, true
}

// Changes numbers the changes below sub, a directory two levels below
// the jail name (e.g. ".overlay/upper"): the number moves when an entry
// below it was made, removed, moved or written since the last look, and
// when the jail was scanned again. ok is false when the jail is not
// watched (or may have missed an event): the caller then looks itself.
func (w *UsageWatch) Changes(name, sub string) (n uint64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return 0, false
	}
	w.read()
	j := w.jails[name]
	if j == nil || j.walked || j.rescan {
		return 0, false
	}
	return max(j.scanned, j.changed[sub]), true
}

// second is the path of d's ancestor two levels below the jail (d
// itself at that level), "" above it.
func (d *wdir) second() string {
	if d.depth < 2 {
		return ""
	}
	for d.depth > 2 {
		d = d.parent
	}
	return d.parent.name + "/" + d.name
}

// Forget stops watching the jail name: before a reset empties it, and
// when its session ends.
func (w *UsageWatch) Forget(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if j := w.jails[name]; j != nil {
		w.drop(j)
		delete(w.jails, name)
	}
}

// read takes every event queued and brings the jails they name up to
// date.
func (w *UsageWatch) read() {
	var touched []*wdir
	for {
		n, err := unix.Read(w.fd, w.buf)
		if n <= 0 || err != nil {
			break
		}
		for b := w.buf[:n]; len(b) >= unix.SizeofInotifyEvent; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
			end := unix.SizeofInotifyEvent + int(ev.Len)
			if end > len(b) {
				break
			}
			name := cString(b[unix.SizeofInotifyEvent:end])
			b = b[end:]
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				for _, j := range w.jails {
					j.rescan = !j.walked
				}
			case ev.Mask&unix.IN_IGNORED != 0:
				if d := w.wds[ev.Wd]; d != nil {
					delete(w.wds, ev.Wd)
					d.wd = -1
				}
			default:
				d := w.wds[ev.Wd]
				if d == nil || name == "" || d.j.rescan {
					continue
				}
				if d.pending == nil {
					d.pending = map[string]bool{}
					touched = append(touched, d)
				}
				d.pending[name] = true
				if sub := d.second(); sub != "" {
					w.tick++
					d.j.changed[sub] = w.tick
				}
			}
		}
	}
	for _, d := range touched {
		if !d.j.rescan {
			w.settle(d)
		}
		d.pending = nil
	}
}

// settle looks again at the entries of d that events named.
func (w *UsageWatch) settle(d *wdir) {
	if d.wd < 0 {
		return // gone: its parent's events remove it
	}
	f, restore, err := w.open(d)
	if err != nil {
		d.j.rescan = true
		return
	}
	defer f.Close()
	defer restore()
	fd := int(f.Fd())
	if d.parent != nil {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err == nil && st.Ino == d.ino {
			d.setBlocks(&st)
		}
	}
	for name := range d.pending {
		var st unix.Stat_t
		err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case errors.Is(err, unix.ENOENT):
			d.remove(w, name)
		case err != nil:
			d.j.rescan = true
			return
		case st.Mode&unix.S_IFMT == unix.S_IFDIR:
			if sub := d.dirs[name]; sub != nil && sub.ino == st.Ino && sub.wd >= 0 {
				continue // itself, with its watch: its own events count it
			}
			d.remove(w, name)
			if err := w.scanDir(d.j, d, fd, name); err != nil {
				d.j.rescan = true
				return
			}
		default:
			if d.dirs[name] != nil {
				d.remove(w, name)
			}
			d.setFile(name, &st)
		}
	}
}

// scan watches and counts the jail name.
func (w *UsageWatch) scan(name string) (*wjail, error) {
	w.tick++
	j := &wjail{base: w.base, name: name, seed: maphash.MakeSeed(), inodes: map[uint64]inode{}, scanned: w.tick, changed: map[string]uint64{}}
	b, err := j.base.Open(".")
	if err != nil {
		return nil, err
	}
	defer b.Close()
	f, mode, err := openBelow(int(b.Fd()), j.name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	defer restoreMode(f, mode)
	root, err := w.watch(j, nil, "", f)
	if err != nil {
		return nil, err
	}
	j.root = root
	if err := w.fill(j, root, f); err != nil {
		w.drop(j)
		return nil, err
	}
	return j, nil
}

// scanDir watches and counts the directory name of parent, whose
// descriptor is parentFd: opened below it without following a symlink,
// and opened up for the scan when a command took the server's rights on
// it away (chmod 000), then given its mode back.
func (w *UsageWatch) scanDir(j *wjail, parent *wdir, parentFd int, name string) error {
	if parent.depth >= watchDepth {
		return errTooDeep
	}
	f, mode, err := openBelow(parentFd, name)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return nil // gone or replaced already: its parent's events say what came instead
		}
		return err
	}
	defer f.Close()
	defer restoreMode(f, mode) // first: through f's descriptor
	d, err := w.watch(j, parent, name, f)
	if err != nil {
		return err
	}
	return w.fill(j, d, f)
}

// watch adds the watch of the directory open as f and its node.
func (w *UsageWatch) watch(j *wjail, parent *wdir, name string, f *os.File) (*wdir, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	if len(w.wds) >= w.budget {
		return nil, errNoWatches
	}
	// By the descriptor's magic link: the very directory opened, never a
	// path a command could have changed since.
	wd, err := unix.InotifyAddWatch(w.fd, "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), watchMask)
	if err != nil {
		return nil, err
	}
	if old := w.wds[int32(wd)]; old != nil {
		// The same directory, met again at a new place (moved there
		// between two looks): the old node goes, the watch stays.
		old.wd = -1
		if old.parent != nil && old.parent.dirs[old.name] == old {
			old.parent.remove(w, old.name)
		}
	}
	d := &wdir{j: j, wd: int32(wd), ino: st.Ino, parent: parent, name: name, files: map[uint64]uint64{}, dirs: map[string]*wdir{}}
	w.wds[int32(wd)] = d
	if parent != nil {
		parent.dirs[name] = d
		d.depth = parent.depth + 1
		d.setBlocks(&st)
		j.usage.Files++
	}
	return d, nil
}

// fill counts the entries of d, open as f, and scans its directories.
func (w *UsageWatch) fill(j *wjail, d *wdir, f *os.File) error {
	fd := int(f.Fd())
	for {
		names, err := f.Readdirnames(1024)
		for _, name := range names {
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue // gone already
			}
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				d.setFile(name, &st)
				continue
			}
			if err := w.scanDir(j, d, fd, name); err != nil {
				return err
			}
		}
		if err == io.EOF || len(names) == 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// open opens the watched directory d, from the jail base down (at most
// watchDepth steps); restore gives it back the mode it had, where it had
// to be opened up.
func (w *UsageWatch) open(d *wdir) (f *os.File, restore func(), err error) {
	names := []string{}
	for x := d; x.parent != nil; x = x.parent {
		names = append(names, x.name)
	}
	names = append(names, d.j.name)
	f, err = d.j.base.Open(".")
	if err != nil {
		return nil, nil, err
	}
	mode := noRestore
	for i := len(names) - 1; i >= 0; i-- {
		// Opening the next one needs the rights on this one; nothing
		// after it does.
		next, again, err := openBelow(int(f.Fd()), names[i])
		restoreMode(f, mode)
		f.Close()
		if err != nil {
			return nil, nil, err
		}
		f, mode = next, again
	}
	return f, func() { restoreMode(f, mode) }, nil
}

// drop removes every watch of j.
func (w *UsageWatch) drop(j *wjail) {
	if j.root != nil {
		j.root.unwatch(w)
	}
}

// remove takes the entry name out of d: a file, or a directory with
// everything below it.
func (d *wdir) remove(w *UsageWatch, name string) {
	k := d.j.key(name)
	if ino, ok := d.files[k]; ok {
		delete(d.files, k)
		d.j.unref(ino)
	}
	if sub := d.dirs[name]; sub != nil {
		delete(d.dirs, name)
		sub.unwatch(w)
	}
}

// unwatch removes the watches of d and everything below it, and takes
// what they held out of the usage, d itself included.
func (d *wdir) unwatch(w *UsageWatch) {
	for _, sub := range d.dirs {
		sub.unwatch(w)
	}
	for _, ino := range d.files {
		d.j.unref(ino)
	}
	d.files, d.dirs = map[uint64]uint64{}, map[string]*wdir{}
	if d.parent != nil {
		d.j.usage.Files--
		d.j.usage.Bytes -= d.blocks
		d.blocks = 0
		d.parent = nil // counted once
	}
	if d.wd >= 0 {
		if w.wds[d.wd] == d {
			delete(w.wds, d.wd)
			unix.InotifyRmWatch(w.fd, uint32(d.wd))
		}
		d.wd = -1
	}
}

// setBlocks counts the blocks of the directory d (not the jail itself)
// anew: a directory grows with its entries.
func (d *wdir) setBlocks(st *unix.Stat_t) {
	b := st.Blocks * 512
	d.j.usage.Bytes += b - d.blocks
	d.blocks = b
}

// setFile counts a non-directory entry, of any kind, by the blocks its
// inode takes, a hard link once.
func (d *wdir) setFile(name string, st *unix.Stat_t) {
	j := d.j
	k := j.key(name)
	if old, ok := d.files[k]; ok {
		if old == st.Ino {
			in := j.inodes[old]
			j.usage.Bytes += st.Blocks*512 - in.blocks
			in.blocks = st.Blocks * 512
			j.inodes[old] = in
			return
		}
		j.unref(old)
	}
	d.files[k] = st.Ino
	in, ok := j.inodes[st.Ino]
	if !ok {
		j.usage.Files++
	}
	j.usage.Bytes += st.Blocks*512 - in.blocks
	in.blocks = st.Blocks * 512
	in.names++
	j.inodes[st.Ino] = in
}

// unref takes one of the inode's names out; its last takes the inode out.
func (j *wjail) unref(ino uint64) {
	in, ok := j.inodes[ino]
	if !ok {
		return
	}
	if in.names--; in.names > 0 {
		j.inodes[ino] = in
		return
	}
	delete(j.inodes, ino)
	j.usage.Files--
	j.usage.Bytes -= in.blocks
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
