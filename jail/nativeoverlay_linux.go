package jail

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// nativeSeq numbers the work directories this process makes.
var nativeSeq atomic.Uint64

// beneath resolves a path of the layer: beneath its directory, through
// no link (not even a last component that is one), on its file system.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// openBeneath opens the directory rel of dir, O_PATH: never through a
// link, nor outside dir, whatever a hostile layer holds.
func openBeneath(dir *os.File, rel string) (*os.File, error) {
	fd, err := unix.Openat2(int(dir.Fd()), rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: beneath,
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// mkdirBeneath makes the directories of rel in dir that are missing,
// mode 0700, each beneath dir and through no link, and opens the last.
func mkdirBeneath(dir *os.File, rel string) (*os.File, error) {
	parts := strings.Split(rel, "/")
	for i := range parts {
		parent, name := strings.Join(parts[:i], "/"), parts[i]
		if parent == "" {
			parent = "."
		}
		p, err := openBeneath(dir, parent)
		if err != nil {
			return nil, err
		}
		err = unix.Mkdirat(int(p.Fd()), name, 0o700)
		p.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, &os.PathError{Op: "mkdir", Path: rel, Err: err}
		}
	}
	return openBeneath(dir, rel)
}

// openNativeLayer opens, in the layer's directory, what bubblewrap's own
// overlay mounts the view and caches with: the upper directories, and
// work directories made now for one sandbox. A host cache the host lacks
// is left out, as the agent's view leaves it out.
func openNativeLayer(layer *os.File, caches []CacheMount) (_ *nativeLayer, err error) {
	n := &nativeLayer{}
	defer func() {
		if err != nil {
			n.close()
			removeNativeWork(layer, n.workNames)
		}
	}()
	if n.upper, err = openBeneath(layer, "upper"); err != nil {
		return nil, fmt.Errorf("bwrap: the layer's upper directory: %w", err)
	}
	id := fmt.Sprintf("b%d-%d-%d", os.Getpid(), time.Now().UnixNano(), nativeSeq.Add(1))
	work := "work/" + id
	if n.work, err = mkdirBeneath(layer, work); err != nil {
		return nil, fmt.Errorf("bwrap: a work directory of the layer: %w", err)
	}
	n.workNames = append(n.workNames, work)
	for _, c := range caches {
		if fi, err := os.Stat(c.Lower); err != nil || !fi.IsDir() {
			continue
		}
		if c.Name == "" || strings.ContainsAny(c.Name, "/.") {
			return nil, fmt.Errorf("bwrap: cache %q: not a layer's name", c.Name)
		}
		nc := nativeCache{lower: c.Lower, target: c.Target}
		if nc.upper, err = mkdirBeneath(layer, "caches/"+c.Name+"/upper"); err != nil {
			return nil, fmt.Errorf("bwrap: the layer of cache %s: %w", c.Name, err)
		}
		cw := "caches/" + c.Name + "/work-" + id
		if nc.work, err = mkdirBeneath(layer, cw); err != nil {
			nc.upper.Close()
			return nil, fmt.Errorf("bwrap: the work directory of cache %s: %w", c.Name, err)
		}
		n.workNames = append(n.workNames, cw)
		n.caches = append(n.caches, nc)
	}
	return n, nil
}

// close closes the layer's descriptors once bubblewrap has them.
func (n *nativeLayer) close() {
	p, c := n.files()
	for _, f := range append(p, c...) {
		if f != nil {
			f.Close()
		}
	}
}

// removeNativeWork removes the work directories of a sandbox that ended,
// in the layer's directory (the kernel makes their own work/ with no
// permission bits); one the kernel still holds stays for the session's
// cleaning (session/view).
func removeNativeWork(layer *os.File, names []string) {
	if len(names) == 0 {
		return
	}
	root, err := os.OpenRoot(fmt.Sprintf("/proc/self/fd/%d", layer.Fd()))
	if err != nil {
		return
	}
	defer root.Close()
	for _, name := range names {
		root.Chmod(path.Join(name, "work"), 0o700)
		root.RemoveAll(name)
	}
}

// layerAgrees reports whether the session's layer leaves rel, a path of
// the project, as the host has it: a directory (dir) or a file, with
// nothing of the layer on its way but directories that merge with the
// host's. Only there may bubblewrap mount over the view: elsewhere (a
// file, link or whiteout of the layer, an opaque directory) a mount
// would write the layer or follow the layer's link.
func layerAgrees(upper *os.File, rel string, dir bool) bool {
	parts := strings.Split(rel, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		var st unix.Stat_t
		err := unix.Fstatat(int(upper.Fd()), p, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case errors.Is(err, unix.ENOENT):
			return true // nothing of the layer from here down
		case err != nil, st.Mode&unix.S_IFMT != unix.S_IFDIR, i == len(parts)-1 && !dir:
			return false
		}
		if opaqueDir(upper, p) {
			return false
		}
	}
	return true
}

// viewKind is what the view shows at rel, a path of project, as
// overlayfs merges the session's layer (upper) over the host: 'd' a
// directory, 'f' a regular file, 0 anything else (nothing, a link, a
// device) or something on the way that is no directory or is a link. It
// is what bubblewrap may mask there without making anything in the
// layer or following a link.
func viewKind(upper *os.File, project, rel string) byte {
	inUpper, lowerShows := true, true
	parts := strings.Split(rel, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		var u, l unix.Stat_t
		var uerr, lerr error = unix.ENOENT, unix.ENOENT
		if inUpper {
			uerr = unix.Fstatat(int(upper.Fd()), p, &u, unix.AT_SYMLINK_NOFOLLOW)
		}
		if lowerShows {
			lerr = unix.Lstat(project+"/"+p, &l)
		}
		st := &l
		switch {
		case uerr == nil:
			st = &u
			inUpper = true
			// A directory of the layer hides the host's but where it
			// merges with one.
			lowerShows = lowerShows && lerr == nil && l.Mode&unix.S_IFMT == unix.S_IFDIR && u.Mode&unix.S_IFMT == unix.S_IFDIR && !opaqueDir(upper, p)
		case errors.Is(uerr, unix.ENOENT) && lerr == nil:
			inUpper = false
		default:
			return 0
		}
		switch kind := st.Mode & unix.S_IFMT; {
		case kind == unix.S_IFDIR:
			if i == len(parts)-1 {
				return 'd'
			}
		case kind == unix.S_IFREG && i == len(parts)-1:
			return 'f'
		default:
			return 0 // a link, a whiteout, a file on the way
		}
	}
	return 0
}

// opaqueDir reports whether overlayfs hides what the host has below
// rel, a directory of the upper layer (userxattr: user.overlay.opaque),
// or cannot say.
func opaqueDir(upper *os.File, rel string) bool {
	d, err := openBeneath(upper, rel)
	if err != nil {
		return true
	}
	defer d.Close()
	_, err = unix.Getxattr(fmt.Sprintf("/proc/self/fd/%d", d.Fd()), "user.overlay.opaque", make([]byte, 8))
	return !errors.Is(err, unix.ENODATA)
}
