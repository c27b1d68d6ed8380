package limits

import (
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
	procs int   // tasks: processes and their threads, each of which takes a pid
	rss   int64 // bytes: their resident memory and the memfds they hold open
}

// memfdScan counts the memfds a call's processes hold open.
type memfdScan = jail.MemfdScan

// scanProcs reads every process of /proc, from its stat.
func scanProcs() map[int]jail.Stat {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	procs := make(map[int]jail.Stat, len(dirs))
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		st, ok := jail.ReadStat(d.Name())
		if !ok {
			continue
		}
		procs[pid] = st
	}
	return procs
}

// descendants counts the processes below root (root excluded: it is
// bwrap, or the command itself without a pid namespace), their tasks and
// their memory, the memfds they hold included (memfds scans them).
// Daemonized and setsid children of a command stay below root: inside a
// pid namespace they are reparented to its init.
func descendants(root int, procs map[int]jail.Stat, memfds *memfdScan) procTree {
	page := int64(os.Getpagesize())
	var t procTree
	memfds.Look()
	for pid, st := range procs {
		if pid == root || !below(pid, root, procs) {
			continue
		}
		t.procs += max(st.Threads, 1)
		t.rss += st.RSS * page
		memfds.Add(strconv.Itoa(pid))
	}
	t.rss += memfds.Bytes()
	return t
}

func below(pid, root int, procs map[int]jail.Stat) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		pid = procs[pid].PPid
		if pid == root {
			return true
		}
	}
	return false
}

// LimitProcess bounds what every command of this server may do to a file:
// no core dumps, and no single file larger than maxFile. The limits are
// the server's own, soft and hard, so no command can raise them; the
// server itself never writes a file that large.
func LimitProcess(maxFile int64) error {
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
