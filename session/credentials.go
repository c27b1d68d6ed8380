package session

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
)

// stateDir holds the per-session copies of the files CLIs rewrite at start
// (auth.Path.State), one directory per CLI. It is hidden from commands; the
// copies are shown at their places only to calls that enable their CLI.
const stateDir = ".jail-mcp/state"

// exposures resolves what the named CLIs expose on the host now: paths that
// exist and variables that are set.
func (m *Manager) exposures(names []string) []auth.Exposure {
	return auth.Resolve(names, m.cfg.Home, m.getenv)
}

// Exposed lists what the operator's --auth exposes on this host.
func (m *Manager) Exposed() []auth.Exposure { return m.exposures(m.cfg.Auth) }

// refreshState copies the host's state of the enabled CLIs into the
// session's state directory, replacing older copies; nothing flows back.
func (s *Session) refreshState() {
	for _, e := range s.m.Exposed() {
		for _, it := range e.Items {
			if it.State {
				if err := s.copyState(e.Name, it); err != nil {
					s.m.log.Warn("copy credential state", "session", s.Name, "cli", e.Name, "path", it.Rel, "err", err)
				}
			}
		}
	}
}

// ensureState copies the host's state when the session has none yet (a
// reset removed it, or the host's appeared after the session opened).
func (s *Session) ensureState(cli string, it auth.Item) error {
	fi, err := s.root.Lstat(statePath(cli, it.Rel))
	if err == nil && fi.IsDir() == it.Dir && (fi.IsDir() || fi.Mode().IsRegular()) {
		return nil
	}
	return s.copyState(cli, it)
}

func statePath(cli, rel string) string { return path.Join(stateDir, cli, filepath.ToSlash(rel)) }

// copyState writes a fresh copy of a host state file into the state
// directory: written aside, then renamed, all through os.Root. For a state
// directory, the host directory's top-level files other than its secrets
// are copied into the session's directory, over older copies; files the
// session made there stay, and subdirectories (caches, logs, transcripts)
// are not carried.
func (s *Session) copyState(cli string, it auth.Item) error {
	dst := statePath(cli, it.Rel)
	if it.Dir {
		if err := s.ensureDirs(dst); err != nil {
			return err
		}
		entries, err := os.ReadDir(it.Host)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !e.Type().IsRegular() || isSecret(it, e.Name()) {
				continue
			}
			if err := s.copyFileAside(filepath.Join(it.Host, e.Name()), path.Join(dst, e.Name())); err != nil {
				return err
			}
		}
		return nil
	}
	if err := s.ensureDirs(path.Dir(dst)); err != nil {
		return err
	}
	return s.copyFileAside(it.Host, dst)
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
func (s *Session) copyFileAside(src, dst string) error {
	tmp := dst + ".new"
	if err := s.copyFileIn(src, tmp); err != nil {
		return err
	}
	return s.root.Rename(tmp, dst)
}

