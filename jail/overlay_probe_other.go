//go:build !linux

package jail

import "context"

// ProbeOverlay: only Linux has the project view.
func ProbeOverlay(ctx context.Context, b Backend) error { return OverlayUsable(b) }

// AsNestedUserns: only Linux has the project view.
func AsNestedUserns(err error) error { return nil }
