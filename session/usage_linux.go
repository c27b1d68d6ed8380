package session

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

// usageWatch keeps the usage of every jail in use current from the
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
type usageWatch struct {
	log *slog.Logger

	mu     sync.Mutex
	fd     int // the inotify instance; -1: none, every jail is walked
	budget int // watches this manager may hold at once
	buf    []byte
	wds    map[int32]*wdir
	jails  map[*Session]*wjail
}

// errNoWatches reports that a jail needs more watches than the budget
// leaves.
var errNoWatches = fmt.Errorf("more directories than the inotify watches jail-mcp may use: %w", unix.ENOSPC)

// wjail is a jail's watched tree.
type wjail struct {
	base   *os.Root // the jail base
	name   string   // the jail's name in it
	root   *wdir
	usage  Usage
	rescan bool // scan again at the next look
	walked bool // not watched: walked by the caller until the next reset
	seed   maphash.Seed
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
	// files holds every entry but directories, by the hash of its name
	// (nameKey): its size (regular files) or 0. A map with neither keys
	// nor values that point is not scanned by the garbage collector: a
	// jail of 100,000 files would otherwise cost the server's every
	// collection a walk of them (measured: a call 20% slower).
	files map[uint64]int64
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

func newUsageWatch(log *slog.Logger) *usageWatch {
	w := &usageWatch{log: log, fd: -1, wds: map[int32]*wdir{}, jails: map[*Session]*wjail{}}
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

func (w *usageWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
	w.wds, w.jails = map[int32]*wdir{}, map[*Session]*wjail{}
}

// usage returns s's usage, exact as of now, scanning the jail on its
// first look; ok is false when it cannot be kept here, and the caller
// walks the jail instead.
func (w *usageWatch) usage(s *Session) (u Usage, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return Usage{}, false
	}
	w.read()
	j := w.jails[s]
	if j != nil && j.walked {
		return Usage{}, false
	}
	if j == nil || j.rescan {
		if j != nil {
			w.drop(j)
		}
		var err error
		if j, err = w.scan(s); err != nil {
			// Not watched until a reset empties the jail: a scan that
			// failed would fail again, and cost a walk each time.
			w.jails[s] = &wjail{walked: true}
			if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.ENOMEM) {
				w.log.Warn("no inotify watch left for this jail: the disk bound walks it instead, at most once a second",
					"session", s.Name, "err", err, "watching", len(w.wds), "fix", "sudo sysctl -w fs.inotify.max_user_watches=1048576")
			} else {
				w.log.Warn("the disk bound walks this jail, at most once a second: it cannot be watched", "session", s.Name, "err", err)
			}
			return Usage{}, false
		}
		w.jails[s] = j
	}
	return j.usage, true
}

// forget stops watching s's jail: before a reset empties it, and when the
// session ends.
func (w *usageWatch) forget(s *Session) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if j := w.jails[s]; j != nil {
		w.drop(j)
		delete(w.jails, s)
	}
}

