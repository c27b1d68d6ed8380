package ledger

import (
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/aymanbagabas/go-udiff"

	"github.com/jail-mcp/jail-mcp/session/layer"
)

// Refresh drops the layer's copies that hold nothing of the session's own
// (a file rewritten with the same bytes and mode, touched): commands then
// see the host's file, and its later edits. Only a regular file is
// dropped, never one in or below an opaque directory (the host's is
// hidden there: dropping would delete it from the view), nor one written
// since the ledger found it a no-op. The caller keeps the session idle
// (no command runs, none starts) and renews its views when any was
// dropped: a mounted view keeps the layer's entries it looked up. It
// returns the paths dropped, as Shown.
func (l *Ledger) Refresh() ([]string, error) {
	if l == nil {
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.noops == 0 {
		return nil, nil
	}
	var todo []string
	for p, r := range l.records {
		if e := l.entries[p]; r.noop && e.kind == kindFile && !e.hidden {
			todo = append(todo, p)
		}
	}
	if len(todo) == 0 {
		return nil, nil
	}
	sort.Strings(todo)
	return l.dropAt(todo, func(d *os.File, p, name string) (bool, error) {
		id, k, err := statAt(int(d.Fd()), name)
		if err != nil || k != kindFile || id != l.records[p].noopOf {
			return false, nil
		}
		if err := unlinkAt(d, name); err != nil {
			return false, fmt.Errorf("drop the layer's copy of %s: %w", layer.Shown(p), err)
		}
		delete(l.entries, p)
		l.forget(p)
		return true, nil
	})
}

// dropAt removes what the layer holds at each path with remove, given the
// path's parent directory in the layer and its name there, up to the
// first error; a path whose parent the layer lacks is passed over, and so
// is one remove returns false for. It returns the paths removed, as Shown.
func (l *Ledger) dropAt(paths []string, remove func(d *os.File, p, name string) (bool, error)) ([]string, error) {
	ld := newLayerDirs(l.upper)
	defer ld.close()
	var dropped []string
	for _, p := range paths {
		d := ld.dir(parentOf(p))
		if d == nil {
			continue
		}
		ok, err := remove(d, p, path.Base(p))
		if err != nil {
			return dropped, err
		}
		if ok {
			dropped = append(dropped, layer.Shown(p))
		}
	}
	return dropped, nil
}

// Noops are how many copies Refresh would drop now.
func (l *Ledger) Noops() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.noops
}

// Discard drops what the layer holds at each path (clean, relative to
// the project; a directory with everything below it), so that commands
// see the host's entry there: all of them, or with an error none. It
// refuses a path the layer holds nothing at, and one in or below a
// directory the session replaced whole (opaque: the host's is hidden
// there, dropping would delete it from the view). The caller keeps the
// session idle; before, called once the paths are known good and before
// anything is removed, lets go of the views. It returns the paths dropped, as
// Shown.
func (l *Ledger) Discard(paths []string, before func()) ([]string, error) {
	if l == nil {
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.sync(false); err != nil {
		return nil, err
	}
	for _, p := range paths {
		if e, ok := l.entries[p]; !ok || e.kind == kindNone {
			return nil, fmt.Errorf("discard %s: %w", layer.Shown(p), ErrNoEntry)
		}
		for d := parentOf(p); d != ""; d = parentOf(d) {
			if l.entries[d].opaque {
				return nil, fmt.Errorf("discard %s: the session replaced its directory %s whole: discard %s instead",
					layer.Shown(p), layer.Shown(d), layer.Shown(d))
			}
		}
	}
	if before != nil {
		before()
	}
	dropped, err := l.dropAt(paths, func(d *os.File, p, name string) (bool, error) {
		if err := removeAt(d, name, 0); err != nil {
			return false, fmt.Errorf("discard %s: %w", layer.Shown(p), err)
		}
		return true, nil
	})
	if _, serr := l.sync(false); err == nil {
		err = serr
	}
	return dropped, err
}

// ConflictPatch is, for a conflict at p (as Shown), the host's change
// beside the session's, both from what the session copied (base): a
// unified patch base -> host, then base -> session. Empty when p is no
// conflict; a line saying why when the base was not kept (binary, or
// larger than the ledger keeps), or when unread names p (the host's
// file is on the --deny-read list: neither the host's side nor the base
// read from it is shown).
func (l *Ledger) ConflictPatch(shown string, unread func(rel string) bool) string {
	if l == nil {
		return ""
	}
	p, err := layer.Unquote(shown)
	if err != nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.records[p]
	if r == nil {
		return ""
	}
	h, ld := newHostDirs(l.project), newLayerDirs(l.upper)
	defer h.close()
	defer ld.close()
	if l.verdict(h, ld, p, r) == "" {
		return ""
	}
	if unread != nil && unread(p) {
		return fmt.Sprintf("conflict at %s: no patch: the host's file is on the --deny-read list\n", shown)
	}
	if !r.kept {
		return fmt.Sprintf("conflict at %s: no patch: what the session copied was not kept (binary, larger than %d bytes, or changed while copied)\n", shown, maxBase)
	}
	host, hostWhy := readText(h, p)
	sess, sessWhy := readText(ld, p)
	var b strings.Builder
	fmt.Fprintf(&b, "conflict at %s: the host changed it after this session copied it; commands see the session's copy\n", shown)
	side(&b, "host", p, string(r.base), host, hostWhy)
	side(&b, "session", p, string(r.base), sess, sessWhy)
	return b.String()
}

// side writes one side of a conflict: base -> who.
func side(b *strings.Builder, who, p, base, now, why string) {
	fmt.Fprintf(b, "### base -> %s\n", who)
	if why != "" {
		b.WriteString(why + "\n")
		return
	}
	d := udiff.Unified(layer.Shown("base/"+p), layer.Shown(who+"/"+p), base, now)
	if d == "" {
		b.WriteString("(no change)\n")
		return
	}
	b.WriteString(d)
	if !strings.HasSuffix(d, "\n") {
		b.WriteString("\n")
	}
}

// readText is the text file at p of the tree of d, or why not.
func readText(d *dirs, p string) (string, string) {
	id, k, err := d.stat(p)
	switch {
	case err != nil:
		return "", "(cannot be read: " + err.Error() + ")"
	case k == kindNone || k == kindWhiteout:
		return "", "(deleted)"
	case k != kindFile:
		return "", "(not a regular file)"
	case id.size > maxBase:
		return "", fmt.Sprintf("(larger than %d bytes)", maxBase)
	}
	_, data, ok := d.sum(p, id, true)
	switch {
	case !ok:
		return "", "(changed while read)"
	case binary(data):
		return "", "(binary)"
	}
	return string(data), ""
}
