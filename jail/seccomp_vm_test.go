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

// pidCallNumbers are, per ABI (audit arch), the numbers of the calls that
// act on a process named by pid and that the kernel checks by uid alone,
// written out here from the kernel's tables rather than taken from the
// filter's: arch/x86/entry/syscalls/syscall_64.tbl and syscall_32.tbl,
// include/uapi/asm-generic/unistd.h (arm64), arch/arm/tools/syscall.tbl.
var pidCallNumbers = map[uint32]map[string]uint32{
	auditArchX86_64: {
		"prlimit64": 302, "sched_setparam": 142, "sched_getparam": 143, "sched_setscheduler": 144,
		"sched_getscheduler": 145, "sched_rr_get_interval": 148, "sched_setaffinity": 203,
		"sched_getaffinity": 204, "sched_setattr": 314, "sched_getattr": 315,
		"migrate_pages": 256, "move_pages": 279,
		"getpriority": 140, "setpriority": 141, "ioprio_set": 251, "ioprio_get": 252,
		"kcmp": 312, "process_madvise": 440, "process_mrelease": 448,
	},
	auditArchI386: {
		"prlimit64": 340, "sched_setparam": 154, "sched_getparam": 155, "sched_setscheduler": 156,
		"sched_getscheduler": 157, "sched_rr_get_interval": 161, "sched_rr_get_interval_time64": 423,
		"sched_setaffinity": 241, "sched_getaffinity": 242, "sched_setattr": 351, "sched_getattr": 352,
		"migrate_pages": 294, "move_pages": 317,
		"getpriority": 96, "setpriority": 97, "ioprio_set": 289, "ioprio_get": 290,
		"kcmp": 349, "process_madvise": 440, "process_mrelease": 448,
	},
	auditArchAArch64: {
		"prlimit64": 261, "sched_setparam": 118, "sched_getparam": 121, "sched_setscheduler": 119,
		"sched_getscheduler": 120, "sched_rr_get_interval": 127, "sched_setaffinity": 122,
		"sched_getaffinity": 123, "sched_setattr": 274, "sched_getattr": 275,
		"migrate_pages": 238, "move_pages": 239,
		"getpriority": 141, "setpriority": 140, "ioprio_set": 30, "ioprio_get": 31,
		"kcmp": 272, "process_madvise": 440, "process_mrelease": 448,
	},
	auditArchARM: {
		"prlimit64": 369, "sched_setparam": 154, "sched_getparam": 155, "sched_setscheduler": 156,
		"sched_getscheduler": 157, "sched_rr_get_interval": 161, "sched_rr_get_interval_time64": 423,
		"sched_setaffinity": 241, "sched_getaffinity": 242, "sched_setattr": 380, "sched_getattr": 381,
		"migrate_pages": 400, "move_pages": 344,
		"getpriority": 96, "setpriority": 97, "ioprio_set": 314, "ioprio_get": 315,
		"kcmp": 378, "process_madvise": 440, "process_mrelease": 448,
	},
}

// loadedProgram disassembles a filter as bwrap --seccomp reads it, so
// that the VM runs the very bytes bwrap loads.
func loadedProgram(t *testing.T, raw []byte) []bpf.Instruction {
	t.Helper()
	prog := make([]bpf.Instruction, 0, len(raw)/8)
	for i := 0; i+8 <= len(raw); i += 8 {
		ri := bpf.RawInstruction{Op: binary.LittleEndian.Uint16(raw[i:]), Jt: raw[i+2], Jf: raw[i+3], K: binary.LittleEndian.Uint32(raw[i+4:])}
		prog = append(prog, ri.Disassemble())
	}
	return prog
}

// TestPidCallsEveryABI: in bubblewrap's filter, on every ABI the kernel
// runs (the compat one too: a 32-bit program, or int 0x80 from a 64-bit
// one), the calls that act on a process by pid act on the caller only,
// so that a command reaches neither its session agent nor a neighbour
// call's processes; kcmp, process_madvise and process_mrelease are
// refused; the caller's own (pid 0) pass.
func TestPidCallsEveryABI(t *testing.T) {
	const pid = 4242
	for goarch, arches := range seccompArches {
		for _, root := range []bool{false, true} {
			raw, err := seccompFilter(goarch, root)
			if err != nil {
				t.Fatal(err)
			}
			prog := loadedProgram(t, raw)
			for _, a := range arches {
				nrs := pidCallNumbers[a.audit]
				if nrs == nil {
					t.Fatalf("%s: no pid calls written out for ABI %#x", goarch, a.audit)
				}
				for name, nr := range nrs {
					var other, own []uint32
					switch name {
					case "kcmp", "process_madvise", "process_mrelease":
						other = []uint32{0}
					case "getpriority", "setpriority":
						other, own = []uint32{prioProcess, pid}, []uint32{prioProcess, 0}
					case "ioprio_set", "ioprio_get":
						other, own = []uint32{ioprioWhoProcess, pid}, []uint32{ioprioWhoProcess, 0}
					default:
						other, own = []uint32{pid}, []uint32{0}
					}
					if got := runFilter(t, prog, a.audit, nr, other...); got != seccompRetErrno|eperm {
						t.Errorf("%s ABI %#x root %t: %s(%v) gets %#x, want EPERM", goarch, a.audit, root, name, other, got)
					}
					if own != nil {
						if got := runFilter(t, prog, a.audit, nr, own...); got != seccompRetAllow {
							t.Errorf("%s ABI %#x root %t: %s(%v) of the caller gets %#x, want it allowed", goarch, a.audit, root, name, own, got)
						}
					}
				}
			}
		}
	}
}
