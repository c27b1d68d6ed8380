package jail

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// hostProcess finds the process at or below root (a host pid: bwrap, or
// the agent itself) whose id in its own pid namespace is nsPid: under
// bwrap the agent, two levels down; under landlock root itself.
func hostProcess(root, nsPid int) (int, error) {
	queue := []int{root}
	for seen := 0; len(queue) > 0 && seen < 64; seen++ {
		p := queue[0]
		queue = queue[1:]
		ids, err := nsPids(fmt.Sprintf("/proc/%d/status", p))
		if err == nil && ids[len(ids)-1] == nsPid && (len(ids) > 1 || p == nsPid) {
			return p, nil
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p, p))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				queue = append(queue, c)
			}
		}
	}
	return 0, fmt.Errorf("find the session agent (pid %d in its sandbox) below process %d", nsPid, root)
}

// threadIDs finds the host ids of one process's threads from their ids in
// its pid namespace, for the placer of a session agent's spare threads.
// What it read of the threads it listed is kept as a hint only: every
// answer is read again from the thread's own status, so that a lookup
// costs a read or two, not one for each of the agent's threads (which
// made the placing of a call's thread a third of the server's work).
type threadIDs struct {
	pid  int
	own  bool        // the process has a pid namespace of its own
	seen map[int]int // host id -> id in the namespace, of the threads last listed
}

// newThreadIDs looks up the threads of process pid, whose id in its own
// pid namespace is nsPid.
func newThreadIDs(pid, nsPid int) *threadIDs {
	return &threadIDs{pid: pid, own: pid != nsPid, seen: map[int]int{}}
}

// host is the host id of the thread nsTid of the process, which must be
// one of its threads now.
func (t *threadIDs) host(nsTid int) (int, error) {
	if !t.own {
		// The ids are the host's.
		if t.is(nsTid, nsTid) {
			return nsTid, nil
		}
		return 0, fmt.Errorf("thread %d is not one of the session agent's", nsTid)
	}
	if h, ok := t.find(nsTid); ok {
		return h, nil
	}
	// A thread started since the last look (each call's is): list them
	// again, reading only the new ones.
	d, err := os.Open(fmt.Sprintf("/proc/%d/task", t.pid))
	if err != nil {
		return 0, err
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	seen := make(map[int]int, len(names))
	found := 0
	for _, name := range names {
		h, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if n, ok := t.seen[h]; ok {
			seen[h] = n
			continue
		}
		if ids, err := nsPids(fmt.Sprintf("/proc/%d/task/%d/status", t.pid, h)); err == nil && ids[0] == h {
			seen[h] = ids[len(ids)-1]
			if seen[h] == nsTid {
				found = h // read just now
			}
		}
	}
	t.seen = seen
	if found != 0 {
		return found, nil
	}
	if h, ok := t.find(nsTid); ok {
		return h, nil
	}
	return 0, fmt.Errorf("thread %d is not one of the session agent's", nsTid)
}

// find returns the thread that the last listing gave nsTid, if it still
// has it.
func (t *threadIDs) find(nsTid int) (int, bool) {
	for h, n := range t.seen {
		if n == nsTid && t.is(h, nsTid) {
			return h, true
		}
	}
	return 0, false
}

// is reports whether the thread of host id h is now one of the process's,
// with nsTid for its id in the process's pid namespace. Without a
// namespace of its own the ids are one, and the process's task directory
// has the thread's only while it is one of the process's threads: a
// lookup, not a read of its status.
func (t *threadIDs) is(h, nsTid int) bool {
	if !t.own {
		var st unix.Stat_t
		return h == nsTid && unix.Stat(fmt.Sprintf("/proc/%d/task/%d", t.pid, h), &st) == nil
	}
	ids, err := nsPids(fmt.Sprintf("/proc/%d/task/%d/status", t.pid, h))
	return err == nil && ids[0] == h && ids[len(ids)-1] == nsTid
}

// nsPids reads the NSpid line of a status file: the ids of a process or
// thread from the reader's pid namespace down to its own.
func nsPids(status string) ([]int, error) {
	b, err := os.ReadFile(status)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "NSpid:")
		if !ok {
			continue
		}
		var ids []int
		for _, f := range strings.Fields(rest) {
			n, err := strconv.Atoi(f)
			if err != nil {
				return nil, err
			}
			ids = append(ids, n)
		}
		if len(ids) == 0 {
			break
		}
		return ids, nil
	}
	return nil, errors.New(status + ": no NSpid")
}

// dying tells whether process pid (a host pid) is gone or on its way out:
// a zombie or reaped, exiting (PF_EXITING in its flags), or with SIGKILL
// pending, which the kernel adds to every thread of a process a fatal
// signal took, before any of them exits. So a thread of the process that
// vanished is told apart from one that left while the process lives on.
func dying(pid int) bool {
	st, ok := ReadStat(strconv.Itoa(pid))
	if !ok || st.State == 'Z' || st.State == 'X' || st.State == 'x' {
		return true
	}
	const pfExiting = 0x4
	if st.Flags&pfExiting != 0 {
		return true
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "SigPnd" && k != "ShdPnd") {
			continue
		}
		const sigkill = 1 << (9 - 1)
		if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&sigkill != 0 {
			return true
		}
	}
	return false
}
