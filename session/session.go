package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"sync"
	"time"
)

// Session is one jail and the commands running in it.
type Session struct {
	m    *Manager
	Name string
	Path string // the jail, absolute on the host
	root *os.Root
	lock *os.File // the jail's directory, locked shared while open (prune)

	// resetMu is held shared by every running command and exclusively by
	// Reset, so a reset never empties a jail under a live command.
	resetMu sync.RWMutex

	mu      sync.Mutex
	nextID  uint64
	running map[uint64]*call
	closed  bool

	// credMu serialises the credential work of starting calls, and
	// guards placed: the credentials placed in the jail for running
	// calls, by jail-relative path, under backends that place them rather
	// than bind them.
	credMu sync.Mutex
	placed map[string]*placement

	// agentMu guards agents: the session agent of each policy in use.
	agentMu sync.Mutex
	agents  map[agentKey]*agentSlot

	// jobMu guards the session's jobs, by id and oldest first.
	jobMu    sync.Mutex
	jobs     map[string]*Job
	jobOrder []*Job

	// usageMu guards the latest count of the jail and when it was taken.
	usageMu sync.Mutex
	usage   Usage
	usageAt time.Time
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
	s.resetMu.Lock()
	defer s.resetMu.Unlock()
	s.stopAgents()
	if s.m.uw != nil {
		s.m.uw.forget(s)
	}
	s.touch()
	s.lock.Close()
	return s.root.Close()
}

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
func (s *Session) ensureSkeleton() {
	for _, d := range skeleton {
		if err := s.root.MkdirAll(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			s.m.log.Warn("skeleton", "session", s.Name, "dir", d, "err", err)
		}
	}
}

// Usage is what a jail holds.
type Usage struct {
	Files int64 `json:"files"`
	Bytes int64 `json:"bytes"`
}

// Usage counts the files and bytes in the jail without following symlinks.
func (s *Session) Usage() (Usage, error) {
	s.resetMu.RLock()
	defer s.resetMu.RUnlock()
	return s.diskUsage(0)
}

// diskUsage returns the jail's usage: exact and current where the
// manager's usage watch keeps it (Linux: what changed since the last look
// is looked at, nothing else), else the latest walk of the jail when it
// is younger than maxAge. Walking takes half a second for 100,000 files,
// so a call's disk check before it starts then takes the walk of the last
// second: the precision the watchdog gives the disk bound without inotify.
func (s *Session) diskUsage(maxAge time.Duration) (Usage, error) {
	if u, ok := s.exactUsage(); ok {
		return u, nil
	}
	s.usageMu.Lock()
	defer s.usageMu.Unlock()
	if !s.usageAt.IsZero() && time.Since(s.usageAt) < maxAge {
		return s.usage, nil
	}
	u, err := count(s.root, false)
	if err != nil {
		return u, err
	}
	s.usage, s.usageAt = u, time.Now()
	return u, nil
}

// exactUsage is the jail's usage as of now, where the usage watch keeps
// it; ok is false where it does not.
func (s *Session) exactUsage() (u Usage, ok bool) {
	if s.m.uw == nil {
		return Usage{}, false
	}
	return s.m.uw.usage(s)
}

// forgetUsage drops the latest count: the jail just changed a lot.
func (s *Session) forgetUsage() {
	s.usageMu.Lock()
	s.usageAt = time.Time{}
	s.usageMu.Unlock()
}

// count walks the jail; symlinks are counted as files, never followed.
// With unlock it also gives the owner full rights on every directory that
// lacks them, so that a reset can empty them when the server is not root.
func count(root *os.Root, unlock bool) (Usage, error) {
	var u Usage
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			return nil // vanished or unreadable: a running command's business
		}
		if d.IsDir() {
			if !unlock {
				return nil
			}
			if fi, err := d.Info(); err == nil && fi.Mode().Perm()&0o700 != 0o700 {
				root.Chmod(p, fi.Mode().Perm()|0o700)
			}
			return nil
		}
		u.Files++
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				u.Bytes += fi.Size()
			}
		}
		return nil
	})
	return u, err
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
	// Emptying the jail is not followed event by event: it is scanned
	// again, once, at the next look.
	if s.m.uw != nil {
		s.m.uw.forget(s)
	}
	// A command may have left directories it cannot write or read (chmod
	// 500, 000); open them up again, inside the jail only, so that they
	// can be emptied when the server is not root.
	u, err := count(s.root, true)
	if err != nil {
		return r, fmt.Errorf("reset %s: %w", s.Path, err)
	}
	entries, err := readDir(s.root, ".")
	if err != nil {
		return r, fmt.Errorf("reset %s: %w", s.Path, err)
	}
	var errs []error
	for _, name := range entries {
		// os.Root.RemoveAll removes a symlink itself, never its target.
		if err := s.root.RemoveAll(name); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", name, err))
		}
	}
	r.RemovedFiles, r.RemovedBytes = u.Files, u.Bytes
	s.forgetUsage()
	s.ensureSkeleton()
	if err := errors.Join(errs...); err != nil {
		return r, fmt.Errorf("reset %s: %w", s.Path, err)
	}
	return r, nil
}

func readDir(root *os.Root, dir string) ([]string, error) {
	f, err := root.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	slices.Sort(names)
	return names, err
}

// outputDir is where a call's whole output is kept when it is cut.
const outputDir = ".jail-mcp/output"

// keepOutputs is how many calls' output directories a jail keeps.
const keepOutputs = 20

// newOutputDir creates a fresh output directory inside the jail and prunes
// the oldest beyond keepOutputs. It returns the path relative to the jail.
func (s *Session) newOutputDir(id string) (string, error) {
	dir := path.Join(outputDir, id)
	if err := s.root.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if names, err := readDir(s.root, outputDir); err == nil && len(names) > keepOutputs {
		live := s.liveOutputDirs()
		for _, n := range names[:len(names)-keepOutputs] {
			if n != id && !live[n] {
				s.root.RemoveAll(path.Join(outputDir, n))
			}
		}
	}
	return dir, nil
}

func (s *Session) createOutput(dir, name string) (io.WriteCloser, error) {
	return s.root.OpenFile(path.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
}
