//go:build !linux && !darwin

package jail

import (
	"context"
	"runtime"
)

var goos = runtime.GOOS

// preferred names no backend: none exists on this system.
const preferred = ""

func native(name string) bool { return false }

func probe(ctx context.Context, name string, opts Options) Report {
	return Report{Backend: name, Reason: name + " does not exist on " + goos}
}

func construct(name string, r Report) (Backend, error) {
	return nil, &UnavailableError{Backend: name, Reason: "does not exist on " + goos}
}

// isMainThread: no backend here confines a thread, so any will do.
func isMainThread() bool { return false }
