package ledger

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/jail-mcp/jail-mcp/session/layer"
)

// Every look goes from a directory's descriptor to one name in it
// (openat, fstatat, statx, unlinkat with O_NOFOLLOW or
// AT_SYMLINK_NOFOLLOW): a name from getdents holds no slash, so a link a
// command (in the layer) or anyone (on the host) swaps in is seen as a
// link, never followed.

// openDir opens the directory name of dirfd, never following a link.
func openDir(dirfd int, name string) (*os.File, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// openUpper opens the upper layer: its last two components
// (.overlay/upper) lie in the session's jail and are not followed; the
// directories above are the server's.
func openUpper(upper string) (*os.File, error) {
	upper = filepath.Clean(upper)
	parent := filepath.Dir(upper)
	top, err := openDir(unix.AT_FDCWD, filepath.Dir(parent))
	if err != nil {
		return nil, err
	}
	defer top.Close()
	mid, err := openDir(int(top.Fd()), filepath.Base(parent))
	if err != nil {
		return nil, err
	}
	defer mid.Close()
	return openDir(int(mid.Fd()), filepath.Base(upper))
}

// statAt is the entry name of dirfd, not followed; kindNone when there is
// none (or its directory is gone).
func statAt(dirfd int, name string) (ident, kind, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return ident{}, kindNone, nil
	}
	if err != nil {
		return ident{}, kindNone, err
	}
	return identOf(&st), kindOf(&st), nil
}

func identOf(st *unix.Stat_t) ident {
	return ident{dev: st.Dev, ino: st.Ino, mode: st.Mode, rdev: st.Rdev, size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

func kindOf(st *unix.Stat_t) kind {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return kindFile
	case unix.S_IFDIR:
		return kindDir
	case unix.S_IFLNK:
		return kindLink
	case unix.S_IFCHR:
		if st.Rdev == 0 {
			return kindWhiteout
		}
	}
	return kindOther
}

// isOpaque reports whether the layer's directory f hides the host's below
// it (user.overlay.opaque "y", the userxattr form).
func isOpaque(f *os.File) bool {
	var buf [2]byte
	n, err := unix.Fgetxattr(int(f.Fd()), "user.overlay.opaque", buf[:])
	return err == nil && n == 1 && buf[0] == 'y'
}

// gone is an error of an entry removed or replaced between two looks.
func gone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}

// layerWalk lists the layer's entries.
type layerWalk struct {
	out     map[string]entry
	partial bool
}

// walkLayer lists every entry of the layer upper, at most maxEntries.
func walkLayer(upper string) (map[string]entry, bool, error) {
	top, err := openUpper(upper)
	if err != nil {
		return nil, false, fmt.Errorf("open the layer: %w", err)
	}
	defer top.Close()
	w := &layerWalk{out: map[string]entry{}}
	err = w.dir(top, "", 0, false)
	return w.out, w.partial, err
}

