//go:build !linux && !darwin

package layer

import (
	"errors"
	"fmt"
	"runtime"
)

// Compute needs the no-follow calls of Linux or macOS.
func Compute(upper, project string, opt Options) (*Diff, error) {
	return nil, fmt.Errorf("comparing the upper layer on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// Apply needs the no-follow calls of Linux or macOS.
func Apply(upper, project string, paths []string, dryRun bool) (*Applied, error) {
	return nil, fmt.Errorf("applying the upper layer on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
