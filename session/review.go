package session

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/jail-mcp/jail-mcp/session/layer"
	"github.com/jail-mcp/jail-mcp/session/ledger"
	"github.com/jail-mcp/jail-mcp/session/output"
	"github.com/jail-mcp/jail-mcp/session/view"
)

// What the project view (--overlay, session/view) changed, and how it
// reaches the project: session/layer does the work, on the session's
// upper layer; a session only finds the layer, bounds what is returned
// and holds the locks.

// ErrNoView refuses jail_diff and jail_apply when the view is off: the
// project is then read-only to commands and there is no layer.
var ErrNoView = errors.New("the project view is off: start the server with --overlay on")

// patchFile is the name of the whole patch in its output directory.
const patchFile = "diff.patch"

// DiffResult is what the session's view changes against the project.
type DiffResult struct {
	Changes []layer.Change
	Ignored []layer.Summary
	// Patch is the unified patch (layer.Options.Patch), at most
	// --max-output bytes of it: its head, cut at a line's end, then a
	// marker saying how many bytes were left out and where they are.
	Patch          string
	PatchBytes     int // the whole patch
	PatchTruncated bool
	// OutputPath is the file in the jail that holds the whole patch, when
	// it was cut.
	OutputPath string
	// Digest binds a jail_apply to this listing (layer.Diff.Digest).
	Digest string
	// Conflicts are the paths the host changed after the layer copied
	// them (Changes marks them too).
	Conflicts []ledger.Conflict
}

// Diff compares the session's layer with the project.
func (s *Session) Diff(opt layer.Options) (DiffResult, error) {
	if !s.m.cfg.Overlay {
		return DiffResult{}, ErrNoView
	}
	// Shared, as by a command: a reset or an apply never changes the
	// layer under the walk.
	s.resetMu.RLock()
	defer s.resetMu.RUnlock()
	upper, err := s.layerUpper()
	if err != nil {
		return DiffResult{}, err
	}
	opt.Unread = s.unreadRel
	d, err := layer.Compute(upper, s.m.cfg.Project, opt)
	if err != nil {
		return DiffResult{}, fmt.Errorf("compare the layer of %s with the project: %w", s.Path, err)
	}
	r := DiffResult{Changes: d.Changes, Ignored: d.Ignored, PatchBytes: len(d.Patch), Digest: d.Digest}
	s.boundPatch(d.Patch, &r)
	s.markConflicts(&r, opt.Patch)
	return r, nil
}

// unreadRel reports whether the project path rel (relative) is on the
// --deny-read list: no patch shows its host side.
func (s *Session) unreadRel(rel string) bool {
	return s.m.cfg.Deny.Covers(filepath.Join(s.m.cfg.Project, rel))
}

// ErrViewBusy refuses an Apply while commands of the session run: their
// view is mounted, and a layer changed under a mounted view loses writes.
var ErrViewBusy = errors.New("jail_apply changes the layer only while no command of the session runs: " +
	"let them end, or end the jobs (jail_job signal KILL), then apply again (dry_run works meanwhile)")

// applyWait bounds how long Apply waits for what holds the jail without
// being a command (a look at its usage, a diff) to let go of it.
const applyWait = 5 * time.Second

// Apply writes the changes of the session's layer at or below paths
// (relative to the project) to the project, or with dryRun says what it
// would write: all of them or, when layer.Apply refuses any, none. What
// it wrote leaves the layer. With an error once writing began, the
// result lists what was written.
func (s *Session) Apply(paths []string, dryRun bool) (*layer.Applied, error) {
	return s.ApplyReviewed(paths, dryRun, "")
}