// read takes every event queued and brings the jails they name up to
// date.
func (w *usageWatch) read() {
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
func (w *usageWatch) settle(d *wdir) {
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

// scan watches and counts s's jail.
func (w *usageWatch) scan(s *Session) (*wjail, error) {
	j := &wjail{base: s.m.base, name: s.Name, seed: maphash.MakeSeed()}
	b, err := j.base.Open(".")
	if err != nil {
		return nil, err
	}
	defer b.Close()
	f, restore, err := openBelow(int(b.Fd()), j.name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	defer restore()
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
func (w *usageWatch) scanDir(j *wjail, parent *wdir, parentFd int, name string) error {
	f, restore, err := openBelow(parentFd, name)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return nil // gone or replaced already: its parent's events say what came instead
		}
		return err
	}
	defer f.Close()
	defer restore() // first: through f's descriptor
	d, err := w.watch(j, parent, name, f)
	if err != nil {
		return err
	}
	return w.fill(j, d, f)
}

// watch adds the watch of the directory open as f and its node.
func (w *usageWatch) watch(j *wjail, parent *wdir, name string, f *os.File) (*wdir, error) {
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
	d := &wdir{j: j, wd: int32(wd), ino: st.Ino, parent: parent, name: name, files: map[uint64]int64{}, dirs: map[string]*wdir{}}
	w.wds[int32(wd)] = d
	if parent != nil {
		parent.dirs[name] = d
	}
	return d, nil
}

// fill counts the entries of d, open as f, and scans its directories.
func (w *usageWatch) fill(j *wjail, d *wdir, f *os.File) error {
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

// open opens the watched directory d, from the jail base down; restore
// gives it back the mode it had, where it had to be opened up.
func (w *usageWatch) open(d *wdir) (f *os.File, restore func(), err error) {
	names := []string{}
	for x := d; x.parent != nil; x = x.parent {
		names = append(names, x.name)
	}
	names = append(names, d.j.name)
	f, err = d.j.base.Open(".")
	if err != nil {
		return nil, nil, err
	}
	restore = func() {}
	for i := len(names) - 1; i >= 0; i-- {
		// Opening the next one needs the rights on this one; nothing
		// after it does.
		next, again, err := openBelow(int(f.Fd()), names[i])
		restore()
		f.Close()
		if err != nil {
			return nil, nil, err
		}
		f, restore = next, again
	}
	return f, restore, nil
}

// drop removes every watch of j.
func (w *usageWatch) drop(j *wjail) {
	if j.root != nil {
		j.root.unwatch(w)
	}
}

// remove takes the entry name out of d: a file, or a directory with
// everything below it.
func (d *wdir) remove(w *usageWatch, name string) {
	if size, ok := d.files[d.j.key(name)]; ok {
		d.j.usage.Files--
		d.j.usage.Bytes -= size
		delete(d.files, d.j.key(name))
	}
	if sub := d.dirs[name]; sub != nil {
		delete(d.dirs, name)
		sub.unwatch(w)
	}
}

// unwatch removes the watches of d and everything below it, and takes
// what they held out of the usage.
func (d *wdir) unwatch(w *usageWatch) {
	for _, sub := range d.dirs {
		sub.unwatch(w)
	}
	for _, size := range d.files {
		d.j.usage.Files--
		d.j.usage.Bytes -= size
	}
	d.files, d.dirs = map[uint64]int64{}, map[string]*wdir{}
	if d.wd >= 0 {
		if w.wds[d.wd] == d {
			delete(w.wds, d.wd)
			unix.InotifyRmWatch(w.fd, uint32(d.wd))
		}
		d.wd = -1
	}
}

// setFile counts a non-directory entry: regular files by size, the rest
// (symlinks, FIFOs, sockets) as files of no bytes, as the walk does.
func (d *wdir) setFile(name string, st *unix.Stat_t) {
	size := int64(0)
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		size = st.Size
	}
	k := d.j.key(name)
	old, ok := d.files[k]
	if !ok {
		d.j.usage.Files++
	}
	d.j.usage.Bytes += size - old
	d.files[k] = size
}

// openBelow opens the directory name of the directory parentFd for
// reading, never following a symlink. A directory the server may not read
// or search (a command's chmod 000 in its own jail) is given the owner's
// rights for as long as restore is not called, then its mode back; the
// mode is changed through the descriptor's magic link, so never on what a
// command swapped in since.
func openBelow(parentFd int, name string) (f *os.File, restore func(), err error) {
	restore = func() {}
	fd, err := unix.Openat(parentFd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		return os.NewFile(uintptr(fd), name), restore, nil
	}
	if !errors.Is(err, unix.EACCES) {
		return nil, restore, err
	}
	pfd, perr := unix.Openat(parentFd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if perr != nil {
		return nil, restore, err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, restore, err
	}
	link := "/proc/self/fd/" + strconv.Itoa(pfd)
	mode := st.Mode & 0o7777
	if err := unix.Chmod(link, mode|0o700); err != nil {
		return nil, restore, err
	}
	fd, err = unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Chmod(link, mode)
		return nil, restore, err
	}
	// The mode goes back through the directory's own descriptor, which
	// stays open until then.
	dir := os.NewFile(uintptr(fd), name)
	return dir, func() { unix.Fchmod(fd, mode) }, nil
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
