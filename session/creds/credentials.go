package creds

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/jailfs"
)

// StateDir holds the per-session copies of the files CLIs rewrite at start
// (auth.Path.State), one directory per CLI. It is hidden from commands; the
// copies are shown at their places only to calls that enable their CLI.
const StateDir = ".jail-mcp/state"

// refreshState copies the host's state of the enabled CLIs into the
// session's state directory, replacing older copies; nothing flows back.
// A copy a server left placed is taken back first.
func (j *Jail) refreshState() {
	for _, e := range j.h.Exposed() {
		for _, it := range e.Items {
			if it.State {
				j.adoptState(e.Name, it)
				if err := j.copyState(e.Name, it); err != nil {
					j.log.Warn("copy credential state", "session", j.name, "cli", e.Name, "path", it.Rel, "err", err)
				}
			}
		}
	}
}

// ensureState copies the host's state when the session has none yet (a
// reset removed it, or the host's appeared after the session opened).
func (j *Jail) ensureState(cli string, it auth.Item) error {
	fi, err := j.root.Lstat(statePath(cli, it.Rel))
	if err == nil && fi.IsDir() == it.Dir && (fi.IsDir() || fi.Mode().IsRegular()) {
		return nil
	}
	if err == nil {
		if err := j.removeAll(statePath(cli, it.Rel)); err != nil {
			return err
		}
	}
	return j.copyState(cli, it)
}

func statePath(cli, rel string) string { return path.Join(StateDir, cli, filepath.ToSlash(rel)) }

// copyState writes a fresh copy of a host state file into the state
// directory: written aside, then renamed, all through os.Root. For a state
// directory, the host directory's top-level settings (settingsFile) other
// than its secrets are copied into the session's directory, over older
// copies; files the session made there stay, and subdirectories (caches,
// logs, transcripts) are not carried.
func (j *Jail) copyState(cli string, it auth.Item) error {
	dst := statePath(cli, it.Rel)
	if it.Dir {
		if err := j.ensureDirs(dst); err != nil {
			return err
		}
		entries, err := os.ReadDir(it.Host)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !e.Type().IsRegular() || isSecret(it, e.Name()) || !settingsFile(filepath.Join(it.Host, e.Name())) {
				continue
			}
			if err := j.copyStateFile(cli, filepath.Join(it.Host, e.Name()), path.Join(dst, e.Name())); err != nil {
				return err
			}
		}
		return nil
	}
	if err := j.ensureDirs(path.Dir(dst)); err != nil {
		return err
	}
	return j.copyStateFile(cli, it.Host, dst)
}

// copyStateFile copies the host state file src of cli to dst aside, its
// secrets masked when cli's credentials are.
func (j *Jail) copyStateFile(cli, src, dst string) error {
	if !j.h.masked(cli) {
		return j.copyFileAside(src, dst)
	}
	tmp := dst + ".new"
	if err := j.writeMasked(cli, src, tmp); err != nil {
		return err
	}
	return j.root.Rename(tmp, dst)
}

// MaxSettingsFile bounds a file copied from a CLI's state directory:
// settings are small; what is larger is data.
const MaxSettingsFile = 1 << 20

// notSettings are the names of what a CLI's state directory holds besides
// its settings: databases and their journals, logs, histories.
var notSettings = []string{".db", ".sqlite", ".sqlite3", "-wal", "-shm", "-journal", ".log", ".jsonl", ".lock", ".pid", ".sock"}

