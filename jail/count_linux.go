package jail

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// What a running call holds, as the watchdog counts it where no cgroup
// does: every task of its processes (a thread takes a pid as a process
// does), their resident memory, the memfds they hold open, and, in a
// sandbox of its own, what the sandbox's shared memory holds. Pages in a
// tmpfs, a memfd or a System V segment belong to no process's resident
// set once they are written with write(2), unmapped, or their writer is
// gone, so a sum of resident sets alone misses them.

// shmInodeBytes is what the kernel keeps for each file, directory or
// link of a tmpfs whatever it holds, which no size= bound counts:
// measured on Linux 6.18, 200,000 empty files in bubblewrap's /dev/shm
// took 1,056 bytes of slab each.
const shmInodeBytes = 1024

// The memfds of a call's processes are found by looking at each of their
// descriptors, which costs more than the rest of a look together (about
// twice a look without it, 50 processes of three descriptors each).
// Every page of a memfd is counted in the host's Shmem (/proc/meminfo), so
// a look scans the descriptors only when that grew by memfdSlack since
// the lowest it was after the last scan, and at least every memfdEvery
// looks; between two scans the last scan's figure stands.
const (
	memfdSlack = 4 << 20
	memfdEvery = 10
)

// MemfdScan counts the memfds a call's processes hold open, each once,
// by the pages they hold. A memfd dies with the last process holding it
// (the end of the call kills them all), so it counts only while the call
// runs. Its zero value is ready; one per call, used by one goroutine.
type MemfdScan struct {
	looked bool
	low    int64 // the host's lowest Shmem since the last scan
	since  int   // looks since the last scan
	bytes  int64 // what the last scan found
	scan   bool  // this look scans
	found  int64 // what it found so far
	seen   map[uint64]bool
	buf    []byte
	names  []string
	// The inotify watches the call's processes hold, counted by the same
	// scan (inotify.go): as of the last scan, and so far in this one.
	watches, watchesFound int
	watchBuf              []byte
	// WatchBound: past it, a scan stops counting (0: counts all).
	WatchBound int
}

// Look starts a look at the call: it reports whether this look scans
// descriptors. Add each process of the call to it, then take Bytes.
func (m *MemfdScan) Look() bool {
	sh, ok := hostShmem()
	m.since++
	if ok && m.looked && m.since < memfdEvery && sh <= m.low+memfdSlack {
		m.low = min(m.low, sh)
		m.scan = false
		return false
	}
	m.looked, m.since, m.low, m.found, m.scan = true, 0, sh, 0, true
	m.watchesFound = 0
	if m.seen == nil {
		m.seen = map[uint64]bool{}
	}
	clear(m.seen)
	return true
}

// Add counts the memfds process pid (as named in /proc) holds open, when
// this look scans.
func (m *MemfdScan) Add(pid string) {
	dev, ok := memfdDev()
	anon, _ := anonInodeDev()
	if !m.scan || !ok {
		return
	}
	dfd, err := unix.Open("/proc/"+pid+"/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(dfd)
	if m.buf == nil {
		m.buf = make([]byte, 4096)
	}
	for {
		n, err := unix.Getdents(dfd, m.buf)
		if err != nil || n <= 0 {
			return
		}
		_, _, m.names = unix.ParseDirent(m.buf[:n], -1, m.names[:0])
		for _, name := range m.names {
			// What the descriptor refers to, from what the kernel has of
			// it (AT_STATX_DONT_SYNC): a file of a FUSE or network mount
			// is not asked, so no file system can hold the look up.
			var st unix.Statx_t
			if unix.Statx(dfd, name, unix.AT_STATX_DONT_SYNC, unix.STATX_INO|unix.STATX_BLOCKS, &st) != nil {
				continue
			}
			fdev := uint64(st.Dev_major)<<32 | uint64(st.Dev_minor)
			if fdev == anon && anon != 0 {
				m.addWatches(pid, dfd, name)
				continue
			}
			if fdev != dev || m.seen[st.Ino] {
				continue
			}
			m.seen[st.Ino] = true
			m.found += int64(st.Blocks) * 512
		}
	}
}

// Bytes ends the look: what the memfds of the call hold, as of the last
// scan.
func (m *MemfdScan) Bytes() int64 {
	if m.scan {
		m.bytes, m.scan = m.found, false
		m.watches = m.watchesFound
	}
	return m.bytes
}

// Watches is how many inotify watches the call's processes held at the
// last scan (after Bytes ended the look).
func (m *MemfdScan) Watches() int { return m.watches }

// memfdDev is the device of every memfd (the kernel's internal shmem
// mount), from one made to see it.
var memfdDev = sync.OnceValues(func() (uint64, bool) {
	return devOf(unix.MemfdCreate("jail-mcp-probe", unix.MFD_CLOEXEC))
})

// devOf is the device of the file fd, made to see it, which it closes.
func devOf(fd int, err error) (uint64, bool) {
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	var st unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_INO, &st) != nil {
		return 0, false
	}
	return uint64(st.Dev_major)<<32 | uint64(st.Dev_minor), true
}

