package jail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// A call's read view: its commands read everything but what lies beneath
// a hidden path, save for what lies beneath a shown one; of the hidden and
// shown paths a path lies beneath, the deepest decides. Landlock's rules
// only allow, and allow a whole hierarchy, so the view is granted by
// enumeration: each shown directory on the way to a hidden path is
// listed, and each of its entries is granted (or not) whole; a hidden one
// on the way to a shown path is only walked through. Listing stays
// allowed everywhere (the agent's layer grants it): what is hidden is the
// content of files, which a command can neither read nor execute.
//
// Hidden are the other sessions' jails (their directory, the jail shown);
// under landlock /dev (save for the few devices a shell needs, and the
// call's own terminal), whose terminals would give a command what the user
// types; and, as bubblewrap without agents shadows them, /tmp, /var/tmp and
// /run, where host programs keep their FIFOs, save for what a command
// needs there (the project, PATH directories, /etc/resolv.conf's target).

// readView is the hidden and shown paths of a call, canonical.
type readView struct {
	hidden, shown []string
	// jail and writable (the project's directories commands write in
	// place) are shown, and where renames and links across directories
	// are granted.
	jail     string
	writable []string
	// opaque, when set, is the project seen through the call's overlay
	// (--overlay): granted whole, reads, renames and links, as what lies
	// below it that the view hides is masked by mounts over it, and its
	// entries are the overlay's own, which no cached rule names.
	opaque string
	// registry names this user's projects' jails (Spec.Jails): each is
	// hidden but one that holds a shown path, as named when a ruleset is
	// made; a change there makes the next one anew.
	registry string
}

