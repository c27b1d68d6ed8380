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

// Extra needs the no-follow calls of Linux or macOS; with no view there
// is nothing further to protect.
func Extra(project string) ([]string, error) {
	return nil, nil
}

// ExtraNested is Extra: with no view there is nothing further to
// protect.
func ExtraNested(project string) ([]string, error) {
	return nil, nil
}

// ApplyWith needs the no-follow calls of Linux or macOS.
func ApplyWith(upper, project string, paths []string, opt ApplyOptions) (*Applied, error) {
	return Apply(upper, project, paths, opt.DryRun)
}
