package session

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/jailfs"
	"github.com/jail-mcp/jail-mcp/session/view"
)

// The session's side of the project view (session/view): the layer's
// directories in each jail, the view handed to each sandbox, and the
// agents told when the project changed.

// ValidPassEnv checks one --pass-env entry: a variable name or PREFIX_*.
func ValidPassEnv(entry string) error { return view.ValidPassEnv(entry) }

// layerSkeleton are the directories the project view needs in a jail:
// the layer's and the caches' mount points.
func (m *Manager) layerSkeleton() []string {
	if !m.cfg.Overlay {
		return nil
	}
	return m.view.Skeleton()
}

// viewFiles gives spec the project view, its layer by a descriptor that
// the caller closes, and hides the layer from commands.
func (s *Session) viewFiles(spec *jail.Spec, opened *[]*os.File) error {
	if !s.m.cfg.Overlay {
		return nil
	}
	lf, err := jailfs.OpenPath(s.root, view.LayerDir)
	if err != nil {
		return fmt.Errorf("open the layer of %s: %w", s.Path, err)
	}
	if lf != nil {
		*opened = append(*opened, lf)
		if fi, err := lf.Stat(); err != nil || !fi.IsDir() {
			return fmt.Errorf("open the layer of %s: not a directory", s.Path)
		}
	}
	// The view's root takes the upper layer's owner and mode: the
	// project's.
	if pi, err := os.Stat(s.m.cfg.Project); err == nil {
		if ui, err := s.root.Lstat(view.LayerUpper); err == nil && ui.IsDir() && ui.Mode().Perm() != pi.Mode().Perm() {
			s.root.Chmod(view.LayerUpper, pi.Mode().Perm())
		}
	}
	// The project's number now: the agent's spares arm in a view made
	// at it, which the first call fits unless the project changes
	// meanwhile (a change tells the agent, renewViews).
	spec.Overlay = &jail.Overlay{Layer: lf, Caches: s.m.view.Mounts(s.Path), Gen: s.m.view.Gen()}
	spec.Hide = append(spec.Hide, filepath.Join(s.Path, view.LayerDir))
	return nil
}

// cleanViews removes the work directories of the views of the session's
// stopped agents; the layer stays.
func (s *Session) cleanViews() {
	if !s.m.cfg.Overlay {
		return
	}
	s.m.view.Clean(s.root, func(r *os.Root) { jailfs.EmptyRoot(r) })
}

// renewViews tells every session agent that the project is at gen now:
// each readies a view of it ahead of the next call; under bubblewrap's own
// view, each session readies a new agent.
func (m *Manager) renewViews(gen uint64) {
	if jail.NativeOverlay(m.cfg.Backend) {
		// A view per agent: a new agent, once the session is idle.
		for _, s := range m.all() {
			s.freshen()
		}
		return
	}
	for _, s := range m.all() {
		s.agentMu.Lock()
		for _, a := range s.agents {
			if r, ok := a.runner.(view.Renewer); ok {
				r.RenewView(viewGen(a, gen))
			}
		}
		s.agentMu.Unlock()
	}
}

// ViewWatch says, under --overlay, whether the server's watch of the
// project sees every change ("watching"), or is blind and why: every call
// then gets a view of its own (a mount per call), until it sees all again.
func (m *Manager) ViewWatch() string { return m.view.Status() }
