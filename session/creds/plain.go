package creds

import (
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
)

// plainWay shows a CLI's host files themselves: bound read-only by
// descriptor, or placed as links to them or copies of them.
type plainWay struct{ j *Jail }

// bind binds the host credential read-only, by descriptor.
func (w plainWay) bind(spec *jail.Spec, host, _, target string, opened *[]*os.File) error {
	f, err := openHostPath(host)
	if err != nil {
		return fmt.Errorf("open %s: %w", host, err)
	}
	if f != nil {
		*opened = append(*opened, f)
	}
	spec.Mounts = append(spec.Mounts, jail.Mount{Source: host, Target: target, File: f})
	return nil
}

// place puts a symlink to host at dst (link, for a backend that denies
// writes through it), or a copy of it.
func (w plainWay) place(host, dst string, link bool) error {
	if link {
		return w.j.root.Symlink(host, dst)
	}
	if err := w.j.copyTreeIn(host, dst); err != nil {
		return fmt.Errorf("copy %s: %w", host, err)
	}
	return nil
}

// copyState copies the host state file src to dst, aside first.
func (w plainWay) copyState(src, dst string) error { return w.j.copyFileAside(src, dst) }

// intact tells whether the linked credential it is still as place left
// it: the symlink to its host path, or for a state copy a file or
// directory of its kind with a symlink to the host at each of its
// secrets.
func (w plainWay) intact(it auth.Item) bool {
	root := w.j.root
	rel := filepath.ToSlash(it.Rel)
	linked := func(rel, host string) bool {
		to, err := root.Readlink(rel)
		return err == nil && to == host
	}
	if !it.State {
		return linked(rel, it.Host)
	}
	fi, err := root.Lstat(rel)
	if err != nil || fi.IsDir() != it.Dir || !(fi.IsDir() || fi.Mode().IsRegular()) {
		return false
	}
	for _, sec := range it.Secrets {
		if !linked(path.Join(rel, sec.Name), sec.Host) {
			return false
		}
	}
	return true
}

// refresh has nothing to do: a sandbox binds the host's files
// themselves, which are the host's latest.
func (plainWay) refresh(auth.Item) error { return nil }

// copyTreeIn copies a host file or directory tree to dst in the jail:
// directories and regular files only, modes kept; symlinks inside a
// credential directory are left out.
func (j *Jail) copyTreeIn(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if fi.Mode().IsRegular() {
		return j.copyFileIn(src, dst)
	}
	if !fi.IsDir() {
		return nil
	}
	if err := j.root.Mkdir(dst, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := j.copyTreeIn(filepath.Join(src, e.Name()), path.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
