package session

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/jail-mcp/jail-mcp/session/layer"
)

// What the project view (--overlay, overlay.go) changed, and how it
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
}

// Diff compares the session's layer with the project.
func (s *Session) Diff(opt layer.Options) (DiffResult, error) {
	if !s.m.cfg.Overlay {
		return DiffResult{}, ErrNoView
	}
	// Shared: a reset never empties the layer under the walk, and an
	// apply never moves entries out of it halfway through.
	s.resetMu.RLock()
	defer s.resetMu.RUnlock()
	s.layerMu.RLock()
	defer s.layerMu.RUnlock()
	upper, err := s.layerUpper()
	if err != nil {
		return DiffResult{}, err
	}
	d, err := layer.Compute(upper, s.m.cfg.Project, opt)
	if err != nil {
		return DiffResult{}, fmt.Errorf("compare the layer of %s with the project: %w", s.Path, err)
	}
	r := DiffResult{Changes: d.Changes, Ignored: d.Ignored, PatchBytes: len(d.Patch)}
	s.boundPatch(d.Patch, &r)
	return r, nil
}

// Apply writes the changes of the session's layer at paths (relative to
// the project) to the project, or with dryRun says what it would write:
// all of them or, when layer.Apply refuses any, none. What it wrote
// leaves the layer.
func (s *Session) Apply(paths []string, dryRun bool) (*layer.Applied, error) {
	if !s.m.cfg.Overlay {
		return nil, ErrNoView
	}
	// A reset waits for the apply (and the session's end, which takes
	// the same lock), so the layer is never emptied while its entries are
	// copied out; commands still run meanwhile, as they do while the host
	// changes the project.
	s.resetMu.RLock()
	defer s.resetMu.RUnlock()
	// One apply at a time, and no diff halfway through one.
	s.layerMu.Lock()
	defer s.layerMu.Unlock()
	upper, err := s.layerUpper()
	if err != nil {
		return nil, err
	}
	a, err := layer.Apply(upper, s.m.cfg.Project, paths, dryRun)
	if err != nil {
		return nil, fmt.Errorf("apply the layer of %s to the project: %w", s.Path, err)
	}
	if !dryRun && len(a.Refused) == 0 {
		// The server itself wrote the host's project: said once, in its log.
		s.m.log.Info("applied the layer to the project", "session", s.Name, "paths", paths, "changes", len(a.Changes))
	}
	return a, nil
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
	for _, p := range []string{layerDir, LayerUpper} {
		fi, err := s.root.Lstat(p)
		if err != nil {
			return "", fmt.Errorf("open the layer of %s: %w", s.Path, err)
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("open the layer of %s: %s is not a directory", s.Path, p)
		}
	}
	return filepath.Join(s.Path, LayerUpper), nil
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
	kept, err := s.keepPatch(patch)
	switch {
	case err != nil:
		where = fmt.Sprintf("the whole patch could not be kept: %v", err)
	case kept.n < len(patch):
		r.OutputPath = kept.path
		where = fmt.Sprintf("the first %d bytes of the patch are in %s", kept.n, kept.path)
	default:
		r.OutputPath = kept.path
		where = "the whole patch is in " + kept.path
	}
	mark := func(left int) string { return fmt.Sprintf("[... %d bytes left out; %s ...]\n", left, where) }
	// Head and marker stay within the bound; sizing the marker with the
	// whole count leaves room for the count it will say.
	head := patch[:max(0, limit-len(mark(len(patch)))-1)]
	if i := bytes.LastIndexByte(head, '\n'); i >= 0 {
		head = head[:i+1]
		r.Patch = string(head) + mark(len(patch)-len(head))
		return
	}
	// One line longer than the bound: cut inside it, at a character.
	head = trimRuneEnd(head)
	r.Patch = string(head) + "\n" + mark(len(patch)-len(head))
}

type keptPatch struct {
	path string // absolute, in the jail
	n    int    // bytes kept
}

// keepPatch writes patch to diff.patch in a new output directory of the
// jail, through the jail's root, up to the bound of a kept stream.
func (s *Session) keepPatch(patch []byte) (keptPatch, error) {
	id := time.Now().UTC().Format("20060102-150405") + "-" + uuid.NewString()[:8]
	dir, err := s.newOutputDir(id)
	if err != nil {
		return keptPatch{}, err
	}
	keep := int64(MaxKept)
	if s.m.cfg.MaxDisk > 0 {
		keep = min(keep, s.m.cfg.MaxDisk/4)
	}
	data := patch[:min(int64(len(patch)), keep)]
	f, err := s.createOutput(dir, patchFile)
	if err != nil {
		return keptPatch{}, err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return keptPatch{}, err
	}
	return keptPatch{path: filepath.Join(s.Path, dir, patchFile), n: len(data)}, nil
}
