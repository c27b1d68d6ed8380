//go:build !linux && !darwin

package session

import (
	"errors"
	"os"
	"syscall"
)

// No backend confines on this OS, so Exec refuses before a process starts;
// these exist so that the refusal compiles.
func signalName(sig syscall.Signal) string { return sig.String() }

// closeInheritedFDs has nothing to do here: no command is ever started.
func closeInheritedFDs() error { return nil }

// openPath and openHostPath return no descriptor: no backend of this OS
// binds paths, so the session copies credentials instead.
func openPath(root *os.Root, name string) (*os.File, error) { return nil, nil }

func openHostPath(name string) (*os.File, error) { return nil, nil }

const fileSizeSignal = -1

// openWritable is refused: nothing here confines, let alone a directory
// of the project written in place.
func openWritable(project, dir string, create bool) (*os.File, error) {
	return nil, errors.ErrUnsupported
}
