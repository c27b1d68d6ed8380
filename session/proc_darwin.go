package session

import (
	"errors"
	"os"
	"syscall"
)

// closeRangeCloexec does not exist here: the descriptors are listed.
func closeRangeCloexec() error { return errors.ErrUnsupported }

// openPath and openHostPath return no descriptor: no backend of this OS
// binds paths, so the session copies credentials instead.
func openPath(root *os.Root, name string) (*os.File, error) { return nil, nil }

func openHostPath(name string) (*os.File, error) { return nil, nil }

const fileSizeSignal = int(syscall.SIGXFSZ)

// oPath adds nothing: a writable directory is opened for reading, to
// check what it is (no backend here binds by descriptor).
const oPath = 0
