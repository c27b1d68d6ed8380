package creds

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/jail-mcp/jail-mcp/session/jailfs"
)

// copyFileAside replaces dst in the jail by a copy of the host file src,
// written aside first so that dst is never half-written.
func (j *Jail) copyFileAside(src, dst string) error {
	tmp := dst + ".new"
	if err := j.copyFileIn(src, tmp); err != nil {
		return err
	}
	return j.root.Rename(tmp, dst)
}

// copyFileIn copies the host file src to dst inside the jail, replacing
// whatever is at dst without following it.
func (j *Jail) copyFileIn(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return j.createIn(dst, in)
}

// createIn makes dst in the jail a new file of what r holds, replacing
// whatever is there without following it.
func (j *Jail) createIn(dst string, r io.Reader) error {
	if err := j.root.RemoveAll(dst); err != nil {
		return err
	}
	out, err := j.root.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, r)
	return errors.Join(err, out.Close())
}

// plainRel refuses a jail-relative path that is absolute, empty or has a
// "." or ".." component: os.Root.RemoveAll("a/..") would empty the jail.
func plainRel(rel string) error {
	if rel == "" || strings.HasPrefix(rel, "/") || strings.IndexByte(rel, 0) >= 0 {
		return fmt.Errorf("invalid jail path %q", rel)
	}
	for _, part := range strings.Split(rel, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("invalid jail path %q", rel)
		}
	}
	return nil
}

// ensureDirs makes every component of dir (slash-separated, relative to
// the jail) a real directory: a symlink or a file a command left there is
// removed, never followed.
func (j *Jail) ensureDirs(dir string) error {
	_, err := j.makeDirs(dir)
	return err
}

// makeDirs is ensureDirs, returning the components that did not exist
// before, outermost first.
func (j *Jail) makeDirs(dir string) (made []string, err error) {
	if dir == "." || dir == "" {
		return nil, nil
	}
	if err := plainRel(dir); err != nil {
		return nil, err
	}
	p := ""
	for _, part := range strings.Split(dir, "/") {
		p = path.Join(p, part)
		fi, err := j.root.Lstat(p)
		switch {
		case err == nil && fi.IsDir():
			continue
		case err == nil:
			if err := j.root.Remove(p); err != nil {
				return made, err
			}
		case errors.Is(err, fs.ErrNotExist):
			made = append(made, p)
		default:
			return made, err
		}
		if err := j.root.Mkdir(p, 0o700); err != nil {
			// A call running at the same time made it first: fine, if it
			// is a directory now; it is not ours to remove later.
			if fi, lerr := j.root.Lstat(p); errors.Is(err, fs.ErrExist) && lerr == nil && fi.IsDir() {
				if n := len(made); n > 0 && made[n-1] == p {
					made = made[:n-1]
				}
				continue
			}
			return made, err
		}
	}
	return made, nil
}

// mountPoint makes rel an empty directory or file for a bind mount, unless
// a real one of the right kind is there already; a symlink is replaced.
func (j *Jail) mountPoint(rel string, dir bool) error {
	rel = filepath.ToSlash(rel)
	if err := plainRel(rel); err != nil {
		return err
	}
	if err := j.ensureDirs(path.Dir(rel)); err != nil {
		return err
	}
	fi, err := j.root.Lstat(rel)
	switch {
	case err == nil && dir && fi.IsDir():
		return nil
	case err == nil && !dir && fi.Mode().IsRegular():
		return nil
	case err == nil:
		if err := j.root.RemoveAll(rel); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	// Calls running at the same time may race to make the same mount
	// point: one of the right kind made by another is as good.
	if dir {
		err := j.root.Mkdir(rel, 0o700)
		if fi, lerr := j.root.Lstat(rel); errors.Is(err, fs.ErrExist) && lerr == nil && fi.IsDir() {
			return nil
		}
		return err
	}
	f, err := j.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if fi, lerr := j.root.Lstat(rel); errors.Is(err, fs.ErrExist) && lerr == nil && fi.Mode().IsRegular() {
			return nil
		}
		return err
	}
	return f.Close()
}

// removeAll removes rel and what is below it without following a
// symlink, by descriptors (jailfs.RemoveTree), opening up (inside rel only)
// the directories a command left unwritable.
func (j *Jail) removeAll(rel string) error {
	return jailfs.RemoveTree(j.root, rel)
}

// writeInPlace makes dst a regular file holding b: the file that is there
// rewritten (a bind of it shows the new content), else a new one.
func (j *Jail) writeInPlace(dst string, b []byte) error {
	if fi, err := j.root.Lstat(dst); err == nil && fi.Mode().IsRegular() {
		if old, err := j.root.ReadFile(dst); err == nil && bytes.Equal(old, b) {
			return nil
		}
		if f, err := j.root.OpenFile(dst, os.O_WRONLY, 0); err == nil {
			_, werr := f.WriteAt(b, 0)
			return errors.Join(werr, f.Truncate(int64(len(b))), f.Close())
		}
	}
	return j.createIn(dst, bytes.NewReader(b))
}
