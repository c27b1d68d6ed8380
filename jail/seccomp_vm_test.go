package jail

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
)

// runFilter runs a filter of seccompProgram on one syscall in x/net/bpf's
// VM, which loads words big-endian: the seccomp_data it is given is
// written so, the low half of each argument at the offset the filter
// reads.
func runFilter(t *testing.T, prog []bpf.Instruction, audit, nr uint32, args ...uint32) uint32 {
	t.Helper()
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatalf("the filter does not assemble: %v", err)
	}
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[offNr:], nr)
	binary.BigEndian.PutUint32(data[offArch:], audit)
	for i, a := range args {
		binary.BigEndian.PutUint32(data[offArg0+8*i:], a)
	}
	ret, err := vm.Run(data)
	if err != nil {
		t.Fatalf("the filter does not run: %v", err)
	}
	return uint32(ret)
}

// TestFsIoctlClass: under the landlock policy, of the file systems'
// ioctls only those that read (and clone and dedupe) pass, whatever
// their file system; other ioctls (terminals, sockets) are untouched;
// bubblewrap's filter, whose host is read-only by mounts, denies none.
func TestFsIoctlClass(t *testing.T) {
	deniedCmds := map[string]uint32{
		"FS_IOC_SETFLAGS":              0x40086602,
		"FS_IOC_SET_ENCRYPTION_POLICY": 0x800c6613,
		"FS_IOC_ADD_ENCRYPTION_KEY":    0xc0506617,
		"FS_IOC_REMOVE_ENCRYPTION_KEY": 0xc0406618,
		"FS_IOC_ENABLE_VERITY":         0x40806685,
		"EXT4_IOC_MIGRATE":             0x00006609,
		"BTRFS_IOC_SUBVOL_CREATE":      0x5000940e,
		"BTRFS_IOC_SNAP_CREATE":        0x50009401,
		"BTRFS_IOC_SUBVOL_SETFLAGS":    0x4008941a,
		"FS_IOC_FSSETXATTR":            0x401c5820,
		"FS_IOC_SETVERSION":            0x40087602,
		"F2FS_IOC_START_ATOMIC_WRITE":  0x0000f501,
	}
	allowedCmds := map[string]uint32{
		"FS_IOC_GETFLAGS":   0x80086601,
		"FICLONE":           0x40049409,
		"FIDEDUPERANGE":     0xc0189436,
		"FS_IOC_FIEMAP":     0xc020660b,
		"FS_IOC_FSGETXATTR": 0x801c581f,
		"TCGETS":            0x5401,
		"TIOCGWINSZ":        0x5413,
		"FIONREAD":          0x541b,
		"FIOCLEX":           0x5451,
	}
	for goarch, ioctl := range map[string]uint32{"amd64": amd64Calls.ioctl, "arm64": arm64Calls.ioctl} {
		audit := seccompArches[goarch][0].audit
		for _, network := range []bool{false, true} {
			prog, err := seccompProgram(goarch, landlockPolicy(network, false, false))
			if err != nil {
				t.Fatal(err)
			}
			for name, cmd := range deniedCmds {
				if got := runFilter(t, prog, audit, ioctl, 3, cmd); got != seccompRetErrno|eperm {
					t.Errorf("%s, network %t: ioctl %s gets %#x, want EPERM", goarch, network, name, got)
				}
			}
			for name, cmd := range allowedCmds {
				if got := runFilter(t, prog, audit, ioctl, 3, cmd); got != seccompRetAllow {
					t.Errorf("%s, network %t: ioctl %s gets %#x, want it allowed", goarch, network, name, got)
				}
			}
			// A call after the ioctl test sees its own number: read(2)
			// and getpriority of the caller pass.
			if got := runFilter(t, prog, audit, amd64Or(goarch, 0, 63), 0); got != seccompRetAllow {
				t.Errorf("%s: read gets %#x", goarch, got)
			}
		}
		prog, err := seccompProgram(goarch, seccompPolicy{})
		if err != nil {
			t.Fatal(err)
		}
		if got := runFilter(t, prog, audit, ioctl, 3, deniedCmds["FS_IOC_SET_ENCRYPTION_POLICY"]); got != seccompRetAllow {
			t.Errorf("%s: bubblewrap's filter gets %#x for an fs ioctl, want it allowed (its mounts are read-only)", goarch, got)
		}
	}
}

// TestReusePort: setsockopt(SOL_SOCKET, SO_REUSEPORT) is refused on
// every backend and ABI; other socket options pass.
func TestReusePort(t *testing.T) {
	for goarch, arches := range seccompArches {
		for _, a := range arches {
			pols := map[string]seccompPolicy{"bwrap": {}}
			if a.native != nil {
				pols["landlock"] = landlockPolicy(true, false, false)
				pols["landlock-proxy"] = landlockPolicy(true, true, true)
			}
			for name, pol := range pols {
				prog, err := seccompProgram(goarch, pol)
				if err != nil {
					t.Fatal(err)
				}
				if got := runFilter(t, prog, a.audit, a.setsockopt, 3, solSocket, soReusePort); got != seccompRetErrno|eperm {
					t.Errorf("%s %#x %s: SO_REUSEPORT gets %#x, want EPERM", goarch, a.audit, name, got)
				}
				for _, opt := range [][2]uint32{{solSocket, 2 /* SO_REUSEADDR */}, {solSocket, 9 /* SO_KEEPALIVE */}, {6, 1 /* TCP_NODELAY */}, {6, soReusePort}} {
					if got := runFilter(t, prog, a.audit, a.setsockopt, 3, opt[0], opt[1]); got != seccompRetAllow {
						t.Errorf("%s %#x %s: setsockopt(%d, %d) gets %#x, want it allowed", goarch, a.audit, name, opt[0], opt[1], got)
					}
				}
			}
		}
	}
}

func amd64Or(goarch string, amd64, arm64 uint32) uint32 {
	if goarch == "amd64" {
		return amd64
	}
	return arm64
}
