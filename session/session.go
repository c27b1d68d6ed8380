package session

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jail-mcp/jail-mcp/session/creds"
	"github.com/jail-mcp/jail-mcp/session/jailfs"
	"github.com/jail-mcp/jail-mcp/session/layer"
	"github.com/jail-mcp/jail-mcp/session/ledger"
	"github.com/jail-mcp/jail-mcp/session/limits"
	"github.com/jail-mcp/jail-mcp/session/output"
)

// Session is one jail and the commands running in it.
type Session struct {
	m    *Manager
	Name string
	Path string // the jail, absolute on the host
	root *os.Root
	lock *os.File // the jail's directory, locked shared while open (prune)

	// resetMu is held shared by every running command and exclusively by
	// Reset, so a reset never empties a jail under a live command (and by
	// an Apply of the project view's layer, review.go).
	resetMu sync.RWMutex
	// views records when calls used the project view (--overlay), for
	// jail_apply's conflicts (layer.Views).
	views layer.Views
	// ledger records what the layer's entries were copied from
	// (session/ledger), made at its first use.
	ledgerOnce sync.Once
	ledger     *ledger.Ledger

	mu      sync.Mutex
	nextID  uint64
	running map[uint64]*call
	closed  bool
	// layerSeq is the usage watch's number of the layer's changes at
	// the ledger's latest look (jailfs.UsageWatch.Changes), 0 when none.
	layerSeq uint64

	// creds is the credentials shown in the jail and their masking.
	creds *creds.Jail
	// openMu guards open: the proxy of calls whose network is on, in a
	// session that masks credentials, made at the first (egress.go).
	openMu sync.Mutex
	open   *agentEgress

	// agentMu guards agents: the session agent of each policy in use.
	agentMu sync.Mutex
	agents  map[agentKey]*agentSlot
	// freshening: a new agent is being readied after a change of the
	// project (freshen); freshenAgain: the project changed again since.
	freshening, freshenAgain atomic.Bool
	// lastFreshen: when freshen last readied an agent (UnixNano).
	lastFreshen atomic.Int64

	// jobMu guards the session's jobs, by id and oldest first.
	jobMu    sync.Mutex
	jobs     map[string]*Job
	jobOrder []*Job

	// usageMu guards the latest walk of the jail (its count and when it
	// started), the walk running (walking, closed when it ends), and the
	// watchdog's latest look (metered).
	usageMu   sync.Mutex
	usage     jailfs.Usage
	usageAt   time.Time
	walking   chan struct{}
	walkStart time.Time
	walkErr   error
	metering  bool
	metered   jailfs.Usage
	meteredAt time.Time
	meterGen  uint64 // a reset's: a look begun before it counts nothing
}

type call struct {
	cancel context.CancelCauseFunc
}

// errReset is the cause given to commands killed by a reset.
var errReset = errors.New("killed by jail_reset")

// errClosed is the cause given to commands of a session that ended.
var errClosed = errors.New("the session ended")

// Close kills the session's running commands, and any that start from now
// on, and releases its jail; the files stay.
func (s *Session) Close() error {
	s.mu.Lock()
	was := s.closed
	s.closed = true
	s.mu.Unlock()
	if was {
		return nil
	}
	s.killAll(errClosed)
	s.m.forget(s)
	defer s.views.Close()
	s.resetMu.Lock()
	defer s.resetMu.Unlock()
	s.stopAgents()
	s.closeOpen()
	s.cleanViews()
	s.releaseJail()
	if !s.m.cfg.Review {
		s.touch()
	}
	s.lock.Close()
	return s.root.Close()
}

// releaseJail takes out of the jail the credentials placed in it and
// stops following its usage: at the session's end, or before a reset
// empties the jail (which is not followed event by event: the jail is
// scanned again, once, at the next look).
func (s *Session) releaseJail() {
	if err := s.creds.Unplace(); err != nil {
		s.m.log.Warn("remove credentials placed in the jail", "session", s.Name, "err", err)
	}
	if s.m.uw != nil {
		s.m.uw.Forget(s.Name)
	}
}

// MaskInfo describes the session's masking: no credentials when nothing
// is masked.
func (s *Session) MaskInfo() MaskInfo { return s.creds.MaskInfo() }