// ApplyReviewed is Apply bound to a review: with digest (a jail_diff's,
// layer.Diff.Digest) set, it refuses unless the layer still holds what
// that jail_diff listed.
func (s *Session) ApplyReviewed(paths []string, dryRun bool, digest string) (*layer.Applied, error) {
	if !s.m.cfg.Overlay {
		return nil, ErrNoView
	}
	if dryRun {
		// Only reads: beside commands, as a diff.
		s.resetMu.RLock()
		defer s.resetMu.RUnlock()
		return s.apply(paths, true, digest)
	}
	// Held exclusively, as by a reset (which then waits, and so does the
	// session's end): no command runs, none starts, and no other apply
	// or diff looks at the layer meanwhile.
	if err := s.lockIdle(); err != nil {
		return nil, err
	}
	defer s.resetMu.Unlock()
	if _, err := s.layerUpper(); err != nil {
		return nil, err
	}
	// overlayfs keeps using the upper entries it looked up: the views
	// are unmounted first, by stopping the agents that hold them (their
	// work directories go too). The next call starts an agent with a
	// fresh view; one is started now, once the lock is let go.
	s.stopAgents()
	s.cleanViews()
	defer func() { go s.Warm() }()
	defer func() {
		if err := s.layerLedger().Resync(); err != nil {
			s.m.log.Warn("look at the session's layer", "session", s.Name, "err", err)
		}
	}()
	return s.apply(paths, false, digest)
}

func (s *Session) apply(paths []string, dryRun bool, digest string) (*layer.Applied, error) {
	upper, err := s.layerUpper()
	if err != nil {
		return nil, err
	}
	a, err := layer.ApplyWith(upper, s.m.cfg.Project, paths, layer.ApplyOptions{DryRun: dryRun, Views: &s.views, Digest: digest, MaxBytes: s.m.cfg.MaxDisk, Skip: s.m.cfg.Writable})
	if !dryRun && a != nil && len(a.Refused) == 0 && len(a.Changes) > 0 {
		// The server itself wrote the host's project: said in its log.
		s.m.log.Info("applied the layer to the project", "session", s.Name, "paths", paths, "changes", len(a.Changes), "err", err)
	}
	if err != nil {
		return a, fmt.Errorf("apply the layer of %s to the project: %w", s.Path, err)
	}
	return a, nil
}

// lockIdle takes resetMu exclusively once it is free, or refuses with
// ErrViewBusy while a command of the session runs: a job may run for
// hours, and a writer waiting on the lock would hold up every call
// behind it.
func (s *Session) lockIdle() error {
	deadline := time.Now().Add(applyWait)
	for {
		if n := s.Running(); n > 0 {
			return fmt.Errorf("%d commands of session %s run: %w", n, s.Name, ErrViewBusy)
		}
		if s.resetMu.TryLock() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("session %s: the jail stayed busy for %v: try again", s.Name, applyWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// layerUpper is the session's upper layer, absolute, once it is known to
// be a directory of the jail's own: neither it nor the layer's directory
// is a symlink (commands never see the layer, but the server does not
// take that on trust). The session must be open and resetMu held.
func (s *Session) layerUpper() (string, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return "", fmt.Errorf("session %s: %w", s.Name, errClosed)
	}
	s.ensureSkeleton()
	for _, p := range []string{view.LayerDir, view.LayerUpper} {
		fi, err := s.root.Lstat(p)
		if err != nil {
			return "", fmt.Errorf("open the layer of %s: %w", s.Path, err)
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("open the layer of %s: %s is not a directory", s.Path, p)
		}
	}
	return filepath.Join(s.Path, view.LayerUpper), nil
}

// boundPatch puts patch in r, cut to --max-output when longer: the whole
// patch then goes to a fresh output directory of the jail.
func (s *Session) boundPatch(patch []byte, r *DiffResult) {
	limit := s.m.cfg.MaxOutput
	if limit <= 0 || len(patch) <= limit {
		r.Patch = string(patch)
		return
	}
	r.PatchTruncated = true
	var where string
	kept, n, err := s.outputs().Keep(patchFile, patch, output.KeptMax(s.m.cfg.MaxDisk))
	kept = filepath.Join(s.Path, kept)
	switch {
	case err != nil:
		where = fmt.Sprintf("the whole patch could not be kept: %v", err)
	case n < len(patch):
		r.OutputPath = kept
		where = fmt.Sprintf("the first %d bytes of the patch are in %s", n, kept)
	default:
		r.OutputPath = kept
		where = "the whole patch is in " + kept
	}
	r.Patch = output.CutHead(patch, limit, func(left int) string { return fmt.Sprintf("[... %d bytes left out; %s ...]\n", left, where) })
}
