package jail

import (
	"context"
	"os"
)

const (
	goos      = "linux"
	preferred = "bwrap"
)

func probe(ctx context.Context, name string, opts Options) Report {
	switch name {
	case "bwrap":
		return probeBwrap(ctx, opts)
	case "landlock":
		return Report{Backend: name, Reason: "the landlock backend is not supported yet"}
	default:
		return Report{Backend: name, Reason: name + " exists only on macOS"}
	}
}

func construct(name string, r Report) (Backend, error) {
	return newBwrap(r.Path), nil
}

func newBwrap(path string) *bwrap {
	return &bwrap{path: path, scope: newScoper(), listen: procNetUnix}
}

// procNetUnix lists the pathname sockets listening in the server's network
// namespace.
func procNetUnix() []string {
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		return nil
	}
	defer f.Close()
	return listeningSockets(f)
}
