//go:build !linux

package jail

import "context"

// ProbeOverlay: only Linux has the project view.
func ProbeOverlay(ctx context.Context, b Backend) error { return OverlayUsable(b) }
