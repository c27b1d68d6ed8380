package creds

import (
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/jailfs"
)

// Bind fills spec with the binds of the credentials: host paths (or
// their masked copies) read-only at their places, state copies writable
// at theirs with the host's secrets read-only inside them; the state
// directory is hidden. The descriptors it opens for the binds are added
// to opened, for the caller to close once the command has started.
func (j *Jail) Bind(spec *jail.Spec, exps []auth.Exposure, opened *[]*os.File) error {
	// Calls of the session starting at once would race to make the same
	// mount points and state copies.
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.ensureDirs(StateDir); err != nil {
		return fmt.Errorf("prepare %s: %w", StateDir, err)
	}
	for _, e := range exps {
		w := j.way(e.Name)
		for _, it := range e.Items {
			target := filepath.Join(j.path, it.Rel)
			if err := j.mountPoint(it.Rel, it.Dir); err != nil {
				return fmt.Errorf("prepare mount point %s: %w", target, err)
			}
			var err error
			if it.State {
				err = j.bindState(spec, w, e.Name, it, target, opened)
			} else {
				err = w.bind(spec, it.Host, it.Rel, target, opened)
			}
			if err != nil {
				return err
			}
		}
	}
	spec.Hide = append(spec.Hide, filepath.Join(j.path, StateDir))
	return nil
}

// bindState binds the session's copy of the state it of cli (w its way)
// writable at target, and the host's secrets in it read-only.
func (j *Jail) bindState(spec *jail.Spec, w way, cli string, it auth.Item, target string, opened *[]*os.File) error {
	if err := j.ensureState(w, cli, it); err != nil {
		return fmt.Errorf("copy %s: %w", it.Host, err)
	}
	// The state copy lives in the jail, so it is bound by a descriptor
	// opened without following links: a concurrent command swapping it
	// for a symlink cannot redirect the bind.
	src := statePath(cli, it.Rel)
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
		if err := w.bind(spec, sec.Host, path.Join(it.Rel, sec.Name), filepath.Join(target, sec.Name), opened); err != nil {
			return err
		}
	}
	return nil
}

// Refresh writes again the copies of exps that the session's running
// sandboxes have bound (Bind), so that a sandbox started earlier sees
// the host's latest: for a masked CLI its masked copies (a token the
// operator's CLI refreshed, its new expiry). A copy that cannot be made
// again is said, and the one before stays.
func (j *Jail) Refresh(exps []auth.Exposure) {
	for _, e := range exps {
		w := j.way(e.Name)
		for _, it := range e.Items {
			if err := w.refresh(it); err != nil {
				j.log.Warn("refresh a masked credential", "session", j.name, "cli", e.Name, "path", it.Rel, "err", err)
			}
		}
	}
}
