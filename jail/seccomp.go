package jail

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/net/bpf"
)

// The seccomp filter closes what no mount can, on every backend:
//
//   - connect(2) and sendto(2) to a unix socket of the host. Masking
//     listening socket paths misses sockets bound after the call started,
//     hard links and relative binds of them, datagram sockets that never
//     listen (syslog, journald, notify) and sockets of other network
//     namespaces. So a jailed command cannot create unix sockets at all:
//     socket(AF_UNIX, ...) fails with EACCES. io_uring is denied too: its
//     IORING_OP_SOCKET creates sockets without the socket syscall the
//     filter sees.
//   - socketpair(2) of unix datagram and seqpacket sockets: such a socket
//     can sendto(2) any pathname address, or connect(2) to one, without
//     ever calling socket(2). A stream pair, which many programs use as a
//     pipe, still works: a connected stream socket can neither connect
//     again nor send to an address.
//   - the key management syscalls (add_key, request_key, keyctl): a
//     command would otherwise inherit the server's session keyring and
//     could read, add or clear its keys (Kerberos tickets, filesystem
//     keys). Denied with EPERM, as Docker's default profile does, which
//     programs already cope with.
//   - netlink beyond routing: NETLINK_USERSOCK reaches host processes by
//     port id, and other families are host interfaces too. NETLINK_ROUTE
//     stays, so that ip addr and getifaddrs(3) read the command's own
//     interfaces; without capabilities it can change nothing.
const (
	seccompRetAllow = 0x7fff0000
	seccompRetErrno = 0x00050000
	eacces          = 13
	afUnix          = 1
	afNetlink       = 16
	afInet          = 2
	afInet6         = 10
	ipprotoTCP      = 6
	netlinkRoute    = 0
	sockStream      = 1
	// sockFlags are the flags socket(2) and socketpair(2) take in the
	// type argument, beside the type itself.
	sockFlags = 0o4000 | 0o2000000 // SOCK_NONBLOCK | SOCK_CLOEXEC

	offNr   = 0
	offArch = 4
	offArg0 = 16 // low half of args[0] on little-endian machines
	offArg1 = 24
	offArg2 = 32

	auditArchX86_64  = 0xc000003e
	auditArchI386    = 0x40000003
	auditArchAArch64 = 0xc00000b7
	auditArchARM     = 0x40000028
	x32SyscallBit    = 0x40000000

	ioUringSetup    = 425 // the same number on every architecture
	ioUringRegister = 427 // 425 to 427: setup, enter, register
)

// seccompArch is one ABI's numbers of the syscalls every filter checks.
type seccompArch struct {
	audit      uint32
	socket     uint32
	socketpair uint32
	socketcall uint32   // 0: none; the multiplexer hides its arguments, so it is denied whole
	keys       []uint32 // add_key, request_key, keyctl
	x32        bool     // numbers with the x32 bit set are another ABI: denied
	native     *nativeCalls
}

// nativeCalls are the numbers, on a 64-bit ABI, of the syscalls a policy
// beyond unix sockets denies.
type nativeCalls struct {
	ipc            []uint32 // SysV IPC, POSIX message queues
	unshare, clone uint32
	setns, clone3  uint32
	chmod          []uint32 // chmod and chown, every form
	xattr          []uint32 // setting and removing extended attributes
}

var (
	amd64Calls = &nativeCalls{
		ipc:     []uint32{29, 30, 31, 64, 65, 66, 67, 68, 69, 70, 71, 220, 240, 241, 242, 243, 244, 245},
		unshare: 272, clone: 56, setns: 308, clone3: 435,
		chmod: []uint32{90, 91, 92, 93, 94, 260, 268, 452},
		xattr: []uint32{188, 189, 190, 197, 198, 199, 463, 466},
	}
	arm64Calls = &nativeCalls{
		ipc:     []uint32{180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191, 192, 193, 194, 195, 196, 197},
		unshare: 97, clone: 220, setns: 268, clone3: 435,
		chmod: []uint32{52, 53, 54, 55, 452},
		xattr: []uint32{5, 6, 7, 14, 15, 16, 463, 466},
	}
)

