//go:build linux || darwin

package layer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// errChanged is a file of the layer that changed while it was copied.
var errChanged = fmt.Errorf("%w: it changed while copied", errNotRegular)

// dataExtents calls fn for each data extent [data, end) of the first
// size bytes of f, in order, as SEEK_DATA and SEEK_HOLE find them; a file
// system that does not tell holes gives one extent, the whole file.
func dataExtents(f *os.File, size int64, fn func(data, end int64) error) error {
	fd := int(f.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // a hole to the end
		}
		if err != nil {
			data = off
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil || hole <= data {
			hole = size // never an empty extent: off always moves on
		}
		if data >= size {
			return nil
		}
		hole = min(hole, size)
		if err := fn(data, hole); err != nil {
			return err
		}
		off = hole
	}
	return nil
}

// copySparse copies the first size bytes of src to dst, an empty file,
// keeping src's holes: only the data extents are copied (dataExtents),
// and dst's length is set at the end. A file of a few blocks made 96 MiB
// long with truncate stays a few blocks on the host.
func copySparse(dst, src *os.File, size int64) error {
	err := dataExtents(src, size, func(data, end int64) error {
		return copyRange(dst, src, data, end-data)
	})
	if err != nil {
		return err
	}
	return dst.Truncate(size)
}

// copyRangeSlow copies n bytes at off of src to the same offset of dst
// through the server's memory.
func copyRangeSlow(dst, src *os.File, off, n int64) error {
	w, err := io.Copy(io.NewOffsetWriter(dst, off), io.NewSectionReader(src, off, n))
	if err == nil && w < n {
		return errChanged
	}
	return err
}

// checkSize is the refusals for the apply's size: the apparent size of
// the files it writes (holes counted, as a tool that copies the file
// later may fill them) must be within maxBytes (the session's
// --max-disk; 0 is none) and within what the project's file system has
// free. The largest files are refused until the rest fits, so that the
// caller can apply the others.
func (a *applier) checkSize(sel []int, project string, maxBytes int64) []Refusal {
	var files []*entry
	var total int64
	for _, i := range sel {
		if e := &a.w.entries[i]; needsData(e) {
			files = append(files, e)
			total += e.Size
		}
	}
	if len(files) == 0 {
		return nil
	}
	slices.SortStableFunc(files, func(x, y *entry) int { return int(min(max(y.Size-x.Size, -1), 1)) })
	var out []Refusal
	refuse := func(bound int64, why func(total int64) string) {
		for len(files) > 0 && total > bound {
			out = append(out, Refusal{Path: files[0].Path, Reason: why(total)})
			total -= files[0].Size
			files = files[1:]
		}
	}
	if maxBytes > 0 {
		refuse(maxBytes, func(total int64) string {
			return fmt.Sprintf("the apply's files hold %d bytes (apparent size, holes counted), over the bound of %d bytes "+
				"(--max-disk): apply the others first, then this one alone", total, maxBytes)
		})
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(project, &fs); err != nil {
		refuse(-1, func(int64) string { return "the project's free space is not known: " + err.Error() })
		return out
	}
	free := int64(fs.Bavail) * int64(fs.Bsize)
	refuse(free, func(total int64) string {
		return fmt.Sprintf("the project's file system has %d bytes free, the apply's files hold %d "+
			"(apparent size, holes counted): free space on the host, or leave this one out", free, total)
	})
	return out
}
