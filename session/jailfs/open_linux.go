package jailfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// oPath opens a descriptor that only names a file, for a backend to bind.
const oPath = unix.O_PATH

// OpenPath opens name inside root as an O_PATH descriptor without
// following a final symlink, for a backend to bind by descriptor.
func OpenPath(root *os.Root, name string) (*os.File, error) {
	return root.OpenFile(name, unix.O_PATH|unix.O_NOFOLLOW, 0)
}
