package jail

import "fmt"

// OverlayUsable says why backend b cannot show the project copy-on-write
// (--overlay), or nil: only bubblewrap with session agents can, on a
// kernel that mounts overlayfs in a user namespace (5.11 and later).
func OverlayUsable(b Backend) error {
	if b == nil || !b.Confined() {
		return fmt.Errorf("%w: no backend confines here", ErrNoOverlay)
	}
	if b.Name() != "bwrap" || !b.Agents() {
		return fmt.Errorf("%w: the %s backend cannot mount in its sandbox", ErrNoOverlay, b.Name())
	}
	return overlayKernel()
}
