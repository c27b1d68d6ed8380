package layer

import "golang.org/x/sys/unix"

// born is when the upper entry name of the directory dirfd was made (in
// nanoseconds since the epoch): its birth time, which every macOS file
// system keeps.
func born(dirfd int, name string) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, err
	}
	return st.Btim.Nano(), nil
}
