//go:build linux || darwin

package session

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeInheritedFDs marks every descriptor above 2 close-on-exec. Go opens
// its own files that way, but the descriptors the server inherited from
// whoever started it (an MCP client, a shell) are not, and no backend
// closes them for the command: every command would get them, and a
// writable one bypasses every path rule of the jail. Commands get their
// standard streams and the descriptors the backend passes on purpose,
// nothing else.
func closeInheritedFDs() error {
	if closeRangeCloexec() == nil {
		return nil
	}
	// Linux before 5.11, and macOS: each descriptor the process has.
	if err := markListed("/dev/fd"); err != nil {
		return fmt.Errorf("mark inherited descriptors close-on-exec: %w", err)
	}
	return nil
}

// markListed marks close-on-exec every descriptor above 2 that dir lists
// (/dev/fd: /proc/self/fd on Linux, the fdesc file system on macOS). The
// descriptor that reads dir is listed too; it is closed right after.
func markListed(dir string) error {
	names, err := readNames(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if fd, err := strconv.Atoi(n); err == nil && fd > 2 {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
				unix.CloseOnExec(fd)
			}
		}
	}
	return nil
}

func readNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}
