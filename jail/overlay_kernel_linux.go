package jail

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// overlayKernel says whether this kernel mounts overlayfs in a user
// namespace with user xattrs (5.11).
func overlayKernel() error {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Errorf("read the kernel's release: %w", err)
	}
	rel := unix.ByteSliceToString(u.Release[:])
	var major, minor int
	if _, err := fmt.Sscanf(rel, "%d.%d", &major, &minor); err != nil {
		return fmt.Errorf("read the kernel's release %q: %w", rel, err)
	}
	if major < 5 || major == 5 && minor < 11 {
		return fmt.Errorf("%w: kernel %s mounts no overlay in a user namespace (5.11 and later do)", ErrNoOverlay, rel)
	}
	return nil
}
