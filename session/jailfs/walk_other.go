//go:build !linux && !darwin

package jailfs

import (
	"io/fs"
	"os"
)

// CountRoot counts what the jail root holds: every entry, and the size of
// regular files (this system's blocks are not told apart here).
func CountRoot(root *os.Root) (Usage, error) {
	return walkRoot(root, false)
}

// EmptyRoot removes everything the jail root holds and says what it held.
func EmptyRoot(root *os.Root) (Usage, error) {
	u, err := walkRoot(root, true)
	if err != nil {
		return u, err
	}
	names, err := SortedNames(root, ".")
	if err != nil {
		return u, err
	}
	for _, name := range names {
		if err := root.RemoveAll(name); err != nil {
			return u, err
		}
	}
	return u, nil
}

// RemoveTree removes rel of root and everything below it: a directory
// left without the owner's rights is given them first.
func RemoveTree(root *os.Root, rel string) error {
	if err := root.RemoveAll(rel); err == nil {
		return nil
	}
	sub, err := root.OpenRoot(rel)
	if err == nil {
		walkRoot(sub, true)
		sub.Close()
	}
	return root.RemoveAll(rel)
}

func walkRoot(root *os.Root, unlock bool) (Usage, error) {
	var u Usage
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			return nil // vanished or unreadable: a running command's business
		}
		if p == "." {
			return nil
		}
		u.Files++
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if d.IsDir() && unlock && fi.Mode().Perm()&0o700 != 0o700 {
			root.Chmod(p, fi.Mode().Perm()|0o700)
		}
		if d.Type().IsRegular() {
			u.Bytes += fi.Size()
		}
		return nil
	})
	return u, err
}

// DiskBytes is what the file system spends on the file of fi: its size,
// here.
func DiskBytes(fi os.FileInfo) int64 {
	if fi.Mode().IsRegular() {
		return fi.Size()
	}
	return 0
}
