//go:build unix

package jailfstest

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// HostUsage is what the file system spends below dir, by the host's own
// walk: every inode but dir's, of every kind, by its blocks (in bytes), a
// hard link once.
func HostUsage(t testing.TB, dir string) (files, bytes int64) {
	t.Helper()
	seen := map[uint64]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() && st.Nlink > 1 {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		files++
		bytes += st.Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files, bytes
}

// Chain makes a chain of n directories "d" below dir, with a file "f" at
// its bottom, each made and entered by its parent's descriptor, so that
// the test itself takes the chain's length, not its square; Unchain
// removes it the same way when the test ends (os.RemoveAll holds a
// descriptor a level and runs out of them).
func Chain(t testing.TB, dir string, n int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := unix.Mkdirat(fd, "d", 0o700); err != nil {
			unix.Close(fd)
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	f, err := unix.Openat(fd, "f", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(f, []byte("bottom"))
	unix.Close(f)
	t.Cleanup(func() { Unchain(t, dir) })
}

// Unchain removes what is left of a chain of directories "d" below dir
// (and the file "f" at its bottom), by descriptors: down the chain, then
// up it by "..", each directory removed from its parent. A dir that is
// gone is nothing to remove.
func Unchain(t testing.TB, dir string) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	depth := 0
	for {
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			break
		}
		unix.Close(fd)
		fd, depth = next, depth+1
	}
	unix.Unlinkat(fd, "f", 0)
	for ; depth > 0; depth-- {
		up, err := unix.Openat(fd, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Errorf("remove the chain: %v", err)
			return
		}
		fd = up
		if err := unix.Unlinkat(fd, "d", unix.AT_REMOVEDIR); err != nil {
			t.Errorf("remove the chain: %v", err)
		}
	}
	unix.Close(fd)
}