// touch stamps the jail's directory with the time as its modification
// time (the access time is left alone): when a server opened or closed the
// session last, which is when it was last used for jail-mcp prune, since
// a session a server holds open is never pruned.
func (s *Session) touch() {
	s.m.base.Chtimes(s.Name, time.Time{}, time.Now())
}

// Running is the number of commands in flight.
func (s *Session) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.running)
}

func (s *Session) track(cancel context.CancelCauseFunc) (untrack func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		// Started while the session was ending: killed at once, so that
		// Close never waits for a command it did not see.
		cancel(errClosed)
	}
	s.nextID++
	id := s.nextID
	s.running[id] = &call{cancel: cancel}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.running, id)
	}
}

func (s *Session) killAll(cause error) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.running {
		c.cancel(cause)
	}
	return len(s.running)
}

// ensureSkeleton recreates the skeleton directories that are missing. A
// component a command replaced by a symlink or a file is left alone: os.Root
// refuses to follow it out of the jail, and the command sees its own mess.
// A look at each is what most calls cost: making a directory that exists
// costs a walk of its path.
func (s *Session) ensureSkeleton() {
	for _, d := range s.m.skeleton() {
		if fi, err := s.root.Lstat(d); err == nil && fi.IsDir() {
			continue
		}
		if err := s.root.MkdirAll(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			s.m.log.Warn("skeleton", "session", s.Name, "dir", d, "err", err)
		}
	}
}

// skeleton are the directories every jail of m has.
func (m *Manager) skeleton() []string {
	if !m.cfg.Overlay {
		return skeleton
	}
	return append(slices.Clone(skeleton), m.layerSkeleton()...)
}

// skeletonDirs are the directories the skeleton makes: its own and
// their parents.
func (m *Manager) skeletonDirs() []string {
	var dirs []string
	for _, d := range m.skeleton() {
		for p := d; p != "."; p = path.Dir(p) {
			if !slices.Contains(dirs, p) {
				dirs = append(dirs, p)
			}
		}
	}
	return dirs
}

// Usage counts the jail's inodes and their blocks without following
// symlinks.
func (s *Session) Usage() (jailfs.Usage, error) {
	s.resetMu.RLock()
	defer s.resetMu.RUnlock()
	return s.diskUsage(0)
}

// diskUsage returns the jail's usage: exact and current where the
// manager's usage watch keeps it (Linux: what changed since the last look
// is looked at, nothing else), else a walk of the jail that started less
// than maxAge ago. One walk of a jail runs at a time: a caller that finds
// one running waits for it, and takes its count when it started late
// enough. Walking takes half a second for 100,000 files, so a call's disk
// check before it starts then takes the walk of the last second: the
// precision the watchdog gives the disk bound without inotify.
func (s *Session) diskUsage(maxAge time.Duration) (jailfs.Usage, error) {
	if u, ok := s.exactUsage(); ok {
		return u, nil
	}
	since := time.Now().Add(-maxAge)
	s.usageMu.Lock()
	for {
		if !s.usageAt.IsZero() && !s.usageAt.Before(since) {
			u := s.usage
			s.usageMu.Unlock()
			return u, nil
		}
		if s.walking == nil {
			break
		}
		walk, started := s.walking, s.walkStart
		s.usageMu.Unlock()
		<-walk
		s.usageMu.Lock()
		if !started.Before(since) && s.walkErr != nil {
			err := s.walkErr
			s.usageMu.Unlock()
			return jailfs.Usage{}, err
		}
	}
	done := make(chan struct{})
	start := time.Now()
	s.walking, s.walkStart = done, start
	s.usageMu.Unlock()

	u, err := jailfs.CountRoot(s.root)

	s.usageMu.Lock()
	defer s.usageMu.Unlock()
	s.walking, s.walkErr = nil, err
	close(done)
	if err != nil {
		return u, err
	}
	if !s.usageAt.After(start) {
		s.usage, s.usageAt = u, start
	}
	return u, nil
}

// exactUsage is the jail's usage as of now, where the usage watch keeps
// it; ok is false where it does not.
func (s *Session) exactUsage() (u jailfs.Usage, ok bool) {
	if s.m.uw == nil {
		return jailfs.Usage{}, false
	}
	return s.m.uw.Usage(s.Name)
}

