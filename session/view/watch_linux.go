package view

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The project view's watch (--overlay): a view caches the entries of the
// project that its calls looked up, and overlayfs leaves changes of its
// lower layer undefined under it, so a session agent keeps a view only
// while the host changes nothing of the project's directories. The server
// watches them once for all its sessions (inotify: an entry made, removed,
// renamed, or changed in mode or owner; what an edit writes into a file in
// place shows through any view), and numbers what it saw: each call
// carries the number (jail.Call.ViewGen), and an agent enters a view made
// at that number or makes one. A watch that cannot see everything (more
// directories than maxWatches, a lost event) gives 0: every call then
// gets a view of its own, mounted ahead and untouched until it runs.
//
// A watch is blind as soon as it may have missed a change: a watch it
// could not add (the user's fs.inotify.max_user_watches used up, which
// every process of the user draws on), one the kernel dropped (IN_IGNORED
// of a directory that was not deleted), a lost event (IN_Q_OVERFLOW), or
// more directories than its bound. A blind watch lets its watches go and
// tries again from scratch, later and later (rearmFirst, to rearmLast):
// once every directory is watched again, a new number starts.

// viewQuiet is how long after a change the agents ready a new view: an
// editor's save or a checkout is many changes at once.
const viewQuiet = 20 * time.Millisecond

// rearmFirst and rearmLast bound the wait of a blind watch before it
// tries again: watches free up when the processes that hold them end,
// which tells nothing to the watch.
const (
	rearmFirst = 100 * time.Millisecond
	rearmLast  = 30 * time.Second
)

const viewEvents = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ATTRIB | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// watch watches a project's directories but those skipped.
type watch struct {
	project string
	stop    int // an eventfd: close asks serve to end, which closes fd
	skip    []string
	max     int
	// tooMany: the last arm found more than max directories; the next
	// counts them first, taking no watch while there are still too
	// many (serve's goroutine alone, or newWatch before it).
	tooMany  bool
	onChange func(gen uint64) // after viewQuiet, with the number then
	log      *slog.Logger

	mu    sync.Mutex
	fd    int // the inotify instance, -1 while blind
	gen   uint64
	blind string // why the watch may have missed a change; "" when it sees all
	// since is when it went blind.
	since   time.Time
	pending bool // a change waits its viewQuiet
}

// armed is one inotify instance with every directory watched.
type armed struct {
	fd   int
	dirs map[int32]string
	// deleted are the watches of directories removed (IN_DELETE_SELF):
	// the kernel drops them, which is no blindness.
	deleted map[int32]bool
}

// newWatch watches project's directories but skip's (the jails, the
// directories commands write in place), at most max; a watch that cannot
// start or see them all is blind until it can.
func newWatch(project string, skip []string, max int, onChange func(uint64), log *slog.Logger) *watch {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &watch{project: project, fd: -1, stop: -1, skip: skip, max: max, onChange: onChange, log: log, gen: 1}
	var err error
	if w.stop, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		w.blind, w.since = "no eventfd: "+err.Error(), time.Now()
		return w
	}
	a, why := w.arm()
	w.mu.Lock()
	if a != nil {
		w.fd = a.fd
	} else {
		w.blind, w.since = why, time.Now()
	}
	w.mu.Unlock()
	if why != "" {
		w.log.Warn("the project's watch is blind: every call gets a view of its own until it sees all again", "why", why)
	}
	go w.serve(a)
	return w
}

// arm makes an instance and watches every directory, or says why it
// could not (the instance then closed, its watches let go).
func (w *watch) arm() (*armed, string) {
	tooMany := fmt.Sprintf("more than %d directories", w.max)
	if w.tooMany && w.count() > w.max {
		return nil, tooMany
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, "no inotify instance: " + err.Error()
	}
	a := &armed{fd: fd, dirs: map[int32]string{}, deleted: map[int32]bool{}}
	why := w.add(a, w.project)
	w.tooMany = why == tooMany
	if why != "" {
		unix.Close(fd)
		return nil, why
	}
	return a, ""
}

// count is how many directories add would watch, up to max+1.
func (w *watch) count() int {
	n := 0
	filepath.WalkDir(w.project, func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil || !d.IsDir():
			return nil
		case slices.Contains(w.skip, p):
			return filepath.SkipDir
		case n > w.max:
			return filepath.SkipAll
		}
		n++
		return nil
	})
	return n
}

// add watches dir and every directory below it; it says why when it
// could not watch one (a directory gone meanwhile is none).
func (w *watch) add(a *armed, dir string) string {
	why := ""
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
				return nil // gone since it was listed
			}
			why = "list " + p + ": " + err.Error()
			return filepath.SkipAll
		}
		if !d.IsDir() {
			return nil
		}
		if slices.Contains(w.skip, p) {
			return filepath.SkipDir
		}
		if len(a.dirs) >= w.max {
			why = fmt.Sprintf("more than %d directories", w.max)
			return filepath.SkipAll
		}
		wd, err := unix.InotifyAddWatch(a.fd, p, viewEvents)
		switch {
		case err == nil:
			a.dirs[int32(wd)] = p
			delete(a.deleted, int32(wd))
		case err == unix.ENOENT || err == unix.ENOTDIR:
			return filepath.SkipDir // gone, or no longer a directory
		default:
			why = "watch " + p + ": " + err.Error()
			return filepath.SkipAll
		}
		return nil
	})
	return why
}

