package jail

import "context"

const (
	goos      = "darwin"
	preferred = "sandbox-exec"
)

func native(name string) bool { return name == "sandbox-exec" }

func probe(ctx context.Context, name string, opts Options) Report {
	if name != "sandbox-exec" {
		return Report{Backend: name, Reason: name + " exists only on Linux"}
	}
	return probeSandboxExec(ctx)
}

func construct(name string, r Report) (Backend, error) {
	if name != "sandbox-exec" {
		return nil, &UnavailableError{Backend: name, Reason: "exists only on Linux"}
	}
	return &sandboxExec{path: r.Path}, nil
}

// isMainThread: no backend here confines a thread, so any will do.
func isMainThread() bool { return false }
