package session

import (
	"errors"
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
// directories than maxViewWatches, a lost event) gives 0: every call then
// gets a view of its own, mounted ahead and untouched until it runs.

// maxViewWatches bounds the project directories the server watches (each
// takes some kernel memory of the user's).
const maxViewWatches = 50000

// viewQuiet is how long after a change the agents ready a new view: an
// editor's save or a checkout is many changes at once.
const viewQuiet = 20 * time.Millisecond

const viewEvents = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ATTRIB | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// viewWatch watches a project's directories but those skipped.
type viewWatch struct {
	fd       int
	stop     int // an eventfd: close asks serve to end, which closes fd
	skip     []string
	max      int
	onChange func(gen uint64) // after viewQuiet, with the number then

	mu      sync.Mutex
	gen     uint64
	blind   bool
	pending bool // a change waits its viewQuiet
}

// newViewWatch watches project's directories but skip's (the jails, the
// directories commands write in place), at most max; a watch that cannot
// start or exceeds max is blind.
func newViewWatch(project string, skip []string, max int, onChange func(uint64)) *viewWatch {
	w := &viewWatch{fd: -1, stop: -1, skip: skip, max: max, onChange: onChange, gen: 1}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		w.blind = true
		return w
	}
	if w.stop, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		unix.Close(fd)
		w.blind = true
		return w
	}
	w.fd = fd
	dirs := map[int32]string{}
	if !w.add(dirs, project) {
		w.blind = true
	}
	go w.serve(dirs)
	return w
}

// add watches dir and every directory below it; false when it reached
// the bound.
func (w *viewWatch) add(dirs map[int32]string, dir string) bool {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if slices.Contains(w.skip, p) {
			return filepath.SkipDir
		}
		if len(dirs) >= w.max {
			return errors.New("too many directories")
		}
		if wd, err := unix.InotifyAddWatch(w.fd, p, viewEvents); err == nil {
			dirs[int32(wd)] = p
		}
		return nil
	}) == nil
}

// serve reads the watch's events until it is closed: a new number for
// each batch, the directories made since watched.
func (w *viewWatch) serve(dirs map[int32]string) {
	// The descriptors are closed here, never while this reads them (a
	// number closed under a read could name another file by then).
	defer func() {
		w.mu.Lock()
		w.blind = true
		unix.Close(w.fd)
		unix.Close(w.stop)
		w.fd, w.stop = -1, -1
		w.mu.Unlock()
	}()
	buf := make([]byte, 64<<10)
	for {
		pfd := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}, {Fd: int32(w.stop), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, -1); err != nil && err != unix.EINTR {
			return
		}
		if pfd[1].Revents != 0 || pfd[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
			return
		}
		if pfd[0].Revents == 0 {
			continue
		}
		// A new number before the events leave the queue, which a call's
		// look (current) reads as a change too.
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
				if w.blind {
					gen = 0
				}
				w.mu.Unlock()
				w.onChange(gen)
			})
		}
		n, err := unix.Read(w.fd, buf)
		if err != nil && err != unix.EAGAIN && err != unix.EINTR {
			return
		}
		added := false
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			end := off + unix.SizeofInotifyEvent + int(ev.Len)
			if ev.Len > uint32(len(buf)) || end > n {
				break // not an event the kernel wrote whole
			}
			name := unix.ByteSliceToString(buf[off+unix.SizeofInotifyEvent : end])
			off = end
			lost := ev.Mask&unix.IN_Q_OVERFLOW != 0
			if ev.Mask&unix.IN_ISDIR != 0 && ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
				if parent, ok := dirs[ev.Wd]; ok {
					added = true
					if !w.add(dirs, filepath.Join(parent, name)) {
						lost = true
					}
				}
			}
			if ev.Mask&unix.IN_IGNORED != 0 {
				delete(dirs, ev.Wd)
			}
			if lost {
				w.mu.Lock()
				w.blind = true
				w.mu.Unlock()
			}
		}
		if added {
			// What was made in a new directory before its watch made no
			// event: a view made meanwhile may miss it.
			w.mu.Lock()
			w.gen++
			w.mu.Unlock()
		}
	}
}

// current is the number of the project as it is now, 0 when the watch is
// blind: a change not read yet makes a new number.
func (w *viewWatch) current() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.blind || w.fd < 0 {
		return 0
	}
	if n, err := unix.IoctlGetInt(w.fd, unix.TIOCINQ); err != nil || n > 0 {
		w.gen++
	}
	return w.gen
}

// close ends the watch: serve closes its descriptors.
func (w *viewWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop >= 0 {
		unix.Write(w.stop, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	}
}
