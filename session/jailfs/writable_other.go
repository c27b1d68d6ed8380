//go:build !linux && !darwin

package jailfs

import (
	"errors"
	"os"
)

// OpenWritable is refused: nothing here confines, let alone a directory
// of the project written in place.
func OpenWritable(project, dir string, create bool) (*os.File, error) {
	return nil, errors.ErrUnsupported
}
