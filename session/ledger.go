package session

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/jail-mcp/jail-mcp/session/layer"
	"github.com/jail-mcp/jail-mcp/session/ledger"
	"github.com/jail-mcp/jail-mcp/session/view"
)

// The session's side of its layer's ledger (session/ledger): what each
// call changed in the project view, the host's edits the layer hides
// (conflicts), the copies that hide nothing of the session's (dropped
// before a call, while the session is idle), and jail_discard.

// layerLedger is the session's ledger, made at its first use, when the
// layer's entries are recorded as they are (a layer an earlier server
// left takes its entries' births as when they were copied); nil without
// the view.
func (s *Session) layerLedger() *ledger.Ledger {
	if !s.m.cfg.Overlay {
		return nil
	}
	s.ledgerOnce.Do(func() {
		s.ensureSkeleton()
		s.ledger = ledger.New(filepath.Join(s.Path, view.LayerUpper), s.m.cfg.Project, s.views.Floor)
		if err := s.ledger.Resync(); err != nil {
			s.m.log.Warn("look at the session's layer", "session", s.Name, "err", err)
		}
	})
	return s.ledger
}

// refreshIdle drops the layer's copies that hold nothing of the
// session's own (ledger.Refresh), before a call and only while no
// command of the session runs, so that the call sees the host's file.
// The agents' views may hold the dropped entries (overlayfs keeps the
// upper entries it looked up): they are stopped, as by an apply, and the
// call starts a new one. It returns the paths dropped.
func (s *Session) refreshIdle() []string {
	l := s.layerLedger()
	if l.Noops() == 0 || !s.resetMu.TryLock() {
		return nil
	}
	defer s.resetMu.Unlock()
	if s.Running() > 0 {
		return nil
	}
	dropped, err := l.Refresh()
	if err != nil {
		s.m.log.Warn("drop the layer's copies that hold the host's bytes", "session", s.Name, "err", err)
	}
	if len(dropped) > 0 {
		s.stopAgents()
		s.cleanViews()
	}
	return dropped
}

// noteLayer puts in res what its call changed in the layer, the
// session's conflicts, and the copies dropped before it.
func (s *Session) noteLayer(res *Result, refreshed []string) {
	l := s.layerLedger()
	if l == nil {
		return
	}
	var c ledger.Changes
	// Where the usage watch numbers the layer's changes, a call that
	// changed nothing there costs no walk of it (an npm install leaves
	// tens of thousands of files).
	var seq uint64
	var watched bool
	if s.m.uw != nil {
		seq, watched = s.m.uw.Changes(s.Name, view.LayerUpper)
	}
	s.mu.Lock()
	skip := watched && seq == s.layerSeq
	s.mu.Unlock()
	if !skip {
		var err error
		if c, err = l.Sync(); err != nil {
			s.m.log.Warn("look at the session's layer", "session", s.Name, "err", err)
			watched = false
		}
		s.mu.Lock()
		s.layerSeq = 0
		if watched {
			s.layerSeq = seq
		}
		s.mu.Unlock()
	}
	res.Project = &c
	res.Conflicts = l.Conflicts(s.m.view.Gen())
	res.Refreshed = refreshed
}

// Conflicts are the project paths the host changed after this session's
// layer copied them (commands see the session's copy); none without the
// view.
func (s *Session) Conflicts() []ledger.Conflict {
	s.resetMu.RLock()
	defer s.resetMu.RUnlock()
	return s.layerLedger().Conflicts(s.m.view.Gen())
}

// markConflicts marks d's changes the host changed too, with both sides'
// patches when patch, and lists every conflict.
func (s *Session) markConflicts(d *DiffResult, patch bool) {
	l := s.layerLedger()
	d.Conflicts = l.Conflicts(s.m.view.Gen())
	host := map[string]string{}
	for _, c := range d.Conflicts {
		host[c.Path] = c.Host
	}
	for i := range d.Changes {
		c := &d.Changes[i]
		if h, ok := host[c.Path]; ok {
			c.Conflict = h
			if patch {
				c.ConflictPatch = l.ConflictPatch(c.Path, s.unreadRel)
			}
		}
	}
}

// ErrDiscardAll refuses a jail_discard of the whole project.
var ErrDiscardAll = errors.New(`"." would drop every change of the session: jail_reset does that (and empties the jail)`)

// Discard drops the session's layer at each path (relative to the
// project, or absolute inside it; as jail_diff lists it), so that
// commands see the host's entry there (jail_discard): all of them, or
// with an error none. Refused while a command of the session runs, as
// an apply.
func (s *Session) Discard(paths []string) ([]string, error) {
	if !s.m.cfg.Overlay {
		return nil, ErrNoView
	}
	rels := make([]string, 0, len(paths))
	for _, p := range paths {
		rel, err := s.discardPath(p)
		if err != nil {
			return nil, err
		}
		rels = append(rels, rel)
	}
	if err := s.lockIdle(); errors.Is(err, ErrViewBusy) {
		return nil, fmt.Errorf("%d commands of session %s run: jail_discard changes the layer only while none runs: "+
			"let them end, or end the jobs (jail_job signal KILL), then discard again", s.Running(), s.Name)
	} else if err != nil {
		return nil, err
	}
	defer s.resetMu.Unlock()
	if _, err := s.layerUpper(); err != nil {
		return nil, err
	}
	dropped, err := s.layerLedger().Discard(rels, func() {
		// As an apply: the views holding the layer's entries go first.
		s.stopAgents()
		s.cleanViews()
	})
	if len(dropped) > 0 {
		s.m.log.Info("discarded the layer's copies", "session", s.Name, "paths", dropped)
		go s.Warm()
	}
	return dropped, err
}

