package limits

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-mcp/jail-mcp/jail"
)

// cgroupSet is the server's own cgroups (v1 pids and memory hierarchies)
// under which each call gets one of its own, so that the kernel bounds its
// processes and memory exactly. Where the server cannot create them (no
// write access, a cgroup v2-only host whose controllers are not delegated)
// it is nil, and the watchdog alone bounds commands.
type cgroupSet struct {
	pids, memory string // directories made for this server; "" when absent
}

// v1Root is where cgroup v1 hierarchies are mounted.
const v1Root = "/sys/fs/cgroup"

// newCgroups creates the server's cgroups: jail-mcp-<pid> under the
// server's own cgroup in the pids and memory v1 hierarchies. The cgroups
// that servers killed before they could clean up left there are removed
// in the background: a start never waits for them (each may take seconds
// to empty, and a normal user's server may find root's, which it can
// never remove).
func newCgroups(log *slog.Logger) *cgroupSet {
	own := ownCgroups()
	cs := &cgroupSet{}
	var parents []string
	for _, ctrl := range []string{"pids", "memory"} {
		rel, ok := own[ctrl]
		if !ok {
			continue
		}
		parent := filepath.Join(v1Root, ctrl, rel)
		parents = append(parents, parent)
		dir := filepath.Join(parent, fmt.Sprintf("jail-mcp-%d", os.Getpid()))
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			continue
		}
		switch ctrl {
		case "pids":
			cs.pids = dir
		case "memory":
			cs.memory = dir
		}
	}
	go removeStale(parents, log)
	if cs.pids == "" && cs.memory == "" {
		return nil
	}
	return cs
}

// removeStale removes the cgroups under parents of servers that are gone
// (killed before they could clean up; their processes died with them),
// those this server may remove: its own user's, or any when it is root.
// Another user's stay for a server of theirs, and doctor names them.
func removeStale(parents []string, log *slog.Logger) {
	euid := os.Geteuid()
	for _, parent := range parents {
		for _, c := range staleCgroups(parent) {
			if euid != 0 && c.uid != euid {
				continue
			}
			// With whatever is nested in them (an agent's calls), and
			// what is left in them.
			if err := removeCgroup(c.dir, 0); err != nil {
				log.Warn("stale cgroup left", "dir", c.dir, "err", err)
			}
		}
	}
}

// staleCgroup is a cgroup a server left: jail-mcp-<pid> of a process
// that no longer runs, made by uid.
type staleCgroup struct {
	dir string
	uid int
}

// staleCgroups lists the cgroups under parent of servers that are gone.
func staleCgroups(parent string) []staleCgroup {
	dirs, _ := filepath.Glob(filepath.Join(parent, "jail-mcp-*"))
	var out []staleCgroup
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "jail-mcp-"))
		if err != nil || pid == os.Getpid() || processExists(pid) {
			continue
		}
		fi, err := os.Lstat(d)
		if err != nil || !fi.IsDir() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			out = append(out, staleCgroup{d, int(st.Uid)})
		}
	}
	return out
}

// processExists says whether pid runs. EPERM is a process of another
// user's: it runs, and its cgroups are in use.
func processExists(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// Leftovers lists the cgroups left by servers gone that a server started
// by this process's user would find beside its own and not remove.
func Leftovers() LeftoverCgroups {
	out := LeftoverCgroups{Owners: []string{}, Dirs: []string{}}
	euid := os.Geteuid()
	for ctrl, rel := range ownCgroups() {
		if ctrl != "pids" && ctrl != "memory" {
			continue
		}
		for _, c := range staleCgroups(filepath.Join(v1Root, ctrl, rel)) {
			if euid == 0 || c.uid == euid {
				continue
			}
			out.Count++
			out.Dirs = append(out.Dirs, c.dir)
			if name := userName(c.uid); !slices.Contains(out.Owners, name) {
				out.Owners = append(out.Owners, name)
			}
		}
	}
	slices.Sort(out.Dirs)
	slices.Sort(out.Owners)
	return out
}

// userName is uid's name, or "uid N" where it has none.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return fmt.Sprintf("uid %d", uid)
}

// ownCgroups maps each v1 controller to the server's cgroup in it.
func ownCgroups() map[string]string {
	out := map[string]string{}
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			if _, err := os.Stat(filepath.Join(v1Root, ctrl, parts[2], "tasks")); err == nil {
				out[ctrl] = parts[2]
			}
		}
	}
	return out
}

// close removes the server's cgroups once every call's is gone.
func (cs *cgroupSet) close() {
	if cs == nil {
		return
	}
	for _, d := range []string{cs.pids, cs.memory} {
		if d != "" {
			os.Remove(d)
		}
	}
}

