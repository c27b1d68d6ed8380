package jail

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ProtectServer makes the calling process (the server, or jail-mcp run)
// not dumpable: its /proc files are root's, so no process of its user can
// read its environment or descriptors, write its memory or trace it. No
// command shares a domain with it (they run in session agents), and this
// keeps what a command could still reach of it, where Landlock or a pid
// namespace would not, closed.
func ProtectServer() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make the server not dumpable: %w", err)
	}
	return nil
}