// serve reads the watch's events until it is closed: a new number for
// each batch, the directories made since watched; blind, it lets its
// watches go and arms again after a wait.
func (w *watch) serve(a *armed) {
	// The descriptors are closed here, never while this reads them (a
	// number closed under a read could name another file by then).
	defer func() {
		w.mu.Lock()
		if w.blind == "" {
			w.blind, w.since = "closed", time.Now()
		}
		if a != nil {
			unix.Close(a.fd)
		}
		unix.Close(w.stop)
		w.fd, w.stop = -1, -1
		w.mu.Unlock()
	}()
	buf := make([]byte, 64<<10)
	wait := rearmFirst
	for {
		if a == nil {
			if !w.sleep(wait) {
				return
			}
			var why string
			if a, why = w.arm(); a == nil {
				wait = min(2*wait, rearmLast)
				w.mu.Lock()
				w.blind = why
				w.mu.Unlock()
				continue
			}
			wait = rearmFirst
			w.sees(a.fd)
			continue
		}
		pfd := []unix.PollFd{{Fd: int32(a.fd), Events: unix.POLLIN}, {Fd: int32(w.stop), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, -1); err != nil && err != unix.EINTR {
			return
		}
		if pfd[1].Revents != 0 || pfd[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
			return
		}
		if pfd[0].Revents == 0 {
			continue
		}
		w.changed()
		n, err := unix.Read(a.fd, buf)
		if err != nil && err != unix.EAGAIN && err != unix.EINTR {
			return
		}
		if why := w.read(a, buf[:max(n, 0)]); why != "" {
			w.goBlind(a.fd, why)
			a = nil
		}
	}
}

// changed takes a new number before the events leave the queue (which a
// call's look, current, reads as a change too), and tells the agents
// after viewQuiet.
func (w *watch) changed() {
	w.mu.Lock()
	w.gen++
	notify := !w.pending
	w.pending = true
	w.mu.Unlock()
	if notify && w.onChange != nil {
		time.AfterFunc(viewQuiet, func() {
			w.mu.Lock()
			w.pending = false
			gen := w.gen
			if w.blind != "" {
				gen = 0
			}
			w.mu.Unlock()
			w.onChange(gen)
		})
	}
}

// read handles the events in buf, and says why the watch is blind when
// it may have missed a change.
func (w *watch) read(a *armed, buf []byte) string {
	added, why := false, ""
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		end := off + unix.SizeofInotifyEvent + int(ev.Len)
		if ev.Len > uint32(len(buf)) || end > len(buf) {
			break // not an event the kernel wrote whole
		}
		name := unix.ByteSliceToString(buf[off+unix.SizeofInotifyEvent : end])
		off = end
		switch {
		case ev.Mask&unix.IN_Q_OVERFLOW != 0:
			why = "events lost (the kernel's queue overflowed)"
		case ev.Mask&unix.IN_DELETE_SELF != 0:
			a.deleted[ev.Wd] = true
		case ev.Mask&unix.IN_IGNORED != 0:
			if !a.deleted[ev.Wd] && why == "" {
				why = "the kernel dropped the watch of " + a.dirs[ev.Wd]
			}
			delete(a.dirs, ev.Wd)
			delete(a.deleted, ev.Wd)
		case ev.Mask&unix.IN_ISDIR != 0 && ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
			if parent, ok := a.dirs[ev.Wd]; ok && why == "" {
				added = true
				why = w.add(a, filepath.Join(parent, name))
			}
		}
	}
	if added {
		// What was made in a new directory before its watch made no
		// event: a view made meanwhile may miss it.
		w.mu.Lock()
		w.gen++
		w.mu.Unlock()
	}
	return why
}

// goBlind closes the instance fd, which lets its watches go, and numbers
// every call 0 until the watch arms again.
func (w *watch) goBlind(fd int, why string) {
	w.mu.Lock()
	w.blind, w.since = why, time.Now()
	unix.Close(fd)
	w.fd = -1
	w.mu.Unlock()
	w.log.Warn("the project's watch is blind: every call gets a view of its own until it sees all again", "why", why)
	if w.onChange != nil {
		w.onChange(0)
	}
}

// sees makes fd the watch's instance: a new number, as anything may
// have changed while it was blind.
func (w *watch) sees(fd int) {
	w.mu.Lock()
	blind := time.Since(w.since)
	w.fd, w.blind = fd, ""
	w.gen++
	gen := w.gen
	w.mu.Unlock()
	w.log.Info("the project's watch sees all again", "blind_for", blind.Round(time.Millisecond))
	if w.onChange != nil {
		w.onChange(gen)
	}
}

// sleep waits d, false when the watch is closed meanwhile.
func (w *watch) sleep(d time.Duration) bool {
	pfd := []unix.PollFd{{Fd: int32(w.stop), Events: unix.POLLIN}}
	_, err := unix.Poll(pfd, int(d.Milliseconds()))
	return (err == nil || err == unix.EINTR) && pfd[0].Revents == 0
}

// current is the number of the project as it is now, 0 when the watch is
// blind: a change not read yet makes a new number.
func (w *watch) current() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.blind != "" || w.fd < 0 {
		return 0
	}
	if n, err := unix.IoctlGetInt(w.fd, unix.TIOCINQ); err != nil || n > 0 {
		w.gen++
	}
	return w.gen
}

// state says why the watch is blind and since when, "" when it sees all.
func (w *watch) state() (string, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.blind, w.since
}

// close ends the watch: serve closes its descriptors.
func (w *watch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop >= 0 {
		unix.Write(w.stop, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	}
}
