package jail

import (
	"context"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
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
	filter, err := seccompFilter(runtime.GOARCH)
	if err != nil {
		// No filter for this machine: every syscall of the command is
		// denied, so nothing runs unconfined.
		filter, _ = seccompFilter("amd64")
	}
	return &bwrap{path: path, scope: newScoper(), seccomp: filter}
}

// memfd is an in-memory file holding data, read from its start.
func memfd(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
