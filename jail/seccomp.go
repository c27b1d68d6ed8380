package jail

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/net/bpf"
)

// The seccomp filter closes what no mount can: connect(2) and sendto(2) to
// a unix socket of the host. Masking listening socket paths misses sockets
// bound after the call started, hard links and relative binds of them,
// datagram sockets that never listen (syslog, journald, notify) and sockets
// of other network namespaces. So a jailed command cannot create unix
// sockets at all: socket(AF_UNIX, ...) fails with EACCES. socketpair(2),
// which connects a process only to itself and its children, still works.
// io_uring is denied too: its IORING_OP_SOCKET creates sockets without the
// socket syscall the filter sees.

const (
	seccompRetAllow = 0x7fff0000
	seccompRetErrno = 0x00050000
	eacces          = 13
	afUnix          = 1

	offNr   = 0
	offArch = 4
	offArg0 = 16 // low half of args[0] on little-endian machines

	auditArchX86_64  = 0xc000003e
	auditArchI386    = 0x40000003
	auditArchAArch64 = 0xc00000b7
	auditArchARM     = 0x40000028
	x32SyscallBit    = 0x40000000

	ioUringSetup    = 425 // the same number on every architecture
	ioUringRegister = 427 // 425 to 427: setup, enter, register
)

// seccompArch is one architecture's syscall numbers that create sockets.
type seccompArch struct {
	audit      uint32
	socket     uint32
	socketcall uint32 // 0: none; the multiplexer hides its arguments, so it is denied whole
	x32        bool   // numbers with the x32 bit set are another ABI: denied
	native     *nativeCalls
}

// nativeCalls are the numbers, on a 64-bit ABI, of the syscalls a policy
// beyond unix sockets denies.
type nativeCalls struct {
	ipc            []uint32 // SysV IPC, POSIX message queues, key rings
	unshare, clone uint32
	setns, clone3  uint32
	chmod          []uint32 // chmod and chown, every form
	xattr          []uint32 // setting and removing extended attributes
}

var (
	amd64Calls = &nativeCalls{
		ipc:     []uint32{29, 30, 31, 64, 65, 66, 67, 68, 69, 70, 71, 220, 240, 241, 242, 243, 244, 245, 248, 249, 250},
		unshare: 272, clone: 56, setns: 308, clone3: 435,
		chmod: []uint32{90, 91, 92, 93, 94, 260, 268, 452},
		xattr: []uint32{188, 189, 190, 197, 198, 199, 463, 466},
	}
	arm64Calls = &nativeCalls{
		ipc:     []uint32{180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191, 192, 193, 194, 195, 196, 197, 217, 218, 219},
		unshare: 97, clone: 220, setns: 268, clone3: 435,
		chmod: []uint32{52, 53, 54, 55, 452},
		xattr: []uint32{5, 6, 7, 14, 15, 16, 463, 466},
	}
)

// seccompArches maps GOARCH to the native and the compat ABI the kernel
// runs on it.
var seccompArches = map[string][]seccompArch{
	"amd64": {{audit: auditArchX86_64, socket: 41, x32: true, native: amd64Calls}, {audit: auditArchI386, socket: 359, socketcall: 102}},
	"arm64": {{audit: auditArchAArch64, socket: 198, native: arm64Calls}, {audit: auditArchARM, socket: 281}},
}

// seccompPolicy is what a filter denies beyond unix sockets and io_uring.
// bubblewrap needs none of it (its namespaces and dropped capabilities
// close the same holes); the Landlock backend, which runs in the host's
// namespaces, needs all of it.
type seccompPolicy struct {
	// native: only the 64-bit ABI runs; every syscall of the compat ABI
	// (32-bit programs) is denied, so that the lists below need no
	// compat numbers.
	native bool
	ipc    bool // no SysV IPC, POSIX message queues or key rings: they are the host's
	ns     bool // no new namespaces: unshare, setns, clone with CLONE_NEW*, clone3
	noNet  bool // no sockets but netlink (network off: UDP too, which Landlock lets through)
	chmod  bool // no chmod or chown: a server running as root owns the host's files
	xattr  bool // no extended attributes set or removed: Landlock does not cover them
}

// landlockPolicy is the seccomp policy of the landlock backend.
func landlockPolicy(network, root bool) seccompPolicy {
	return seccompPolicy{native: true, ipc: true, ns: true, xattr: true, noNet: !network, chmod: root}
}

// cloneNewFlags are the CLONE_NEW* bits of clone(2) and unshare(2).
const cloneNewFlags = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