func (w *layerWalk) dir(d *os.File, rel string, depth int, hidden bool) error {
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("list the layer's %s: %w", layer.Shown(rel), err)
	}
	for _, n := range names {
		if len(w.out) >= maxEntries {
			w.partial = true
			return nil
		}
		p := layer.Join(rel, n)
		id, k, err := statAt(int(d.Fd()), n)
		if err != nil {
			return fmt.Errorf("look at the layer's %s: %w", layer.Shown(p), err)
		}
		e := entry{id: id, kind: k, hidden: hidden}
		switch {
		case k == kindNone:
			continue
		case k != kindDir:
			w.out[p] = e
			continue
		case depth >= maxDepth:
			w.partial = true
			w.out[p] = e
			continue
		}
		sub, err := openDir(int(d.Fd()), n)
		if gone(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("open the layer's %s: %w", layer.Shown(p), err)
		}
		e.opaque = isOpaque(sub)
		w.out[p] = e
		err = w.dir(sub, p, depth+1, hidden || e.opaque)
		sub.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// parentOf is p's directory, "" for the top.
func parentOf(p string) string {
	if d := path.Dir(p); d != "." {
		return d
	}
	return ""
}

// dirs opens the directories of a tree below its root one component at
// a time, never following a link, each once: nil where there is none.
type dirs struct {
	root string
	open func() (*os.File, error)
	fds  map[string]*os.File
}

func newHostDirs(project string) *dirs {
	return &dirs{root: project, fds: map[string]*os.File{}, open: func() (*os.File, error) {
		return os.OpenFile(project, os.O_RDONLY|unix.O_DIRECTORY, 0)
	}}
}

func newLayerDirs(upper string) *dirs {
	return &dirs{root: upper, fds: map[string]*os.File{}, open: func() (*os.File, error) { return openUpper(upper) }}
}

// hostDirs are the directories of the host's project.
type hostDirs = dirs

func (h *dirs) dir(rel string) *os.File {
	if f, ok := h.fds[rel]; ok {
		return f
	}
	var f *os.File
	if rel == "" {
		f, _ = h.open()
	} else if parent := h.dir(parentOf(rel)); parent != nil {
		f, _ = openDir(int(parent.Fd()), path.Base(rel))
	}
	h.fds[rel] = f
	return f
}

func (h *dirs) close() {
	for _, f := range h.fds {
		if f != nil {
			f.Close()
		}
	}
}

// stat is the entry at p, not followed; kindNone when there is none.
func (h *dirs) stat(p string) (ident, kind, error) {
	d := h.dir(parentOf(p))
	if d == nil {
		return ident{}, kindNone, nil
	}
	return statAt(int(d.Fd()), path.Base(p))
}

func (h *dirs) isDir(p string) bool {
	_, k, err := h.stat(p)
	return err == nil && k == kindDir
}

// sum is the sha256 of the regular file at p, as want (its ident) saw
// it, and its bytes when keep; false when it is no longer that file or
// could not be read whole.
func (h *dirs) sum(p string, want ident, keep bool) ([sha256.Size]byte, []byte, bool) {
	var sum [sha256.Size]byte
	d := h.dir(parentOf(p))
	if d == nil || want.size > maxHash {
		return sum, nil, false
	}
	fd, err := unix.Openat(int(d.Fd()), path.Base(p), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return sum, nil, false
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || kindOf(&st) != kindFile || st.Ino != want.ino || st.Dev != want.dev || st.Size != want.size {
		return sum, nil, false
	}
	hs := sha256.New()
	var w io.Writer = hs
	var data []byte
	if keep {
		data = make([]byte, 0, want.size)
		w = io.MultiWriter(hs, sliceWriter{&data})
	}
	if n, err := io.Copy(w, io.LimitReader(f, want.size+1)); err != nil || n != want.size {
		return sum, nil, false
	}
	copy(sum[:], hs.Sum(nil))
	return sum, data, true
}

type sliceWriter struct{ b *[]byte }

func (s sliceWriter) Write(p []byte) (int, error) {
	*s.b = append(*s.b, p...)
	return len(p), nil
}

// bornOf is when the layer's entry at p was made (statx's birth time, or
// its change time where the file system keeps no birth).
func bornOf(l *dirs, p string, e entry) int64 {
	d := l.dir(parentOf(p))
	if d == nil {
		return e.id.ctime
	}
	var sx unix.Statx_t
	err := unix.Statx(int(d.Fd()), path.Base(p), unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, unix.STATX_BTIME|unix.STATX_CTIME, &sx)
	if err != nil {
		return e.id.ctime
	}
	t := sx.Ctime
	if sx.Mask&unix.STATX_BTIME != 0 {
		t = sx.Btime
	}
	return t.Sec*1e9 + int64(t.Nsec)
}

// removeAt removes the entry name of the directory d, a directory with
// everything below it, never following a link.
func removeAt(d *os.File, name string, depth int) error {
	err := unix.Unlinkat(int(d.Fd()), name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	if depth >= maxDepth {
		return fmt.Errorf("remove %s: deeper than %d directories", layer.Shown(name), maxDepth)
	}
	sub, err := openDir(int(d.Fd()), name)
	if err != nil {
		return err
	}
	names, err := sub.Readdirnames(-1)
	for _, n := range names {
		if err != nil {
			break
		}
		err = removeAt(sub, n, depth+1)
	}
	sub.Close()
	if err != nil {
		return err
	}
	return unix.Unlinkat(int(d.Fd()), name, unix.AT_REMOVEDIR)
}

// unlinkAt removes the non-directory name of d.
func unlinkAt(d *os.File, name string) error { return unix.Unlinkat(int(d.Fd()), name, 0) }
