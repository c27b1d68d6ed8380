//go:build linux || darwin

package jailfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"syscall"

	"golang.org/x/sys/unix"
)

// walkWindow is how many directories of a walk's path keep their
// descriptor open. Deeper, the descriptor of the directory walkWindow
// levels up is closed, and taken again from its child's ".." when the walk
// comes back to it: a walk holds at most walkWindow+1 descriptors however
// deep the jail, and each step of it costs one openat.
const walkWindow = 64

// A walk of a jail (counting it, emptying it) goes from each directory's
// descriptor to its entries (openat, fstatat and getdents, never
// following a symlink), with a stack of its own, never by a path from the
// jail's root: a path re-resolved from the root costs its depth, so that
// a chain of 30,000 directories took 13 minutes to walk by path, and the
// kernel's descriptors or Go's recursion would run out before a chain
// made by descriptors does.

// frame is a directory on the walk's path.
type frame struct {
	f       *os.File // nil while out of the window
	owned   bool     // f is the walk's to close
	name    string   // its name in its parent
	ino     uint64
	subdirs []string // its directories not walked yet
	mode    uint32   // the mode to give it back, with restore
	restore bool
}

// tally is a walk's count: every inode below the jail's root, of every
// kind, by the blocks it takes on disk, a hard link once.
type tally struct {
	u     Usage
	dev   uint64
	links map[uint64]bool // inodes of several names already counted
}

func (t *tally) add(st *unix.Stat_t) {
	if uint64(st.Nlink) > 1 && uint32(st.Mode)&unix.S_IFMT != unix.S_IFDIR {
		if t.links[st.Ino] {
			return
		}
		if t.links == nil {
			t.links = map[uint64]bool{}
		}
		t.links[st.Ino] = true
	}
	t.u.Files++
	t.u.Bytes += int64(st.Blocks) * 512
}

// CountRoot counts what the jail root holds (not the jail's directory
// itself).
func CountRoot(root *os.Root) (Usage, error) {
	return walkRoot(root, false)
}

// EmptyRoot removes everything the jail root holds and says what it held.
// Directories a command left without the owner's rights are given them
// back first, so that the server empties them when it is not root.
func EmptyRoot(root *os.Root) (Usage, error) {
	return walkRoot(root, true)
}

func walkRoot(root *os.Root, remove bool) (Usage, error) {
	f, err := root.Open(".")
	if err != nil {
		return Usage{}, err
	}
	defer f.Close()
	return walkTree(f, remove)
}

// RemoveTree removes rel of root and everything below it, never following
// a symlink: a symlink is removed itself.
func RemoveTree(root *os.Root, rel string) error {
	dir, name := path.Split(path.Clean(rel))
	p, err := root.Open(path.Clean("./" + dir))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	defer p.Close()
	pfd := int(p.Fd())
	err = unix.Unlinkat(pfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	f, _, err := openBelow(pfd, name)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("remove %s: %w", rel, err)
	}
	_, werr := walkTree(f, true)
	f.Close()
	if err := unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s: %w", rel, errors.Join(werr, err))
	}
	return nil
}

// walkTree counts the tree below the directory top, open, and with remove
// empties it as well. It never leaves top: no symlink is followed, no
// other file system entered (a mount is neither counted nor entered), and
// ".." is taken only below top, to the directory the walk came from (were
// it moved meanwhile, to where it is now, still below top). What changes
// while it walks (a command's work) may be counted or not; a walk that
// empties a tree runs when nothing else does.
func walkTree(top *os.File, remove bool) (Usage, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(top.Fd()), &st); err != nil {
		return Usage{}, err
	}
	t := &tally{dev: uint64(st.Dev)}
	if remove {
		openUp(int(top.Fd()), &st)
	}
	root := &frame{f: top, ino: st.Ino}
	var errs []error
	if err := t.enter(root, remove); err != nil {
		// What could be read is walked all the same: a file that would
		// not go must not keep a reset from emptying the rest.
		errs = append(errs, err)
	}
	stack := []*frame{root}
	defer func() {
		for _, fr := range stack {
			fr.close()
		}
	}()
	for len(stack) > 0 {
		fr := stack[len(stack)-1]
		if len(fr.subdirs) > 0 {
			name := fr.subdirs[len(fr.subdirs)-1]
			fr.subdirs = fr.subdirs[:len(fr.subdirs)-1]
			child, err := t.open(fr, name, remove)
			if err != nil {
				errs = append(errs, err)
			}
			if child == nil {
				continue
			}
			stack = append(stack, child)
			if i := len(stack) - 1 - walkWindow; i > 0 {
				// Only the descriptor goes: a mode to give back waits
				// for the directory's end, the way back through it
				// needs its rights.
				stack[i].f.Close()
				stack[i].f = nil
			}
			continue
		}
		stack = stack[:len(stack)-1]
		if len(stack) == 0 {
			fr.close()
			break
		}
		parent := stack[len(stack)-1]
		if parent.f == nil {
			if err := t.back(fr, parent); err != nil {
				fr.close()
				return t.u, errors.Join(append(errs, err)...)
			}
		}
		fr.close()
		if remove {
			if err := unix.Unlinkat(int(parent.f.Fd()), fr.name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("remove directory %s: %w", fr.name, err))
			}
		}
	}
	return t.u, errors.Join(errs...)
}

