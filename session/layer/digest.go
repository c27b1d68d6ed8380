//go:build linux || darwin

package layer

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// The digest binds a jail_apply to the jail_diff that was reviewed: a
// sha256 over every change the walk found, in its order (path, kind,
// type, permission bits, size, link target, and the view's bytes), so
// that a command that rewrites the layer in between makes another one.
// A regular file's bytes count by their sha256 (Change.Hash, shown in
// both results); one under an ignored path, which jail_diff summarises
// without reading, by the upper file's inode and change time, which no
// write leaves as they were and no command can set. The digest is the
// same with or without Options.All and Patch, and Apply's walk finds the
// same changes in the same order.

// ErrDigest refuses an Apply whose digest is not the layer's.
var ErrDigest = errors.New("the layer changed since the jail_diff that gave this digest")

// digester sums the changes of a walk.
type digester struct{ h hash.Hash }

func (d *digester) add(e *entry) {
	if d.h == nil {
		d.h = sha256.New()
	}
	id := e.Hash
	switch {
	case e.ignored != "" && e.upper == upFile && e.Change.Change != deleted:
		id = fmt.Sprintf("id:%d:%d", e.ino, e.uctime)
	case id == "" && e.Type == "file" && e.Change.Change != deleted:
		id = fmt.Sprintf("unread:%d:%d", e.ino, e.uctime)
	}
	fmt.Fprintf(d.h, "%q %s %s %o %d %q %s\n", e.rel, e.Change.Change, e.Type, e.perm, e.Size, e.Target, id)
}

func (d *digester) sum() string {
	if d.h == nil {
		d.h = sha256.New()
	}
	return hex.EncodeToString(d.h.Sum(nil))
}

// viewFile sets e.Hash, the sha256 of the view's regular file name of u
// (stat st), unless it lies under an ignored path that is not listed;
// when its patch is wanted it is read once, for both, and returned, so
// that the patch shows the bytes the hash binds.
func (w *walker) viewFile(e *entry, u dirRef, name string, st *unix.Stat_t) *side {
	if e.ignored != "" && !w.opt.All {
		return nil
	}
	if w.patching(e) && !w.patch.full() && st.Size <= maxText {
		s := readSide(u.fd, name, st)
		if s.size <= maxText {
			sum := sha256.Sum256(s.data)
			e.Hash = hex.EncodeToString(sum[:])
		}
		return &s
	}
	f, err := openFile(u.fd, name, st)
	if err != nil {
		return nil
	}
	defer f.Close()
	if sum, err := sumFile(f, st.Size); err == nil {
		e.Hash = sum
	}
	return nil
}

// plainMax is the longest file whose hash is the sha256 of its bytes;
// a longer one's is the sha256 of its blocks' (sumFile). One block: the
// hash's cost then follows the bytes a file holds, never its apparent
// size (many files of holes each made 256 MiB long would otherwise cost
// a jail_diff minutes of the server's time, and the jail no disk).
const plainMax = hashBlock

// hashBlock is the block of a long file's hash.
const hashBlock = 1 << 20

// zeroBlock is the sha256 of a block of zeros: a hole's.
var zeroBlock = sync.OnceValue(func() [32]byte { return sha256.Sum256(make([]byte, hashBlock)) })

// sumFile is the hash of the first size bytes of f: up to plainMax, the
// sha256 of the bytes; beyond, the sha256 of a line naming the length
// and of each 1 MiB block's sha256 in order, where a block that lies in
// a hole is not read (its sum is that of zeros). It depends on the bytes
// alone, never on where the file system keeps holes, and a file of a few
// blocks made a terabyte long (truncate) is read for its blocks.
func sumFile(f *os.File, size int64) (string, error) {
	h := sha256.New()
	if size <= plainMax {
		if _, err := io.Copy(h, io.NewSectionReader(f, 0, size)); err != nil {
			return "", err
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	fmt.Fprintf(h, "sha256 of %d-byte blocks, %d bytes\n", hashBlock, size)
	buf := make([]byte, hashBlock)
	next := int64(0) // the first block not yet summed
	block := func() error {
		n := min(hashBlock, size-next*hashBlock)
		if _, err := f.ReadAt(buf[:n], next*hashBlock); err != nil {
			return err
		}
		sum := sha256.Sum256(buf[:n])
		h.Write(sum[:])
		next++
		return nil
	}
	err := dataExtents(f, size, func(data, end int64) error {
		for ; (next+1)*hashBlock <= data; next++ {
			z := zeroBlock()
			h.Write(z[:])
		}
		for next*hashBlock < end {
			if err := block(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	for next*hashBlock < size {
		if (next+1)*hashBlock <= size {
			z := zeroBlock()
			h.Write(z[:])
			next++
			continue
		}
		if err := block(); err != nil { // the last, short one
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
