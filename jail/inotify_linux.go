package jail

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// A call's inotify watches are charged to the host user, as every
// program's of that user are, the server's project watch too: a command
// that takes them all leaves the host's editors, the server and every
// other session without. No namespace bounds them under landlock, and
// under bubblewrap the sandbox's /proc/sys, where its user namespace's
// own bound is set, is read-only; so the watchdog counts them, with the
// memfds (MemfdScan), and ends a call that holds more than its share
// (watchShare of the user's fs.inotify.max_user_watches). What it takes
// between two scans it holds until the call ends.

// watchShare is the part of the user's inotify watches one call may
// hold: a quarter, so that no call takes what the host and the server
// need, and a tool's watch of a large tree (an editor server, a bundler
// in watch mode) still fits.
const watchShare = 4

// anonInodeDev is the device of the kernel's anonymous inodes, which an
// inotify instance is one of, from an eventfd made to see it.
var anonInodeDev = sync.OnceValues(func() (uint64, bool) {
	return devOf(unix.Eventfd(0, unix.EFD_CLOEXEC))
})

var (
	inotifyLink = []byte("anon_inode:inotify")
	watchLine   = []byte("\ninotify wd:")
)

// inotifyWatches counts the watches of process pid's descriptor name
// (of its fd directory dfd) when it is an inotify instance: the lines of
// its fdinfo, one per watch, read a buffer (buf) at a time and no further
// than past upTo (a watch over a large tree lists hundreds of thousands).
func inotifyWatches(pid string, dfd int, name string, buf []byte, upTo int) int {
	var link [64]byte
	n, err := unix.Readlinkat(dfd, name, link[:])
	if err != nil || !bytes.Equal(link[:n], inotifyLink) {
		return 0
	}
	fd, err := unix.Open("/proc/"+pid+"/fdinfo/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	count, carry := 0, 0 // carry: bytes at buf[:carry] kept from the last read
	for upTo <= 0 || count <= upTo {
		n, err := unix.Read(fd, buf[carry:])
		if err != nil || n <= 0 {
			break
		}
		total := carry + n
		count += bytes.Count(buf[:total], watchLine)
		// The last bytes, shorter than a match: a line a read cut in two.
		carry = min(len(watchLine)-1, total)
		copy(buf, buf[total-carry:total])
	}
	return count
}

// addWatches counts the watches of descriptor name of process pid (its
// fd directory dfd), an anonymous inode, when it is an inotify instance;
// past WatchBound it counts no further.
func (m *MemfdScan) addWatches(pid string, dfd int, name string) {
	upTo := 0
	if m.WatchBound > 0 {
		if m.watchesFound > m.WatchBound {
			return // over already
		}
		upTo = max(m.WatchBound-m.watchesFound, 1)
	}
	if m.watchBuf == nil {
		m.watchBuf = make([]byte, 64<<10)
	}
	m.watchesFound += inotifyWatches(pid, dfd, name, m.watchBuf, upTo)
}

// CallWatchBound is how many inotify watches a call may hold: watchShare
// of the fewest the user may hold, by the host's
// fs.inotify.max_user_watches and by the server's user namespace's own
// user.max_inotify_watches (a server in a namespace of its own, whose
// bound the host's commands do not share); 0 (no bound) when neither can
// be read.
func CallWatchBound() int {
	least := 0
	for _, f := range []string{"/proc/sys/fs/inotify/max_user_watches", "/proc/sys/user/max_inotify_watches"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if n, err := strconv.Atoi(string(bytes.TrimSpace(b))); err == nil && n > 0 && (least == 0 || n < least) {
			least = n
		}
	}
	if least == 0 {
		return 0
	}
	return max(least/watchShare, 1)
}

// overWatches says why a call that holds n inotify watches ends, over
// bound (0: none); "" when it may hold them.
func overWatches(n, bound int) string {
	if bound == 0 || n <= bound {
		return ""
	}
	return fmt.Sprintf("the call held %d inotify watches, over its share of %d (a quarter of the user's, which the host's programs, the server's project watch and every session share), so the call was ended", n, bound)
}
