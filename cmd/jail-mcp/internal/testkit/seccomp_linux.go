package testkit

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestSeccomp names a file of a compiled seccomp program (classic BPF,
// 8 bytes an instruction) that the test binary, as the server, loads on
// every thread before it serves: a pod's seccomp profile, standing in for
// the runtime's (TestOverlayEscapeInUserNamespace).
const TestSeccomp = "JAIL_MCP_TEST_SECCOMP"

// loadSeccomp loads the program in file on every thread of the process,
// with no_new_privs, as a container runtime does before the container's
// first process runs.
func loadSeccomp(file string) error {
	b, err := os.ReadFile(file)
	if err != nil || len(b) == 0 || len(b)%8 != 0 {
		return fmt.Errorf("%s=%s: not a compiled program (%v)", TestSeccomp, file, err)
	}
	filters := make([]unix.SockFilter, len(b)/8)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&filters[0])), len(b)), b)
	prog := unix.SockFprog{Len: uint16(len(filters)), Filter: &filters[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return nil
}