// seccompArches maps GOARCH to the native and the compat ABI the kernel
// runs on it.
var seccompArches = map[string][]seccompArch{
	"amd64": {
		{audit: auditArchX86_64, socket: 41, socketpair: 53, keys: []uint32{248, 249, 250}, x32: true, native: amd64Calls},
		{audit: auditArchI386, socket: 359, socketpair: 360, socketcall: 102, keys: []uint32{286, 287, 288}},
	},
	"arm64": {
		{audit: auditArchAArch64, socket: 198, socketpair: 199, keys: []uint32{217, 218, 219}, native: arm64Calls},
		{audit: auditArchARM, socket: 281, socketpair: 288, keys: []uint32{309, 310, 311}},
	},
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
	ipc    bool // no SysV IPC or POSIX message queues: they are the host's
	ns     bool // no new namespaces: unshare, setns, clone with CLONE_NEW*, clone3
	noNet  bool // no sockets but routing netlink (network off: UDP too, which Landlock lets through)
	// tcpOnly: of the internet families, TCP stream sockets only (network
	// held to a proxy: Landlock bounds TCP connects by port, not UDP,
	// SCTP or MPTCP); other families but routing netlink denied.
	tcpOnly bool
	chmod   bool // no chmod or chown: a server running as root owns the host's files
	xattr   bool // no extended attributes set or removed: Landlock does not cover them
}

// landlockPolicy is the seccomp policy of the landlock backend.
func landlockPolicy(network, tcpOnly, root bool) seccompPolicy {
	return seccompPolicy{native: true, ipc: true, ns: true, xattr: true, noNet: !network, tcpOnly: network && tcpOnly, chmod: root}
}

// cloneNewFlags are the CLONE_NEW* bits of clone(2) and unshare(2).
const cloneNewFlags = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

const (
	eperm  = 1
	enosys = 38
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
		// jeq deny]; io_uring: deny; keys: EPERM; [policy]; socketpair:
		// unix other than stream denied; socket: unix denied, netlink
		// other than routing denied, [network off: all else denied];
		// ret allow.
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
		denyNr := func(nr, e uint32) {
			body = append(body, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: nr, SkipTrue: 1}, errno(e))
		}
		for _, nr := range a.keys {
			denyNr(nr, eperm)
		}
		if n := a.native; n != nil {
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
		// socketpair(AF_UNIX, type): only SOCK_STREAM, with or without its
		// flags; any other type or flag is denied (the kernel would refuse
		// unknown flags anyway). Other families have no socketpair.
		pair := []bpf.Instruction{
			bpf.LoadAbsolute{Off: offArg0, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: afUnix, SkipTrue: 4},
			bpf.LoadAbsolute{Off: offArg1, Size: 4},
			bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: ^uint32(sockFlags)},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: sockStream, SkipTrue: 1},
			deny,
			allow,
		}
		body = append(body, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: a.socketpair, SkipTrue: uint8(len(pair))})
		body = append(body, pair...)
		// socket(family, type, protocol): no unix sockets; netlink only
		// for routing; with network off nothing else either; held to a
		// proxy, TCP only (protocol 0 or IPPROTO_TCP).
		other := []bpf.Instruction{allow}
		switch {
		case pol.noNet:
			other = []bpf.Instruction{deny}
		case pol.tcpOnly:
			other = []bpf.Instruction{
				bpf.JumpIf{Cond: bpf.JumpEqual, Val: afInet, SkipTrue: 1},
				bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: afInet6, SkipTrue: 6},
				bpf.LoadAbsolute{Off: offArg1, Size: 4},
				bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: ^uint32(sockFlags)},
				bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: sockStream, SkipTrue: 3},
				bpf.LoadAbsolute{Off: offArg2, Size: 4},
				bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipTrue: 2},
				bpf.JumpIf{Cond: bpf.JumpEqual, Val: ipprotoTCP, SkipTrue: 1},
				deny,
				allow,
			}
		}
		sock := []bpf.Instruction{
			bpf.LoadAbsolute{Off: offArg0, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: afUnix, SkipTrue: 1},
			deny,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: afNetlink, SkipTrue: uint8(len(other))},
		}
		sock = append(sock, other...)
		sock = append(sock,
			bpf.LoadAbsolute{Off: offArg2, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: netlinkRoute, SkipTrue: 1},
			deny,
		)
		body = append(body, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: a.socket, SkipTrue: uint8(len(sock))})
		body = append(body, sock...)
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
