// Package jailfs owns a jail on disk: its name, its lock, the walks that
// count and empty it by descriptors, the watch that keeps its usage
// current, the registry where a user's servers name their projects'
// jails, and prune. It never follows a symlink a command could have
// planted: every walk goes from a directory's descriptor to its entries,
// and every open below a jail is made without following links.
package jailfs

import (
	"fmt"
	"os"
	"regexp"
	"slices"
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidName reports why name cannot be a session name, or nil.
func ValidName(name string) error {
	if !nameRE.MatchString(name) || name == "." || name == ".." {
		return fmt.Errorf("invalid session name %q: want 1 to 64 of A-Z a-z 0-9 . _ - other than . and .. themselves", name)
	}
	return nil
}

// Usage is what a jail holds: its inodes of every kind (files,
// directories, symlinks, FIFOs, sockets; a hard link once) and the bytes
// the file system spends on them (their blocks, not their apparent size).
type Usage struct {
	Files int64 `json:"files"`
	Bytes int64 `json:"bytes"`
}

// SortedNames returns the names in dir of root, sorted.
func SortedNames(root *os.Root, dir string) ([]string, error) {
	f, err := root.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	slices.Sort(names)
	return names, err
}