const (
	eperm    = 1
	enosys   = 38
	afNetlnk = 16
)

// seccompFilter returns the filter as bwrap --seccomp reads it: the raw
// struct sock_filter array. Any other architecture is denied every
// syscall, failing closed.
func seccompFilter(goarch string) ([]byte, error) { return buildSeccomp(goarch, seccompPolicy{}) }

func buildSeccomp(goarch string, pol seccompPolicy) ([]byte, error) {
	prog, err := seccompProgram(goarch, pol)
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("assemble seccomp filter: %w", err)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, ins := range raw {
		out = binary.LittleEndian.AppendUint16(out, ins.Op)
		out = append(out, ins.Jt, ins.Jf)
		out = binary.LittleEndian.AppendUint32(out, ins.K)
	}
	return out, nil
}

func seccompProgram(goarch string, pol seccompPolicy) ([]bpf.Instruction, error) {
	arches, ok := seccompArches[goarch]
	if !ok {
		return nil, fmt.Errorf("no seccomp filter for %s", goarch)
	}
	if pol.native {
		arches = arches[:1]
	}
	deny := bpf.RetConstant{Val: seccompRetErrno | eacces}
	allow := bpf.RetConstant{Val: seccompRetAllow}
	errno := func(e uint32) bpf.Instruction { return bpf.RetConstant{Val: seccompRetErrno | e} }
	var prog []bpf.Instruction
	for _, a := range arches {
		// Per arch: [ld arch; jne next] ld nr; [x32: jge deny]; [socketcall:
		// jeq deny]; io_uring: deny; [policy]; jne socket allow; ld arg0;
		// jeq AF_UNIX deny; [network off: jne netlink deny]; ret allow.
		var body []bpf.Instruction
		body = append(body, bpf.LoadAbsolute{Off: offNr, Size: 4})
		if a.x32 {
			body = append(body, bpf.JumpIf{Cond: bpf.JumpLessThan, Val: x32SyscallBit, SkipTrue: 1}, deny)
		}
		if a.socketcall != 0 {
			body = append(body, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: a.socketcall, SkipTrue: 1}, deny)
		}
		body = append(body,
			bpf.JumpIf{Cond: bpf.JumpLessThan, Val: ioUringSetup, SkipTrue: 2},
			bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: ioUringRegister, SkipTrue: 1},
			deny,
		)
		if n := a.native; n != nil {
			denyNr := func(nr, e uint32) {
				body = append(body, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: nr, SkipTrue: 1}, errno(e))
			}
			// nr with any CLONE_NEW* bit in args[0] is denied, else allowed.
			denyNewNS := func(nr uint32) {
				body = append(body,
					bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: nr, SkipTrue: 4},
					bpf.LoadAbsolute{Off: offArg0, Size: 4},
					bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: cloneNewFlags, SkipFalse: 1},
					errno(eperm),
					allow,
				)
			}
			if pol.ipc {
				for _, nr := range n.ipc {
					denyNr(nr, eperm)
				}
			}
			if pol.chmod {
				for _, nr := range n.chmod {
					denyNr(nr, eperm)
				}
			}
			if pol.xattr {
				for _, nr := range n.xattr {
					denyNr(nr, eperm)
				}
			}
			if pol.ns {
				denyNr(n.setns, eperm)
				// clone3 hides its flags in memory; ENOSYS makes the C
				// library fall back to clone, whose flags are seen.
				denyNr(n.clone3, enosys)
				denyNewNS(n.unshare)
				denyNewNS(n.clone)
			}
		} else if pol.ipc || pol.chmod || pol.xattr || pol.ns {
			return nil, fmt.Errorf("no syscall numbers of %s for this policy", goarch)
		}
		tail := []bpf.Instruction{
			bpf.LoadAbsolute{Off: offArg0, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: afUnix, SkipTrue: 1},
			deny,
		}
		if pol.noNet {
			tail = append(tail, bpf.JumpIf{Cond: bpf.JumpEqual, Val: afNetlnk, SkipTrue: 1}, deny)
		}
		body = append(body, bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.socket, SkipFalse: uint8(len(tail))})
		body = append(body, tail...)
		body = append(body, allow)
		if len(body) > 255 {
			return nil, fmt.Errorf("seccomp filter for %s too long to jump over", goarch)
		}
		prog = append(prog, bpf.LoadAbsolute{Off: offArch, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.audit, SkipFalse: uint8(len(body))})
		prog = append(prog, body...)
	}
	prog = append(prog, deny)
	return prog, nil
}