// registeredJails are the projects' jails the registry names now that
// the view hides, resolved: every one but those holding a shown path
// (the session's own project's, whose other jails Siblings hides).
func (v readView) registeredJails() []string {
	if v.registry == "" {
		return nil
	}
	var out []string
	for _, e := range ReadRegistry(v.registry) {
		r := CanonicalPath(e.Jails)
		if slices.Contains(v.hidden, r) || slices.Contains(out, r) ||
			slices.ContainsFunc(v.shown, func(s string) bool { return Within(s, r) }) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// refers reports whether renames and links across directories are
// granted at path: in the jail, a writable directory, or the overlay's
// project.
func (v readView) refers(path string) bool {
	if Within(path, v.jail) || v.opaque != "" && Within(path, v.opaque) {
		return true
	}
	for _, w := range v.writable {
		if Within(path, w) {
			return true
		}
	}
	return false
}

// viewHidden are the host directories a call reads nothing of, but for
// what is shown in them, on backend kind ("landlock" or "bwrap"), and the
// paths the session hides.
func viewHidden(kind, siblings string, hide ...string) []string {
	hidden := slices.Clone(ShadowDirs)
	if kind == "landlock" {
		// bwrap's /dev is the sandbox's own.
		hidden = append(hidden, "/dev")
	}
	if siblings != "" {
		hidden = append(hidden, siblings)
	}
	hidden = canonical(hidden)
	// What the session hides may not exist yet: it is hidden once made.
	for _, h := range hide {
		if c := CanonicalPath(h); filepath.IsAbs(h) && !slices.Contains(hidden, c) {
			hidden = append(hidden, c)
		}
	}
	return hidden
}

// under reports whether p is h or lies below it, where the last element
// of h may be a pattern (filepath.Match).
func under(p, h string) bool {
	dir, pat := filepath.Split(h)
	if !strings.HasPrefix(p, dir) {
		// Neither h nor in h's directory: the usual answer, given
		// before the pattern is looked at.
		return false
	}
	if !isPattern(pat) {
		return Within(p, h)
	}
	rest, ok := strings.CutPrefix(p, dir)
	if !ok || !strings.HasSuffix(dir, "/") {
		return false
	}
	first, _, _ := strings.Cut(rest, "/")
	m, _ := filepath.Match(pat, first)
	return m
}

// hides reports whether the view names p itself hidden.
func (v readView) hides(p string) bool {
	for _, h := range v.hidden {
		if h == p || under(p, h) && filepath.Dir(h) == filepath.Dir(p) {
			return true
		}
	}
	return false
}

// siblingsShown is what a call sees of the jails' directory beside its
// jail: git's ignore file, so that the jails stay ignored.
func siblingsShown(siblings string) []string {
	if siblings == "" {
		return nil
	}
	return []string{filepath.Join(siblings, ".gitignore")}
}

// viewShown are what a call always sees of hidden directories: its jail,
// the paths the session names visible (the project, the operator's home
// where the credentials it is shown live), /etc/resolv.conf's target, and under landlock the devices a shell
// needs.
func viewShown(kind, jail string, visible []string) []string {
	shown := append([]string{jail}, visible...)
	if t, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil {
		shown = append(shown, t)
	}
	if kind == "landlock" {
		return canonical(append(shown, landlockDevices...))
	}
	// The sandbox's own, which the host may lack.
	return append(canonical(shown), "/dev/mqueue")
}

// canonical resolves each path that exists (a hidden /var/run is /run)
// and drops those that do not, and duplicates.
func canonical(paths []string) []string {
	var out []string
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			continue
		}
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// callShown are the paths a call shows besides the view's: its PATH
// directories (a directory in a hidden one with its parent, the prefix of
// an installation whose bin holds links into it) and the terminal it runs
// on, if any.
func callShown(v readView, env []string, tty *os.File) []string {
	var extra []string
	for _, d := range filepath.SplitList(envValue(env, "PATH")) {
		if !filepath.IsAbs(d) {
			continue
		}
		r, err := filepath.EvalSymlinks(d)
		if err != nil || !v.hiddenPath(r) || v.sealed(r) {
			continue
		}
		if parent := filepath.Dir(r); !v.coversHidden(parent) {
			r = parent
		}
		extra = append(extra, r)
	}
	if tty != nil {
		if p, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", tty.Fd())); err == nil && strings.HasPrefix(p, "/dev/pts/") {
			extra = append(extra, p)
		}
	}
	slices.Sort(extra)
	return slices.Compact(extra)
}

// sealed reports whether p lies in a hidden path that no PATH shows:
// one that is not a shadowed directory of the host (where installations
// keep their bin), such as another session's jail. The PATH of a call is
// the caller's to set, and a directory in it may be a link a command made.
func (v readView) sealed(p string) bool {
	shadow := canonical(ShadowDirs)
	for _, h := range v.hidden {
		if under(p, h) && !slices.Contains(shadow, h) {
			return true
		}
	}
	return false
}

// hiddenPath reports whether p is hidden by the view alone.
func (v readView) hiddenPath(p string) bool {
	depth, hidden := -1, false
	for _, h := range v.hidden {
		if under(p, h) && len(h) > depth {
			depth, hidden = len(h), true
		}
	}
	for _, s := range v.shown {
		if Within(p, s) && len(s) > depth {
			depth, hidden = len(s), false
		}
	}
	return hidden
}

// coversHidden reports whether showing p whole would show a hidden path:
// p is a hidden path or lies above one.
func (v readView) coversHidden(p string) bool {
	for _, h := range v.hidden {
		if Within(h, p) {
			return true
		}
	}
	return false
}

// linkedHidden are the places hidden paths lead to now through a link
// made since they were resolved (a dotfile manager's ~/.aws made as a
// link to ~/dotfiles/aws): hidden too, as they are for a link there when
// the server starts (CanonicalPath). A pattern gives what matches it. A
// place that is or holds a shown path (the home, the project, the jail)
// stays shown: a deny list that names them is refused at the start.
func (v readView) linkedHidden() []string {
	var out []string
	for _, h := range v.hidden {
		matches := []string{h}
		if _, pat := filepath.Split(h); isPattern(pat) {
			matches, _ = filepath.Glob(h)
		}
		for _, m := range matches {
			r := CanonicalPath(m)
			if r == m || slices.Contains(v.hidden, r) || slices.Contains(out, r) ||
				slices.ContainsFunc(v.shown, func(s string) bool { return Within(s, r) }) {
				continue
			}
			out = append(out, r)
		}
	}
	return out
}

// dirStamp is what tells that a listed directory changed: an entry added,
// removed or renamed changes its times, a directory put in its place its
// inode.
type dirStamp struct {
	path         string
	ino          uint64
	mtime, ctime unix.Timespec
}

func stampOf(path string) (dirStamp, bool) {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil {
		return dirStamp{}, false
	}
	return dirStamp{path: path, ino: st.Ino, mtime: st.Mtim, ctime: st.Ctim}, true
}

// viewRuleset makes the ruleset of a call's nested domain: signals and
// abstract unix sockets scoped; file reads (and executions, which read)
// granted as view v with extra shown; renames and links across
// directories granted in the jail and the writable directories, where the
// agent's layer allows them (a layer denies them wherever it does not
// grant them, handled or not). It returns the directories it listed, and
// the inodes it granted by rules of their own, held (one reference, the
// caller's).
func viewRuleset(v readView, extra []string) (int, []dirStamp, *heldGrants, error) {
	v.hidden = append(append(slices.Clone(v.hidden), v.registeredJails()...), v.linkedHidden()...)
	attr := ll.RulesetAttr{
		HandledAccessFS: ll.AccessFSReadFile | ll.AccessFSRefer,
		Scoped:          ll.ScopeAbstractUnixSocket | ll.ScopeSignal,
	}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return -1, nil, nil, fmt.Errorf("landlock call ruleset: %w", err)
	}
	held := &heldGrants{view: v}
	held.refs.Store(1)
	shown := append(slices.Clone(v.shown), extra...)
	w := &viewWalk{v: v, fd: fd, held: held, shown: shown, marked: append(slices.Clone(v.hidden), shown...)}
	err = w.walk("/", !slices.Contains(v.hidden, "/"))
	if st, ok := stampOf(v.registry); ok && v.registry != "" {
		// A project's server started or gone: the next call's view anew.
		w.stamps = append(w.stamps, st)
	}
	// Each shown path again, by itself: a mount's root the walk does not
	// reach by its path (the IPC namespace's message queues, opened
	// through the kernel's own mount of it) takes its rule from there.
	for _, p := range shown {
		if err == nil && !v.coversHidden(p) {
			err = w.grant(p, w.access(p))
		}
	}
	if err != nil {
		unix.Close(fd)
		held.release()
		return -1, nil, nil, err
	}
	held.stampDirs()
	return fd, w.stamps, held, nil
}