// discardPath is p, a path jail_discard was given, relative to the
// project, or an *InputError: outside the project, not clean, or
// protected (layer.Protected, as jail_apply).
func (s *Session) discardPath(p string) (string, error) {
	raw, err := layer.Unquote(p)
	if err != nil || raw == "" || strings.ContainsRune(raw, 0) {
		return "", inputErrorf("discard %q: not a path", p)
	}
	if filepath.IsAbs(raw) {
		rel, err := filepath.Rel(s.m.cfg.Project, raw)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return "", inputErrorf("discard %s: outside the project %s", layer.Shown(raw), s.m.cfg.Project)
		}
		raw = filepath.ToSlash(rel)
	}
	raw = strings.TrimSuffix(raw, "/")
	if raw == "." {
		return "", &InputError{msg: ErrDiscardAll.Error()}
	}
	for _, c := range strings.Split(raw, "/") {
		if c == "" || c == "." || c == ".." {
			return "", inputErrorf("discard %s: outside the project, or not a clean path (no . or .. components)", layer.Shown(raw))
		}
	}
	if path.Clean(raw) != raw {
		return "", inputErrorf("discard %s: not a clean path", layer.Shown(raw))
	}
	if n, ok := layer.Protected(raw); ok {
		return "", inputErrorf("discard %s: protected (%s): its copy stays, as jail_apply never writes it; jail_reset drops every change", layer.Shown(raw), n)
	}
	return raw, nil
}

// ProjectNote is one line saying what the call changed in the project
// view, and how to review it (review: the tools, or the command line),
// "" when nothing (or without the view).
func (r *Result) ProjectNote(review string) string {
	c := r.Project
	if c == nil || c.Total() == 0 {
		return ""
	}
	var first []string
	for _, p := range c.First {
		first = append(first, p.Path)
	}
	more := ""
	if n := c.Total() - len(first); n > 0 {
		more = fmt.Sprintf(", %d more", n)
	}
	partial := ""
	if c.Partial {
		partial = " (at least: the layer holds more than the ledger looks at)"
	}
	return fmt.Sprintf("project: %d added, %d modified, %d deleted%s (%s%s) in this session's layer, not on the host: %s",
		c.Added, c.Modified, c.Deleted, partial, strings.Join(first, ", "), more, review)
}

// BehindNote is one line saying that the call saw an older state of the
// project than the host's when it started, and why; "" when it did not.
func (r *Result) BehindNote() string {
	if r.ViewBehind.IsZero() {
		return ""
	}
	return fmt.Sprintf("view: this call saw the project as the host had it at %s, the view a call of this session that still ran (a job: jail_status lists it) holds; host changes since are seen by the calls after it ends",
		r.ViewBehind.UTC().Format(time.RFC3339))
}

// ConflictsLine is one line naming the session's conflicts, and how to
// resolve them (resolve: the tools, or the command line), "" when none.
func (r *Result) ConflictsLine(resolve string) string {
	n := len(r.Conflicts)
	if n == 0 {
		return ""
	}
	var names []string
	for _, c := range r.Conflicts[:min(n, maxConflictLines)] {
		names = append(names, c.Path)
	}
	more := ""
	if n > len(names) {
		more = fmt.Sprintf(" and %d more", n-len(names))
	}
	return fmt.Sprintf("%d conflicts: the host changed %s%s after this session copied them; commands see the session's copies (%s)", n, strings.Join(names, ", "), more, resolve)
}

// maxConflictLines bounds the conflicts a result's text names.
const maxConflictLines = 5

// ConflictNotes are the lines naming the session's conflicts and the
// copies dropped before the call, at most maxConflictLines of each.
func (r *Result) ConflictNotes() []string {
	return LayerNotes(r.Conflicts, r.Refreshed)
}

// LayerNotes are the lines naming conflicts and refreshed copies.
func LayerNotes(conflicts []ledger.Conflict, refreshed []string) []string {
	var out []string
	for i, c := range conflicts {
		if i == maxConflictLines {
			out = append(out, fmt.Sprintf("conflict: %d more (conflicts lists them all)", len(conflicts)-i))
			break
		}
		out = append(out, "conflict: "+ConflictLine(c))
	}
	if n := len(refreshed); n > 0 {
		names := refreshed[:min(n, maxConflictLines)]
		more := ""
		if n > len(names) {
			more = fmt.Sprintf(" and %d more", n-len(names))
		}
		out = append(out, fmt.Sprintf("refreshed: %s%s held the host's bytes unchanged; the session's copy was dropped, commands see the host's file", strings.Join(names, ", "), more))
	}
	return out
}

// ConflictLine says what a conflict is and what to do.
func ConflictLine(c ledger.Conflict) string {
	return fmt.Sprintf("the host %s %s after this session copied it; commands see the session's copy (jail_diff patch: true shows both sides; jail_discard takes the host's)", layer.HostDid(c.Host), c.Path)
}