// copyFileIn copies the host file src to dst inside the jail, replacing
// whatever is at dst without following it.
func (s *Session) copyFileIn(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := s.root.RemoveAll(dst); err != nil {
		return err
	}
	out, err := s.root.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
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
func (s *Session) ensureDirs(dir string) error {
	_, err := s.makeDirs(dir)
	return err
}

// makeDirs is ensureDirs, returning the components that did not exist
// before, outermost first.
func (s *Session) makeDirs(dir string) (made []string, err error) {
	if dir == "." || dir == "" {
		return nil, nil
	}
	if err := plainRel(dir); err != nil {
		return nil, err
	}
	p := ""
	for _, part := range strings.Split(dir, "/") {
		p = path.Join(p, part)
		fi, err := s.root.Lstat(p)
		switch {
		case err == nil && fi.IsDir():
			continue
		case err == nil:
			if err := s.root.Remove(p); err != nil {
				return made, err
			}
		case errors.Is(err, fs.ErrNotExist):
			made = append(made, p)
		default:
			return made, err
		}
		if err := s.root.Mkdir(p, 0o700); err != nil {
			return made, err
		}
	}
	return made, nil
}

// mountPoint makes rel an empty directory or file for a bind mount, unless
// a real one of the right kind is there already; a symlink is replaced.
func (s *Session) mountPoint(rel string, dir bool) error {
	rel = filepath.ToSlash(rel)
	if err := plainRel(rel); err != nil {
		return err
	}
	if err := s.ensureDirs(path.Dir(rel)); err != nil {
		return err
	}
	fi, err := s.root.Lstat(rel)
	switch {
	case err == nil && dir && fi.IsDir():
		return nil
	case err == nil && !dir && fi.Mode().IsRegular():
		return nil
	case err == nil:
		if err := s.root.RemoveAll(rel); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if dir {
		return s.root.Mkdir(rel, 0o700)
	}
	f, err := s.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// bindCredentials fills spec with the binds of the credentials: host
// paths read-only at their places, state copies writable at theirs with
// the host's secrets read-only inside them; the state directory is hidden.
// The descriptors it opens for the binds are added to opened, for the
// caller to close once the command has started.
func (s *Session) bindCredentials(spec *jail.Spec, exps []auth.Exposure, opened *[]*os.File) error {
	if err := s.ensureDirs(stateDir); err != nil {
		return fmt.Errorf("prepare %s: %w", stateDir, err)
	}
	for _, e := range exps {
		for _, it := range e.Items {
			target := filepath.Join(s.Path, it.Rel)
			if err := s.mountPoint(it.Rel, it.Dir); err != nil {
				return fmt.Errorf("prepare mount point %s: %w", target, err)
			}
			if !it.State {
				if err := s.addHostMount(spec, it.Host, target, opened); err != nil {
					return err
				}
				continue
			}
			if err := s.ensureState(e.Name, it); err != nil {
				return fmt.Errorf("copy %s: %w", it.Host, err)
			}
			// The state copy lives in the jail, so it is bound by a
			// descriptor opened without following links: a concurrent
			// command swapping it for a symlink cannot redirect the bind.
			src := statePath(e.Name, it.Rel)
			f, err := openPath(s.root, src)
			if err != nil {
				return fmt.Errorf("open %s: %w", src, err)
			}
			if fi, err := f.Stat(); err != nil || fi.IsDir() != it.Dir || !(fi.IsDir() || fi.Mode().IsRegular()) {
				f.Close()
				return fmt.Errorf("open %s: not a plain file or directory", src)
			}
			*opened = append(*opened, f)
			spec.Mounts = append(spec.Mounts, jail.Mount{Source: filepath.Join(s.Path, src), Target: target, Writable: true, File: f})
			for _, sec := range it.Secrets {
				if err := s.mountPoint(path.Join(src, sec.Name), sec.Dir); err != nil {
					return fmt.Errorf("prepare mount point for %s: %w", sec.Host, err)
				}
				if err := s.addHostMount(spec, sec.Host, filepath.Join(target, sec.Name), opened); err != nil {
					return err
				}
			}
		}
	}
	spec.Hide = append(spec.Hide, filepath.Join(s.Path, stateDir))
	return nil
}

// addHostMount binds a host credential read-only, by descriptor.
func (s *Session) addHostMount(spec *jail.Spec, host, target string, opened *[]*os.File) error {
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

// copyCredentials is the path of backends that cannot bind host files into
// the jail: each credential is copied to its place before the call, and the
// returned undo removes the copies after it (state copies are saved back to
// the state directory first, never to the host). The caller runs undo also
// when the call fails or is cancelled.
func (s *Session) copyCredentials(exps []auth.Exposure) (undo func() error, err error) {
	var placed []string  // jail-relative paths to remove after the call
	var secrets []string // secret copies inside state copies, removed first
	var made []string    // directories created for them, deepest last
	var saveBack [][2]string
	undo = func() error {
		var errs []error
		for _, p := range secrets {
			if err := s.root.RemoveAll(p); err != nil {
				errs = append(errs, err)
			}
		}
		for _, sb := range saveBack {
			if _, err := s.root.Lstat(sb[0]); err == nil {
				if err := s.root.RemoveAll(sb[1]); err != nil {
					errs = append(errs, err)
				}
				if err := s.root.Rename(sb[0], sb[1]); err != nil {
					errs = append(errs, err)
				}
			}
		}
		for _, p := range placed {
			if err := s.root.RemoveAll(p); err != nil {
				errs = append(errs, err)
			}
		}
		for i := len(made) - 1; i >= 0; i-- {
			s.root.Remove(made[i]) // only if empty: the command may have used it
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			undo()
		}
	}()
	if err := s.ensureDirs(stateDir); err != nil {
		return undo, err
	}
	for _, e := range exps {
		for _, it := range e.Items {
			rel := filepath.ToSlash(it.Rel)
			newDirs, err := s.makeDirs(path.Dir(rel))
			made = append(made, newDirs...)
			if err != nil {
				return undo, err
			}
			// Credential places are reserved: what a command left there
			// gives way to the credential.
			if err := s.root.RemoveAll(rel); err != nil {
				return undo, err
			}
			placed = append(placed, rel)
			if it.State {
				src := statePath(e.Name, it.Rel)
				if err := s.ensureState(e.Name, it); err != nil {
					return undo, err
				}
				if err := s.root.Rename(src, rel); err != nil {
					return undo, err
				}
				saveBack = append(saveBack, [2]string{rel, src})
				for _, sec := range it.Secrets {
					p := path.Join(rel, sec.Name)
					if err := s.root.RemoveAll(p); err != nil {
						return undo, err
					}
					secrets = append(secrets, p)
					if err := s.copyTreeIn(sec.Host, p); err != nil {
						return undo, fmt.Errorf("copy %s: %w", sec.Host, err)
					}
				}
				continue
			}
			if err := s.copyTreeIn(it.Host, rel); err != nil {
				return undo, fmt.Errorf("copy %s: %w", it.Host, err)
			}
		}
	}
	return undo, nil
}

// copyTreeIn copies a host file or directory tree to dst in the jail:
// directories and regular files only, modes kept; symlinks inside a
// credential directory are left out.
func (s *Session) copyTreeIn(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if fi.Mode().IsRegular() {
		return s.copyFileIn(src, dst)
	}
	if !fi.IsDir() {
		return nil
	}
	if err := s.root.Mkdir(dst, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := s.copyTreeIn(filepath.Join(src, e.Name()), path.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