// viewWalk is viewRuleset's walk of the host from /, granting into
// ruleset fd what view v shows.
type viewWalk struct {
	v      readView
	fd     int
	held   *heldGrants
	shown  []string   // v's shown paths and the call's extra ones
	marked []string   // the hidden and shown paths: where the walk goes below
	stamps []dirStamp // the directories it listed
}

// access is what a shown path is granted: reads, and in the jail and the
// writable directories renames and links across their directories.
func (w *viewWalk) access(path string) uint64 {
	if w.v.refers(path) {
		return ll.AccessFSReadFile | ll.AccessFSRefer
	}
	return ll.AccessFSReadFile
}

func (w *viewWalk) grant(path string, access uint64) error {
	return grantPath(w.fd, w.held, path, access)
}

// walk decides dir, shown or not: whole when nothing marked lies below
// it, else entry by entry.
func (w *viewWalk) walk(dir string, show bool) error {
	if dir != w.v.opaque && slices.ContainsFunc(w.marked, func(m string) bool { return m != dir && Within(m, dir) }) {
		return w.entries(dir, show)
	}
	if !show {
		return nil
	}
	return w.grant(dir, w.access(dir))
}

// entries decides each entry of dir: a file granted if shown, a
// directory walked, a link skipped (what it points to is decided at its
// own path).
func (w *viewWalk) entries(dir string, show bool) error {
	for _, name := range w.names(dir, show) {
		p := filepath.Join(dir, name)
		s := show
		if w.v.hides(p) {
			s = false
		}
		if slices.Contains(w.shown, p) {
			s = true
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if s {
				if err := w.grant(p, ll.AccessFSReadFile); err != nil {
					return err
				}
			}
			continue
		}
		if err := w.walk(p, s); err != nil {
			return err
		}
	}
	return nil
}