// meter returns the usage the latest look at the jail found, for the
// watchdog, and starts the next look in the background when none runs
// and the latest is older than maxAge: a look that takes long (a walk of
// a deep or large jail) holds up only the looks at this jail, never the
// watchdog's other work (other calls' processes and memory, other jails).
// ok is false until a look has counted the jail.
func (s *Session) meter(maxAge time.Duration) (u jailfs.Usage, ok bool) {
	s.usageMu.Lock()
	defer s.usageMu.Unlock()
	if !s.metering && (s.meteredAt.IsZero() || time.Since(s.meteredAt) >= maxAge) {
		s.metering = true
		gen := s.meterGen
		go s.meterOnce(gen)
	}
	return s.metered, !s.meteredAt.IsZero()
}

func (s *Session) meterOnce(gen uint64) {
	u, err := func() (jailfs.Usage, error) {
		// Held shared, as by a call: a reset (and the session's end)
		// waits for the look, and the look never counts a jail half
		// emptied.
		s.resetMu.RLock()
		defer s.resetMu.RUnlock()
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return jailfs.Usage{}, errClosed
		}
		return s.diskUsage(limits.DiskAge)
	}()
	s.usageMu.Lock()
	defer s.usageMu.Unlock()
	s.metering = false
	if err == nil && gen == s.meterGen {
		s.metered, s.meteredAt = u, time.Now()
	}
}

// forgetUsage drops the latest count: the jail just changed a lot.
func (s *Session) forgetUsage() {
	s.usageMu.Lock()
	s.usageAt, s.meteredAt, s.metered = time.Time{}, time.Time{}, jailfs.Usage{}
	s.meterGen++
	s.usageMu.Unlock()
}

// ResetResult is what Reset removed.
type ResetResult struct {
	RemovedFiles int64
	RemovedBytes int64
	Killed       int
}

// Reset kills every running command of the session, empties its jail
// without following any symlink, and recreates the skeleton.
func (s *Session) Reset(ctx context.Context) (ResetResult, error) {
	var r ResetResult
	r.Killed = s.killAll(errReset)
	// A command started between the kill and the lock is killed too: keep
	// killing until every command has released the jail.
	locked := make(chan struct{})
	go func() {
		s.resetMu.Lock()
		close(locked)
	}()
	for done := false; !done; {
		select {
		case <-locked:
			done = true
		case <-ctx.Done():
			go func() { <-locked; s.resetMu.Unlock() }()
			return r, fmt.Errorf("reset %s: %w", s.Path, context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
			r.Killed += s.killAll(errReset)
		}
	}
	defer s.resetMu.Unlock()
	// Nothing of the session runs while its jail is emptied: its agents
	// stop, and the next call starts new ones. Its jobs were killed with
	// its calls; their outputs go with the jail.
	s.stopAgents()
	s.clearJobs()
	s.releaseJail()
	// The skeleton's directories are made again: what they took is not
	// what the reset removed.
	var skel jailfs.Usage
	for _, d := range s.m.skeletonDirs() {
		if fi, err := s.root.Lstat(d); err == nil && fi.IsDir() {
			skel.Files++
			skel.Bytes += jailfs.DiskBytes(fi)
		}
	}
	// Emptied by descriptors, never by a path from the jail's root
	// (jailfs.EmptyRoot): a symlink is removed itself, never followed, and
	// directories a command left without rights (chmod 500, 000) are
	// opened up, inside the jail only, so that they can be emptied when
	// the server is not root.
	u, err := jailfs.EmptyRoot(s.root)
	u.Files, u.Bytes = max(u.Files-skel.Files, 0), max(u.Bytes-skel.Bytes, 0)
	s.forgetUsage()
	s.ensureSkeleton()
	if err := s.layerLedger().Resync(); err != nil {
		s.m.log.Warn("look at the session's layer", "session", s.Name, "err", err)
	}
	r.RemovedFiles, r.RemovedBytes = u.Files, u.Bytes
	if err != nil {
		return r, fmt.Errorf("reset %s: %w", s.Path, err)
	}
	return r, nil
}

// outputs are the jail's output directories; pruning keeps running
// jobs'.
func (s *Session) outputs() output.Dirs {
	return output.Dirs{Root: s.root, Live: s.liveOutputDirs}
}
