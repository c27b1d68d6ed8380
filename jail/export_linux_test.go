package jail

// SelfBinaryFd is the descriptor b holds its agents' binary by, -1 when
// it holds none.
func SelfBinaryFd(b Backend) int {
	switch b := b.(type) {
	case *landlockJail:
		return int(b.exe.f.Fd())
	case *bwrap:
		if b.exe != nil {
			return int(b.exe.f.Fd())
		}
	}
	return -1
}