// back takes the descriptor of parent again, out of the window, from its
// child fr's "..".
func (t *tally) back(fr, parent *frame) error {
	fd, err := unix.Openat(int(fr.f.Fd()), "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("walk back up from %s: %w", fr.name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || uint64(st.Dev) != t.dev {
		unix.Close(fd)
		return fmt.Errorf("walk back up from %s: not the jail's file system", fr.name)
	}
	if st.Ino != parent.ino {
		// fr was moved meanwhile: its parent now is another directory
		// below the top, whose mode is not parent's and whose entries
		// are not parent's to walk.
		parent.subdirs, parent.restore = nil, false
	}
	parent.f, parent.owned = os.NewFile(uintptr(fd), parent.name), true
	return nil
}

// open enters the directory name of fr, or returns nil when it is not one
// to enter (gone, replaced, another file system).
func (t *tally) open(fr *frame, name string, remove bool) (*frame, error) {
	f, mode, err := openBelow(int(fr.f.Fd()), name)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return nil, nil // gone or replaced: a running command's business
		}
		if remove {
			return nil, fmt.Errorf("open directory %s: %w", name, err)
		}
		return nil, nil
	}
	child := &frame{f: f, owned: true, name: name, mode: mode, restore: mode != noRestore}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || uint64(st.Dev) != t.dev {
		child.close()
		return nil, nil
	}
	child.ino = st.Ino
	if remove {
		openUp(int(f.Fd()), &st)
		child.restore = false
	}
	t.add(&st)
	return child, t.enter(child, remove)
}

// enter counts the entries of fr, and with remove removes those that are
// not directories; its directories are left to walk.
func (t *tally) enter(fr *frame, remove bool) error {
	fd := int(fr.f.Fd())
	// Every name first: removing while reading may skip entries.
	var names []string
	for {
		batch, err := fr.f.Readdirnames(1024)
		names = append(names, batch...)
		if err == io.EOF || len(batch) == 0 {
			break
		}
		if err != nil {
			return err
		}
	}
	var errs []error
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone already
		}
		if uint32(st.Mode)&unix.S_IFMT == unix.S_IFDIR {
			fr.subdirs = append(fr.subdirs, name)
			continue
		}
		t.add(&st)
		if remove {
			if err := unix.Unlinkat(fd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("remove %s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// close gives fr its mode back, if it was opened up, and closes it.
func (fr *frame) close() {
	if fr.f == nil {
		return
	}
	if fr.restore {
		unix.Fchmod(int(fr.f.Fd()), fr.mode)
		fr.restore = false
	}
	if fr.owned {
		fr.f.Close()
	}
	fr.f = nil
}

// openUp gives the owner every right on the directory fd, for emptying
// it, when it lacks one.
func openUp(fd int, st *unix.Stat_t) {
	if mode := uint32(st.Mode) & 0o7777; mode&0o700 != 0o700 {
		unix.Fchmod(fd, mode|0o700)
	}
}

// restoreMode gives the directory open as f the mode openBelow took away.
func restoreMode(f *os.File, mode uint32) {
	if mode != noRestore {
		unix.Fchmod(int(f.Fd()), mode)
	}
}

// DiskBytes is what the file system spends on the file of fi.
func DiskBytes(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return 0
}

// noRestore is openBelow's mode when it did not change the directory's.
const noRestore = ^uint32(0)

// openDir opens the directory name of the directory parentFd for
// reading, never following a symlink; locked is whether it failed only
// for want of the server's read or search right (EACCES), which
// openBelow then lends it.
func openDir(parentFd int, name string) (f *os.File, locked bool, err error) {
	fd, err := unix.Openat(parentFd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		return os.NewFile(uintptr(fd), name), false, nil
	}
	return nil, errors.Is(err, unix.EACCES), err
}
