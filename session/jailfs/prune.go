package jailfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/google/uuid"
)

// PruneEntry is one jail under a jail base, as prune sees it.
type PruneEntry struct {
	Name     string    `json:"session"`
	Path     string    `json:"jail"`
	LastUsed time.Time `json:"last_used"`
	Files    int64     `json:"files"`
	Bytes    int64     `json:"bytes"`
	Named    bool      `json:"named"`  // given by --session, not a UUID
	InUse    bool      `json:"in_use"` // a running server holds it
	Old      bool      `json:"old"`    // unused for at least the age asked
	// Unapplied is how many changes its layer holds that the project
	// has not (PruneOptions.Unapplied): kept unless forced.
	Unapplied int    `json:"unapplied"`
	Removed   bool   `json:"removed"` // removed by this prune
	Err       string `json:"error,omitempty"`
}

// PruneOptions are what Prune removes.
type PruneOptions struct {
	OlderThan time.Duration // a jail unused this long is old
	Remove    bool          // remove the old jails no server holds
	// Force removes old jails whose layers hold changes not yet applied
	// too; without it they are kept.
	Force bool
	Now   time.Time
	// Unapplied counts what a jail's layer (jail, its root; path, where
	// it is) changes in the project that was not applied; nil: nothing
	// is counted, and every old jail goes.
	Unapplied func(jail *os.Root, path string) (int, error)
}

// Prune lists the jails under the jail base root, with when each was last
// used (the server stamps a jail's directory when it opens and closes the
// session, and holds it locked in between), and with remove deletes those unused for olderThan
// that no running server holds. It never follows a symlink: an entry of
// the base that is not a directory is not a jail, and a jail is emptied
// through its own root, by descriptors.
func Prune(root string, opt PruneOptions) ([]PruneEntry, error) {
	base, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer base.Close()
	names, err := SortedNames(base, ".")
	if err != nil {
		return nil, err
	}
	var out []PruneEntry
	for _, name := range names {
		if ValidName(name) != nil || name[0] == '.' {
			continue
		}
		fi, err := base.Lstat(name)
		if err != nil || !fi.IsDir() {
			continue // a symlink or a file: not a jail
		}
		e := PruneEntry{Name: name, Path: root + string(os.PathSeparator) + name, LastUsed: fi.ModTime()}
		_, perr := uuid.Parse(name)
		e.Named = perr != nil
		e.Old = opt.Now.Sub(e.LastUsed) >= opt.OlderThan
		if err := pruneOne(base, &e, opt); err != nil {
			e.Err = err.Error()
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b PruneEntry) int { return a.LastUsed.Compare(b.LastUsed) })
	return out, nil
}

// pruneOne fills in e's use, size and unapplied changes and, with
// opt.Remove, removes an old jail no server holds, under its lock, unless
// its layer holds changes not yet applied (or opt.Force).
func pruneOne(base *os.Root, e *PruneEntry, opt PruneOptions) error {
	dir, err := base.Open(e.Name)
	if err != nil {
		return err
	}
	defer dir.Close()
	if fi, err := dir.Stat(); err != nil || !fi.IsDir() {
		return errors.New("not a directory")
	}
	locked, err := tryLockExclusive(dir)
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	e.InUse = !locked
	jail, err := base.OpenRoot(e.Name)
	if err != nil {
		return err
	}
	defer jail.Close()
	if opt.Unapplied != nil {
		// Looked at under the lock: no server changes the layer meanwhile
		// (held by one, it is looked at beside it).
		if e.Unapplied, err = opt.Unapplied(jail, e.Path); err != nil {
			return err
		}
	}
	removing := opt.Remove && locked && e.Old && (e.Unapplied == 0 || opt.Force)
	// By descriptors, never by paths from the jail's root (walk_unix.go):
	// a chain of 30,000 directories is counted and removed in the time
	// its directories take.
	walk := CountRoot
	if removing {
		walk = EmptyRoot
	}
	u, err := walk(jail)
	e.Files, e.Bytes = u.Files, u.Bytes
	if !removing {
		if err != nil && !errors.Is(err, fs.ErrPermission) {
			return err
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	if err := base.Remove(e.Name); err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	e.Removed = true
	return nil
}