// Group is one call's cgroups: of a command on its own, of a
// session agent, or of one call of an agent, nested in the agent's.
type Group struct {
	pids, mem string
	enforced  map[Bound]bool // bound names the kernel enforces for this call
	// keep is a process never killed when the cgroups are removed: the
	// session agent whose call thread they held.
	keep int
	// The files read or written at each call, kept open from their first
	// use to the removal: the cgroups of an agent's calls serve one call
	// after another, and an open, a read and a close of a cgroup file
	// cost several times a pread of an open one.
	pidsTasks, memTasks, pidsEvents, pidsCurrent, memOOM cgroupFile
	// pool is, for a session agent's cgroups, the pool of its calls'.
	pool *callPool
}

// cgroupFile is a file of a cgroup, opened at its first use.
type cgroupFile struct {
	once sync.Once
	f    *os.File
	err  error
}

// file returns the file name of dir, opened with flag the first time.
func (c *cgroupFile) file(dir, name string, flag int) (*os.File, error) {
	c.once.Do(func() { c.f, c.err = os.OpenFile(filepath.Join(dir, name), flag|unix.O_CLOEXEC, 0) })
	return c.f, c.err
}

// close closes the file if it was opened; it must not be used after.
func (c *cgroupFile) close() {
	c.once.Do(func() { c.err = os.ErrClosed })
	if c.f != nil {
		c.f.Close()
	}
}

