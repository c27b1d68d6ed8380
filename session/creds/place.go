package creds

import (
	"errors"
	"path"
	"path/filepath"

	"github.com/jail-mcp/jail-mcp/auth"
)

// Place is the path of backends that cannot bind host files into the
// jail: each credential is placed at its home-relative place, a symlink
// to the host path (link, for a backend that denies writes through it)
// or a copy, or for a masked CLI its masked copy. Calls of one session that run at once share what
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
	release := func() error { // with mu held
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
		w := j.way(e.Name)
		for _, it := range e.Items {
			rel := filepath.ToSlash(it.Rel)
			if p, ok := j.placed[rel]; ok {
				if p.n > 0 || (link && w.intact(it)) {
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
			remove, err := j.placeItem(w, e.Name, it, link)
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

// placement is one credential placed in the jail and how many running
// calls hold it.
type placement struct {
	n      int
	remove func() error
}

// placeItem places one credential path of cli (w its way) for Place
// and returns what removes it; on error, what it placed is removed
// already.
func (j *Jail) placeItem(w way, cli string, it auth.Item, link bool) (remove func() error, err error) {
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
		return remove, w.place(it.Host, rel, link)
	}
	src := statePath(cli, it.Rel)
	if err := j.ensureState(w, cli, it); err != nil {
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
		if err := w.place(sec.Host, p, link); err != nil {
			return remove, err
		}
	}
	return remove, nil
}
