//go:build !linux

package jail

func overlayKernel() error { return ErrNoOverlay }
