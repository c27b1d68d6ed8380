//go:build !linux

package jail

import (
	"context"
	"os"
	"runtime"
)

var goos = runtime.GOOS

const preferred = "sandbox-exec"

func native(name string) bool { return name == preferred }

func probe(ctx context.Context, name string, opts Options) Report {
	return Report{Backend: name, Reason: name + " is not supported on " + goos + " yet"}
}

func construct(name string, r Report) (Backend, error) {
	return nil, &UnavailableError{Backend: name, Reason: "not supported on " + goos + " yet"}
}

func newBwrap(path string) *bwrap { return &bwrap{path: path} }

func memfd(name string, data []byte) (*os.File, error) {
	return nil, &UnavailableError{Backend: "bwrap", Reason: "not supported on " + goos}
}

func landlockABI() (int, error) {
	return 0, &UnavailableError{Backend: "landlock", Reason: "exists only on Linux"}
}

// isMainThread: off Linux no backend confines a thread, so any will do.
func isMainThread() bool { return false }