// settingsFile reports whether a top-level file of a CLI's state
// directory is settings, worth a copy per session: at most
// MaxSettingsFile bytes, not named like a database, journal, log, history
// or lock, and not an SQLite database by its header.
func settingsFile(path string) bool {
	name := strings.ToLower(filepath.Base(path))
	if strings.Contains(name, ".log.") || slices.ContainsFunc(notSettings, func(suffix string) bool { return strings.HasSuffix(name, suffix) }) {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > MaxSettingsFile {
		return false
	}
	var head [16]byte
	n, _ := io.ReadFull(f, head[:])
	return string(head[:n]) != "SQLite format 3\x00"
}

func isSecret(it auth.Item, name string) bool {
	for _, sec := range it.Secrets {
		if sec.Name == name {
			return true
		}
	}
	return false
}

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

// Bind fills spec with the binds of the credentials: host
// paths read-only at their places, state copies writable at theirs with
// the host's secrets read-only inside them; the state directory is hidden.
// The descriptors it opens for the binds are added to opened, for the
// caller to close once the command has started.
func (j *Jail) Bind(spec *jail.Spec, exps []auth.Exposure, opened *[]*os.File) error {
	// Calls of the session starting at once would race to make the same
	// mount points and state copies.
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.ensureDirs(StateDir); err != nil {
		return fmt.Errorf("prepare %s: %w", StateDir, err)
	}
	for _, e := range exps {
		for _, it := range e.Items {
			target := filepath.Join(j.path, it.Rel)
			if err := j.mountPoint(it.Rel, it.Dir); err != nil {
				return fmt.Errorf("prepare mount point %s: %w", target, err)
			}
			masked := j.h.masked(e.Name)
			if !it.State {
				var err error
				if masked {
					err = j.addMaskedMount(spec, e.Name, it.Host, it.Rel, target, opened)
				} else {
					err = j.addHostMount(spec, it.Host, target, opened)
				}
				if err != nil {
					return err
				}
				continue
			}
			if err := j.ensureState(e.Name, it); err != nil {
				return fmt.Errorf("copy %s: %w", it.Host, err)
			}
			// The state copy lives in the jail, so it is bound by a
			// descriptor opened without following links: a concurrent
			// command swapping it for a symlink cannot redirect the bind.
			src := statePath(e.Name, it.Rel)
			f, err := jailfs.OpenPath(j.root, src)
			if err != nil {
				return fmt.Errorf("open %s: %w", src, err)
			}
			if fi, err := f.Stat(); err != nil || fi.IsDir() != it.Dir || !(fi.IsDir() || fi.Mode().IsRegular()) {
				f.Close()
				return fmt.Errorf("open %s: not a plain file or directory", src)
			}
			*opened = append(*opened, f)
			spec.Mounts = append(spec.Mounts, jail.Mount{Source: filepath.Join(j.path, src), Target: target, Writable: true, File: f})
			for _, sec := range it.Secrets {
				if err := j.mountPoint(path.Join(src, sec.Name), sec.Dir); err != nil {
					return fmt.Errorf("prepare mount point for %s: %w", sec.Host, err)
				}
				if masked {
					err = j.addMaskedMount(spec, e.Name, sec.Host, path.Join(it.Rel, sec.Name), filepath.Join(target, sec.Name), opened)
				} else {
					err = j.addHostMount(spec, sec.Host, filepath.Join(target, sec.Name), opened)
				}
				if err != nil {
					return err
				}
			}
		}
	}
	spec.Hide = append(spec.Hide, filepath.Join(j.path, StateDir))
	return nil
}

// addMaskedMount binds the masked copy of the host credential host of
// cli read-only at target, by descriptor: the copy is written in the
// state directory (maskedRel of rel), and rewritten in place by each
// call after (RefreshMasked), so that a running sandbox sees the host's
// latest.
func (j *Jail) addMaskedMount(spec *jail.Spec, cli, host, rel, target string, opened *[]*os.File) error {
	src := maskedRel(cli, rel)
	if err := j.ensureDirs(path.Dir(src)); err != nil {
		return fmt.Errorf("prepare %s: %w", src, err)
	}
	if err := j.writeMasked(cli, host, src); err != nil {
		return fmt.Errorf("mask %s: %w", host, err)
	}
	f, err := jailfs.OpenPath(j.root, src)
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	*opened = append(*opened, f)
	spec.Mounts = append(spec.Mounts, jail.Mount{Source: filepath.Join(j.path, src), Target: target, File: f})
	return nil
}

// addHostMount binds a host credential read-only, by descriptor.
func (j *Jail) addHostMount(spec *jail.Spec, host, target string, opened *[]*os.File) error {
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

// Place is the path of backends that cannot bind host files
// into the jail: each credential is placed at its home-relative place, a
// symlink to the host path (link, for a backend that denies writes
// through it) or a copy. Calls of one session that run at once share what
// is placed. A link stays once its last call ended, so that the session's
// next call of the same policy finds it in place at no cost (checked
// intact first: what a command changed there is placed again); it goes
// when a call starts that does not show it, when the session is reset,
// and when it ends (state copies are moved back to the state directory,
// never to the host). A copy goes when its last call ends. The returned
// undo ends this call's hold; the caller runs it also when the call fails
// or is cancelled.
func (j *Jail) Place(exps []auth.Exposure, link bool) (undo func() error, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.placed == nil {
		j.placed = map[string]*placement{}
	}
	var mine []string // places this call holds
	// A copy (a backend that cannot deny writes through a link) holds the
	// secret itself: it goes when its last call ends, never kept.
	release := func() error { // with credMu held
		var errs []error
		for _, rel := range mine {
			p := j.placed[rel]
			if p.n--; p.n == 0 && !link {
				delete(j.placed, rel)
				errs = append(errs, p.remove())
			}
		}
		mine = nil
		return errors.Join(errs...)
	}
	undo = func() error {
		j.mu.Lock()
		defer j.mu.Unlock()
		return release()
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	want := map[string]bool{}
	for _, e := range exps {
		for _, it := range e.Items {
			want[filepath.ToSlash(it.Rel)] = true
		}
	}
	// What no running call holds and this one does not show goes first.
	// A removal that fails (a command planted a link on the way) is
	// said, not fatal: under landlock the places only spare a CLI the
	// lookup of its host credentials, which the domain reads anyway.
	var errs []error
	for rel, p := range j.placed {
		if p.n == 0 && !want[rel] {
			delete(j.placed, rel)
			errs = append(errs, p.remove())
		}
	}
	if err := errors.Join(errs...); err != nil {
		j.log.Warn("remove credentials placed in the jail", "session", j.name, "err", err)
	}
	if err := j.ensureDirs(StateDir); err != nil {
		return undo, err
	}
	for _, e := range exps {
		for _, it := range e.Items {
			rel := filepath.ToSlash(it.Rel)
			if p, ok := j.placed[rel]; ok {
				if p.n > 0 || (link && j.intact(e.Name, it)) {
					p.n++
					mine = append(mine, rel)
					continue
				}
				// Changed by a command: placed again, over what is
				// there (placeItem makes way).
				delete(j.placed, rel)
				if err := p.remove(); err != nil {
					j.log.Warn("remove a credential changed in the jail", "session", j.name, "place", rel, "err", err)
				}
			}
			remove, err := j.placeItem(e.Name, it, link)
			if err != nil {
				return undo, err
			}
			j.placed[rel] = &placement{n: 1, remove: remove}
			mine = append(mine, rel)
		}
	}
	return undo, nil
}

// Unplace removes every credential placed in the jail, which
// no call may hold: at a reset and at the session's end.
func (j *Jail) Unplace() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	var errs []error
	for rel, p := range j.placed {
		delete(j.placed, rel)
		errs = append(errs, p.remove())
	}
	return errors.Join(errs...)
}

// intact tells whether the linked credential it is still as placeItem
// left it: the symlink to its host path, or for a state copy a file or
// directory of its kind with a symlink to the host at each of its
// secrets.
func (j *Jail) intact(cli string, it auth.Item) bool {
	if j.h.masked(cli) {
		// Masked copies are made again by every call: the host's latest.
		return false
	}
	rel := filepath.ToSlash(it.Rel)
	linked := func(rel, host string) bool {
		to, err := j.root.Readlink(rel)
		return err == nil && to == host
	}
	if !it.State {
		return linked(rel, it.Host)
	}
	fi, err := j.root.Lstat(rel)
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

// placement is one credential placed in the jail and how many running
// calls hold it.
type placement struct {
	n      int
	remove func() error
}

// placeItem places one credential path for Place and returns
// what removes it; on error, what it placed is removed already.
func (j *Jail) placeItem(cli string, it auth.Item, link bool) (remove func() error, err error) {
	rel := filepath.ToSlash(it.Rel)
	var secrets []string // secrets inside a state copy, removed first
	var made []string    // directories created for rel, outermost first
	saveBack := ""       // the state copy's home in the state directory
	remove = func() error {
		var errs []error
		for _, p := range secrets {
			errs = append(errs, j.root.RemoveAll(p))
		}
		if saveBack != "" {
			if _, err := j.root.Lstat(rel); err == nil {
				errs = append(errs, j.root.RemoveAll(saveBack), j.root.Rename(rel, saveBack))
			}
		}
		errs = append(errs, j.root.RemoveAll(rel))
		for i := len(made) - 1; i >= 0; i-- {
			j.root.Remove(made[i]) // only if empty: the command may have used it
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			remove()
		}
	}()
	place := func(host, dst string) error {
		if j.h.masked(cli) {
			// The jail holds placeholders only: a copy of its own.
			return j.writeMasked(cli, host, dst)
		}
		if link {
			return j.root.Symlink(host, dst)
		}
		if err := j.copyTreeIn(host, dst); err != nil {
			return fmt.Errorf("copy %s: %w", host, err)
		}
		return nil
	}
	made, err = j.makeDirs(path.Dir(rel))
	if err != nil {
		return remove, err
	}
	// Credential places are reserved: what a command left there gives way
	// to the credential.
	if err := j.removeAll(rel); err != nil {
		return remove, err
	}
	if !it.State {
		return remove, place(it.Host, rel)
	}
	src := statePath(cli, it.Rel)
	if err := j.ensureState(cli, it); err != nil {
		return remove, err
	}
	if err := j.root.Rename(src, rel); err != nil {
		return remove, err
	}
	saveBack = src
	for _, sec := range it.Secrets {
		p := path.Join(rel, sec.Name)
		if err := j.root.RemoveAll(p); err != nil {
			return remove, err
		}
		secrets = append(secrets, p)
		if err := place(sec.Host, p); err != nil {
			return remove, err
		}
	}
	return remove, nil
}

// adoptState takes a state copy found in place back to the state
// directory when the state directory has none: what a server that ended
// without taking it out (killed, with the copy placed between calls)
// left there, with what the CLI kept in it since. Its secrets, links to
// the host, go first. What is not of the state's kind stays, to give way
// to the credential. At a session's open, before its state is refreshed.
func (j *Jail) adoptState(cli string, it auth.Item) {
	rel, src := filepath.ToSlash(it.Rel), statePath(cli, it.Rel)
	if _, err := j.root.Lstat(src); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	fi, err := j.root.Lstat(rel)
	if err != nil || fi.IsDir() != it.Dir || !(fi.IsDir() || fi.Mode().IsRegular()) {
		return
	}
	for _, sec := range it.Secrets {
		if err := j.root.RemoveAll(path.Join(rel, sec.Name)); err != nil {
			return
		}
	}
	if j.ensureDirs(path.Dir(src)) == nil {
		j.root.Rename(rel, src)
	}
}

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

// removeAll removes rel and what is below it without following a
// symlink, by descriptors (jailfs.RemoveTree), opening up (inside rel only)
// the directories a command left unwritable.
func (j *Jail) removeAll(rel string) error {
	return jailfs.RemoveTree(j.root, rel)
}
