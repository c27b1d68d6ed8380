package jail

import "os"

// The project view mounted by bubblewrap itself (0.9 and later, which
// mount overlayfs: --overlay-src, --overlay): the session's sandbox
// starts with the project copy-on-write at its place, so its agent needs
// no user namespace of its own to mount in, and the sandbox can refuse
// every namespace (--disable-userns), as a host that gives bubblewrap's
// children none does (Ubuntu's AppArmor profile for bwrap). A view then
// lasts as long as its sandbox: after a change of the host's project, the
// server starts a new agent for the calls that follow once the session's
// agent is idle (session/agents.go).

// NativeOverlay reports whether b shows the project view by bubblewrap's
// own overlay (one view per session agent) rather than by a mount of the
// agent's in a nested user namespace (views renewed within the agent).
func NativeOverlay(b Backend) bool {
	n, ok := b.(interface{ nativeOverlay() bool })
	return ok && n.nativeOverlay()
}

// nativeLayer is the layer's directories bubblewrap mounts the view and
// the caches with, each opened by the server without following a link,
// beneath the layer's directory: bubblewrap takes them as /proc/self/fd/N
// (BwrapArgs). work and each cache's work are made for one sandbox.
type nativeLayer struct {
	upper, work *os.File
	caches      []nativeCache
	// workNames are the work directories made for this sandbox, relative
	// to the layer: removed when it ends.
	workNames []string
}

// nativeCache is a host cache shown copy-on-write at target.
type nativeCache struct {
	lower, target string
	upper, work   *os.File
}

// files are the layer's descriptors in the order BwrapArgs numbers them:
// the project's first (right after the host), the caches' after the
// jail's and the credentials'.
func (n *nativeLayer) files() (project, caches []*os.File) {
	project = []*os.File{n.upper, n.work}
	for _, c := range n.caches {
		caches = append(caches, c.upper, c.work)
	}
	return project, caches
}

// nativeLayer is spec's layer for bubblewrap's own overlay, nil when the
// view is the agent's (or there is none).
func (s Spec) nativeLayer() *nativeLayer {
	if s.Overlay == nil {
		return nil
	}
	return s.Overlay.native
}