// names are the entries of dir the walk decides: a shown directory's
// listing (stamped), none if it is not listable (what lies in it stays
// unread); of a hidden one, only the way to what is marked below it, not
// a listing (/tmp and /run change all the time).
func (w *viewWalk) names(dir string, show bool) []string {
	var names []string
	if show {
		if st, ok := stampOf(dir); ok {
			w.stamps = append(w.stamps, st)
		}
		d, err := os.Open(dir)
		if err != nil {
			return nil
		}
		names, _ = d.Readdirnames(-1)
		d.Close()
		return names
	}
	for _, m := range w.marked {
		if rest, ok := strings.CutPrefix(m, strings.TrimSuffix(dir, "/")+"/"); ok && rest != "" {
			name, _, _ := strings.Cut(rest, "/")
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	return names
}

// grantPath adds to ruleset fd a rule that grants access beneath path
// (file rights only for a file; nothing for a link, or a path gone), and
// keeps the rule's inode in held, for the guard (viewguard_linux.go).
func grantPath(fd int, held *heldGrants, path string, access uint64) error {
	f, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE), errors.Is(err, unix.ENOMEM):
		// Out of descriptors or memory: a view short of a grant would
		// fail the call's reads with no word; it fails to start instead.
		return fmt.Errorf("read view: hold %s: %w", path, err)
	case err != nil:
		// Gone meanwhile, out of the server's reach, a name too long:
		// this path's own, which a command may have made so (in a
		// --writable directory) to fail every call; nothing granted,
		// so nothing read there.
		return nil
	}
	var st unix.Stat_t
	if unix.Fstat(f, &st) != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
		unix.Close(f)
		return nil // a link: what it points to decides
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= ll.AccessFSReadFile // a file takes file rights only
	}
	err = ll.LandlockAddPathBeneathRule(fd, &ll.PathBeneathAttr{AllowedAccess: access, ParentFd: f}, 0)
	if err != nil {
		unix.Close(f)
		if !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("landlock rule for %s: %w", path, err)
		}
		return nil
	}
	held.keep(f, path)
	return nil
}

// viewCache keeps the last call ruleset for as long as the directories it
// listed are unchanged: a call then costs a look at each, not a walk.
type viewCache struct {
	mu     sync.Mutex
	ok     bool // fd holds a ruleset
	key    string
	fd     int
	stamps []dirStamp
	held   *heldGrants
}

// viewKey names the view of a call that shows extra, of one agent.
func viewKey(extra []string) string { return strings.Join(extra, "\x00") }

// ruleset returns a ruleset of v with extra shown, a descriptor of the
// caller's to close, the directories it was made from as they were, and
// what it granted by rules of their own, held (a reference of the
// caller's to release).
func (c *viewCache) ruleset(v readView, extra []string) (int, []dirStamp, *heldGrants, error) {
	key := viewKey(extra)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !(c.ok && c.key == key && fresh(c.stamps)) {
		fd, stamps, held, err := viewRuleset(v, extra)
		if err != nil {
			return -1, nil, nil, err
		}
		if c.ok {
			unix.Close(c.fd)
			c.held.release()
		}
		c.ok, c.key, c.fd, c.stamps, c.held = true, key, fd, stamps, held
	}
	fd, err := unix.Dup(c.fd)
	if err != nil {
		return -1, nil, nil, err
	}
	return fd, c.stamps, c.held.hold(), nil
}

// fresh reports whether every listed directory is as it was.
func fresh(stamps []dirStamp) bool {
	for _, s := range stamps {
		if now, ok := stampOf(s.path); !ok || now != s {
			return false
		}
	}
	return true
}
