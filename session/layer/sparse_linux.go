package layer

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// copyRange copies n bytes at off of src to the same offset of dst,
// in the kernel (copy_file_range), or through memory where the kernel
// does not copy between the two.
func copyRange(dst, src *os.File, off, n int64) error {
	for n > 0 {
		in, out := off, off
		w, err := unix.CopyFileRange(int(src.Fd()), &in, int(dst.Fd()), &out, int(min(n, 1<<30)), 0)
		switch {
		case errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) ||
			errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPERM):
			return copyRangeSlow(dst, src, off, n)
		case err != nil:
			return err
		case w == 0:
			return errChanged // shorter than when looked at
		}
		off += int64(w)
		n -= int64(w)
	}
	return nil
}
