package layer

import "golang.org/x/sys/unix"

// born is when the upper entry name of the directory dirfd was made (in
// nanoseconds since the epoch), the moment the view's copy of the host
// entry was taken: its birth time (statx STATX_BTIME). A file system that
// keeps none gives the entry's change time instead, no earlier than its
// birth (a write to the copy moves it on): a host change between the two
// is then not seen as a conflict.
func born(dirfd int, name string) (int64, error) {
	var sx unix.Statx_t
	err := unix.Statx(dirfd, name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, unix.STATX_BTIME|unix.STATX_CTIME, &sx)
	if err != nil {
		return 0, err
	}
	t := sx.Ctime
	if sx.Mask&unix.STATX_BTIME != 0 {
		t = sx.Btime
	}
	return int64(t.Sec)*1e9 + int64(t.Nsec), nil
}
