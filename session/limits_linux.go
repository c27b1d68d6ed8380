package session

import (
	"bytes"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-mcp/jail-mcp/jail"
)

// watchInterval is how often the watchdog counts a command's processes and
// memory. Between two looks a command can overshoot a bound; the look
// after it kills the command.
const watchInterval = 50 * time.Millisecond

// procTree is a snapshot of the processes descending from one root.
type procTree struct {
	procs int
	rss   int64 // bytes
}

// scanProcs maps every process to its parent, from /proc.
func scanProcs() map[int]int {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := make(map[int]int, len(dirs))
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		st, ok := jail.ReadStat(d.Name())
		if !ok {
			continue
		}
		parent[pid] = st.PPid
	}
	return parent
}

// descendants counts the processes below root (root excluded: it is
// bwrap, or the command itself without a pid namespace) and their resident
// memory. Daemonized and setsid children of a command stay below root:
// inside a pid namespace they are reparented to its init.
func descendants(root int, parent map[int]int) procTree {
	page := int64(os.Getpagesize())
	var t procTree
	for pid := range parent {
		if pid == root || !below(pid, root, parent) {
			continue
		}
		t.procs++
		t.rss += rss(pid, page)
	}
	return t
}

func rss(pid int, page int64) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.ParseInt(string(f[1]), 10, 64)
	return n * page
}

func below(pid, root int, parent map[int]int) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		pid = parent[pid]
		if pid == root {
			return true
		}
	}
	return false
}

// limitProcess bounds what every command of this server may do to a file:
// no core dumps, and no single file larger than maxFile. The limits are
// the server's own, soft and hard, so no command can raise them; the
// server itself never writes a file that large.
func limitProcess(maxFile int64) error {
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		return err
	}
	var cur unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &cur); err != nil {
		return err
	}
	lim := uint64(maxFile)
	if cur.Max < lim {
		lim = cur.Max
	}
	return unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: lim, Max: lim})
}

// Watchable reports whether the watchdog can see processes here.
const Watchable = true