// hostShmem is the host's Shmem of /proc/meminfo, in bytes.
func hostShmem() (int64, bool) {
	var buf [4096]byte // /proc/meminfo is about 1.5 KiB
	n, err := readProc("/proc/meminfo", buf[:])
	if err != nil {
		return 0, false
	}
	_, rest, ok := bytes.Cut(buf[:n], []byte("\nShmem:"))
	if !ok {
		return 0, false
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	kib := decimal(bytes.TrimSuffix(bytes.TrimSpace(line), []byte(" kB")))
	return kib << 10, true
}

// sandboxShared is what a bubblewrap sandbox's own shared memory holds,
// which outlives the calls that wrote it: the files of its /dev/shm
// (their pages, and for each what the kernel keeps of a file of a tmpfs),
// and the System V segments of its IPC namespace, resident or swapped.
// shm is its /dev/shm (a descriptor: no command can move what it names).
func sandboxShared(shm int) int64 {
	var total int64
	var fs unix.Statfs_t
	if unix.Fstatfs(shm, &fs) == nil {
		total += int64(fs.Blocks-fs.Bfree)*fs.Bsize + int64(fs.Files-fs.Ffree)*shmInodeBytes
	}
	return total + sysvShared()
}

// shmInfo is the kernel's struct shm_info, which shmctl(SHM_INFO) fills
// with the totals of the caller's IPC namespace.
type shmInfo struct {
	usedIDs                     int32
	tot, rss, swp               uint // pages (the kernel's unsigned long)
	swapAttempts, swapSuccesses uint
}

const shmInfoCmd = 14 // SHM_INFO

// A SysvShmDesc holds a shm_info.
var _ [unsafe.Sizeof(unix.SysvShmDesc{}) - unsafe.Sizeof(shmInfo{})]byte

// sysvShared is what the System V segments of the caller's IPC namespace
// hold, resident or swapped, in bytes: whether a process maps them or not.
func sysvShared() int64 {
	var d unix.SysvShmDesc
	if _, err := unix.SysvShmCtl(0, shmInfoCmd, &d); err != nil {
		return 0
	}
	info := (*shmInfo)(unsafe.Pointer(&d))
	return int64(info.rss+info.swp) * int64(os.Getpagesize())
}

// domainCount counts the live processes of the calling thread's domain,
// their tasks and their memory (memfds, when given, scans their memfds);
// with reap, it reaps those that are zombies and children of the caller.
func domainCount(reap bool, memfds *MemfdScan) (procs int, c Count) {
	self := os.Getpid()
	d, err := os.Open("/proc")
	if err != nil {
		return 0, Count{}
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	page := int64(os.Getpagesize())
	if memfds != nil {
		memfds.Look()
	}
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self || unix.Kill(pid, 0) != nil {
			continue
		}
		st, ok := ReadStat(name)
		if !ok {
			continue
		}
		if st.State == 'Z' {
			if reap && st.PPid == self {
				unix.Wait4(pid, nil, unix.WNOHANG|unix.WALL, nil)
			}
			continue
		}
		procs++
		c.Tasks += max(st.Threads, 1)
		c.Memory += st.RSS * page
		if memfds != nil {
			memfds.Add(name)
		}
	}
	if memfds != nil {
		c.Memory += memfds.Bytes()
	}
	return procs, c
}