// read returns what the file says now (a cgroup file is made anew by a
// read from its start), or nil.
func (c *cgroupFile) read(dir, name string) []byte {
	f, err := c.file(dir, name, os.O_RDONLY)
	if err != nil {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	b := make([]byte, 512)
	n := -1
	// Through the descriptor held for the read, which a close meanwhile
	// cannot give to another file.
	rc.Read(func(fd uintptr) bool {
		n, err = unix.Pread(int(fd), b, 0)
		return true
	})
	if err != nil || n < 0 {
		return nil
	}
	return b[:n]
}

// closeFiles closes the cgroups' kept files.
func (cc *Group) closeFiles() {
	for _, c := range []*cgroupFile{&cc.pidsTasks, &cc.memTasks, &cc.pidsEvents, &cc.pidsCurrent, &cc.memOOM} {
		c.close()
	}
}

// call creates the cgroups of one call with its bounds. A bound that
// cannot be set is left to the watchdog.
func (cs *cgroupSet) call(id string, maxProcs, maxMemory int64) *Group {
	if cs == nil {
		return nil
	}
	return makeCgroups(cs.pids, cs.memory, id, maxProcs, maxMemory)
}

// sub creates cgroups nested in cc's, with bounds of their own.
func (cc *Group) sub(id string, maxProcs, maxMemory int64) *Group {
	return makeCgroups(cc.pids, cc.mem, id, maxProcs, maxMemory)
}

// makeCgroups creates the cgroups id under the pids and memory cgroups
// given (each "" when absent) with their bounds, or returns nil.
func makeCgroups(pids, memory, id string, maxProcs, maxMemory int64) *Group {
	cc := &Group{enforced: map[Bound]bool{}}
	if pids != "" && maxProcs > 0 {
		d := filepath.Join(pids, id)
		if os.Mkdir(d, 0o755) == nil {
			if write(filepath.Join(d, "pids.max"), strconv.FormatInt(maxProcs, 10)) == nil {
				cc.pids, cc.enforced[BoundProcs] = d, true
			} else {
				os.Remove(d)
			}
		}
	}
	if memory != "" && maxMemory > 0 {
		d := filepath.Join(memory, id)
		if os.Mkdir(d, 0o755) == nil {
			if write(filepath.Join(d, "memory.limit_in_bytes"), strconv.FormatInt(maxMemory, 10)) == nil {
				write(filepath.Join(d, "memory.memsw.limit_in_bytes"), strconv.FormatInt(maxMemory, 10))
				cc.mem, cc.enforced[BoundMemory] = d, true
			} else {
				os.Remove(d)
			}
		}
	}
	if cc.pids == "" && cc.mem == "" {
		return nil
	}
	return cc
}

func write(path, value string) error {
	return os.WriteFile(path, []byte(value), 0o644)
}

// move moves the thread tid (a host id) into the cgroups.
func (cc *Group) move(tid int) error {
	for _, t := range []struct {
		dir  string
		file *cgroupFile
	}{{cc.pids, &cc.pidsTasks}, {cc.mem, &cc.memTasks}} {
		if t.dir == "" {
			continue
		}
		f, err := t.file.file(t.dir, "tasks", os.O_WRONLY)
		if err == nil {
			_, err = f.Write([]byte(strconv.Itoa(tid)))
		}
		if err != nil {
			return fmt.Errorf("move thread %d into cgroup %s: %w", tid, t.dir, err)
		}
	}
	return nil
}

// join moves the calling thread into the call's cgroups, so that the
// process it forks starts there. cgroup v1 moves single threads through
// "tasks". The thread never leaves: it forks one command, waits for it and
// dies, which leaves the groups empty for removal.
func (cc *Group) join() error { return cc.move(unix.Gettid()) }

// Launcher is a locked OS thread already moved into a call's cgroups,
// waiting to fork that call's command. Moving a thread between cgroup v1
// groups waits for an RCU grace period (milliseconds), so launchers are
// prepared ahead, off the calls' path.
type Launcher struct {
	cc  *Group
	run chan func()
}

// prepare makes a call's cgroups and a launcher thread inside them, or
// returns nil where that cannot be done.
func (cs *cgroupSet) prepare(id string, maxProcs, maxMemory int64) *Launcher {
	cc := cs.call(id, maxProcs, maxMemory)
	if cc == nil {
		return nil
	}
	l := &Launcher{cc: cc, run: make(chan func())}
	ready := make(chan error, 1)
	jail.FreshThread(func() { // never the main thread; it dies with the call
		err := cc.join()
		ready <- err
		if err != nil {
			return
		}
		if fn, ok := <-l.run; ok {
			fn()
		}
	})
	if err := <-ready; err != nil {
		cc.remove()
		return nil
	}
	return l
}

// Group is the call's cgroups the launcher's thread is in.
func (l *Launcher) Group() *Group { return l.cc }

// Launch is the jail.Launcher of l: fn runs on its thread.
func (l *Launcher) Launch(fn func()) { l.run <- fn }

// discard ends an unused launcher and removes its cgroups once its thread
// is gone.
func (l *Launcher) discard() {
	close(l.run)
	l.cc.remove()
}

// Mark is what a cgroup's counters of bounds hit said at a moment:
// the cgroups of a session agent serve many calls, and a call is judged
// by what it hit, not by what the calls before it did.
type Mark struct{ oom, max int64 }

// Mark reads the counters now; nil marks nothing.
func (cc *Group) Mark() Mark {
	if cc == nil {
		return Mark{}
	}
	var m Mark
	if cc.mem != "" {
		m.oom = cgroupCounter(cc.memOOM.read(cc.mem, "memory.oom_control"), "oom_kill")
	}
	if cc.pids != "" {
		m.max = cgroupCounter(cc.pidsEvents.read(cc.pids, "pids.events"), "max")
	}
	return m
}

// ExceededSince names the bound the kernel hit since m, or "": a fork
// refused at pids.max, or a process killed by the OOM killer at the
// memory limit.
func (cc *Group) ExceededSince(m Mark) Bound {
	now := cc.Mark()
	switch {
	case now.oom > m.oom:
		return BoundMemory
	case now.max > m.max:
		return BoundProcs
	}
	return ""
}

// cgroupCounter reads "name N" from b, a cgroup file of such lines.
func cgroupCounter(b []byte, name string) int64 {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// remove kills whatever is left in the call's cgroups and removes them,
// the cgroups nested in them first.
func (cc *Group) remove() {
	cc.closeFiles()
	if cc.pool != nil {
		cc.pool.close()
	}
	for _, d := range []string{cc.pids, cc.mem} {
		if d != "" {
			removeCgroup(d, cc.keep)
		}
	}
}

// removeCgroup removes the cgroup d and those nested in it, killing what
// is left in them but the server and keep. Only a cgroup still busy (a
// process on its way out) is tried again; one this server may not remove
// never will be, and is given up at once.
func removeCgroup(d string, keep int) error {
	if subs, err := os.ReadDir(d); err == nil {
		for _, e := range subs {
			if e.IsDir() {
				removeCgroup(filepath.Join(d, e.Name()), keep)
			}
		}
	}
	// The last thread is usually gone within a millisecond: look again
	// soon, then less often, for about two seconds in all.
	pause := 250 * time.Microsecond
	var err error
	for i := 0; i < 200; i++ {
		if err = os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			return err
		}
		// cgroup.procs also lists the server while its launcher thread
		// is still on its way out, and a session agent while its call
		// thread is: never kill either.
		if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil {
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() && pid != keep {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		time.Sleep(pause)
		pause = min(2*pause, 10*time.Millisecond)
	}
	return err
}

// CallPlacement is the cgroups of one call of a session agent, nested in
// the agent's calls cgroups: the kernel holds the call to its own bounds,
// and counts a refused fork or an OOM kill of its processes there and
// nowhere else, so that a call's result names the bound it hit whatever
// its neighbours did.
type CallPlacement struct {
	pool *callPool
	cc   *Group
	mark Mark // cc's counters when it was given to the call
	once sync.Once
}

// Remove gives the call's cgroups back to the agent's pool, once.
func (p *CallPlacement) Remove() { p.once.Do(func() { p.pool.release(p.cc) }) }

// Group is the call's cgroups.
func (p *CallPlacement) Group() *Group { return p.cc }

// Mark is the counters of the call's cgroups when the call got them.
func (p *CallPlacement) Mark() Mark { return p.mark }

// AgentPlacer returns the Placer of a session agent whose cgroups are
// agent: the agent's own threads stay there; its calls go to a cgroup
// "calls" nested in it, which holds them together (callsProcs, and
// --max-memory), so that no call can take from the agent the threads and
// memory it needs to serve; and each call to one of its own in that.
func (pool *Pool) AgentPlacer(agent *Group) jail.Placer {
	calls := agent.sub("calls", callsProcs(pool.cfg.MaxProcs), pool.cfg.MaxMemory)
	if calls == nil {
		return nil
	}
	cp := &callPool{pool: pool, calls: calls}
	agent.pool = cp
	return func(agentPid, tid int) (jail.Placement, error) {
		cc, mark := cp.take()
		if cc == nil {
			id := "k" + strconv.FormatInt(cp.seq.Add(1), 10)
			// The call thread counts as one of the call's processes.
			if cc = calls.sub(id, pool.cfg.MaxProcs+1, pool.cfg.MaxMemory); cc == nil {
				return nil, fmt.Errorf("make the cgroups of a call in %s", calls.pids+calls.mem)
			}
			cc.keep = agentPid
		}
		p := &CallPlacement{pool: cp, cc: cc, mark: mark}
		if err := cc.move(tid); err != nil {
			p.Remove()
			return nil, err
		}
		return p, nil
	}
}

// callPool keeps the cgroups of a session agent's ended calls for its
// next ones: making a v1 cgroup pair and removing it again cost the
// server more than the whole call of a /bin/true they held. Cgroups whose
// processes are all gone hold nothing of their call but page cache, which
// the kernel reclaims at the bound, and counters, which the next call is
// judged against from where they stood when it got them (its mark).
type callPool struct {
	pool   *Pool
	calls  *Group
	seq    atomic.Int64
	mu     sync.Mutex
	ended  []*Group // of ended calls, oldest first
	closed bool     // the agent's cgroups are being removed, with these
}

// callPoolSize is how many ended calls' cgroups an agent keeps: one round
// of spares and those of the calls in flight on a busy session.
const callPoolSize = 2 * jail.AgentSpares

// take returns the cgroups of an ended call that hold no process any
// more, with their counters now, or nil.
func (cp *callPool) take() (*Group, Mark) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for i, cc := range cp.ended {
		if cc.empty() {
			cp.ended = slices.Delete(cp.ended, i, i+1)
			return cc, cc.Mark()
		}
	}
	return nil, Mark{}
}

// release keeps cc for a later call; past callPoolSize the oldest is
// removed in the background, with whatever is left in it.
func (cp *callPool) release(cc *Group) {
	cp.mu.Lock()
	if cp.closed {
		cp.mu.Unlock()
		cc.closeFiles()
		return
	}
	cp.ended = append(cp.ended, cc)
	var old *Group
	if len(cp.ended) > callPoolSize {
		old, cp.ended = cp.ended[0], slices.Delete(cp.ended, 0, 1)
	}
	cp.mu.Unlock()
	if old != nil {
		cp.pool.Remove(old)
	}
}

// close closes the kept files of the cgroups it keeps, which go with the
// agent's, and of those released from now on.
func (cp *callPool) close() {
	cp.mu.Lock()
	ended := cp.ended
	cp.ended, cp.closed = nil, true
	cp.mu.Unlock()
	for _, cc := range ended {
		cc.closeFiles()
	}
}

// empty reports whether no task is left in the cgroups: the pids
// cgroup's count of its tasks (zombies included), which takes one read
// of a kept file; without it, the memory cgroup's list of its tasks,
// read anew (an open tasks file keeps the list it made for a while).
// Threads go into both, and leave neither, together.
func (cc *Group) empty() bool {
	if cc.pids != "" {
		return string(bytes.TrimSpace(cc.pidsCurrent.read(cc.pids, "pids.current"))) == "0"
	}
	b, err := os.ReadFile(filepath.Join(cc.mem, "tasks"))
	return err == nil && len(bytes.TrimSpace(b)) == 0
}
