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
//   - every address family but the internet ones and routing netlink:
//     AF_VSOCK is in no network namespace (a VM's host is reachable),
//     and AF_PACKET, AF_XDP, AF_TIPC, AF_RDS, AF_CAN, AF_BLUETOOTH,
//     AF_ALG and the rest are kernel or host interfaces no command needs.
//   - file leases and directory notifications (fcntl F_SETLEASE,
//     F_NOTIFY): a read lease on a host file the user owns, taken through
//     a read-only descriptor, holds host writers off and signals the
//     jail at each of their opens.
//   - SO_REUSEPORT: with network on, a socket with it binds beside a
//     host listener of the same uid that has it too, and takes a share
//     of that listener's connections.
//   - for a server running as root, set-user-ID and set-group-ID bits,
//     by chmod or in the mode a file is created with: root's set-user-ID
//     program left where another user runs it (a --writable directory of
//     the project) would be root for that user.
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

	offArg3 = 40

	fSetLease = 1024 // fcntl commands
	fNotify   = 1026

	msgFastOpen        = 0x20000000 // sendto, sendmsg, sendmmsg flag
	tcpFastOpen        = 23         // setsockopt(IPPROTO_TCP, ...) options
	tcpFastOpenConnect = 30
	solSocket          = 1  // setsockopt level
	soReusePort        = 15 // SOL_SOCKET option

	prioProcess      = 0 // setpriority, getpriority: which
	prioPgrp         = 1
	ioprioWhoProcess = 1 // ioprio_set, ioprio_get: which
	ioprioWhoPgrp    = 2

	processMadvise  = 440 // the same number on every architecture
	processMrelease = 448
	openat2         = 437 // the same number on every architecture

	sIsuid = 0o4000 // mode bits: set-user-ID, set-group-ID
	sIsgid = 0o2000
)

// File systems' own ioctls change a host file through a read-only
// descriptor wherever they check the file's owner, not the descriptor's
// mode: chattr's inode flags, an encryption policy on an empty directory
// (fscrypt: the directory then takes no file without a key the host user
// lacks), fs-verity (the file's content frozen), btrfs subvolumes and
// snapshots created in a host directory. Landlock checks none of them
// (its ioctl right covers devices only). So, as a class: of the ioctl
// types of the file systems ('f': ext4 and the generic fscrypt, fs-verity
// and flag ioctls; 0x94: btrfs and the generic clone and dedupe ones;
// 0xf5: f2fs), only the ones that read pass (and clone and dedupe, whose
// destination must be open for writing), and the setters of the other
// types ('X', 'v') are denied by number.
var (
	fsIoctlTypes = []uint32{0x66, 0x94, 0xf5}
	fsIoctlReads = []uint32{
		0x80086601, // FS_IOC_GETFLAGS
		0x80046601, // FS_IOC32_GETFLAGS
		0x80086603, // EXT4_IOC_GETVERSION
		0x80046603, // EXT4_IOC32_GETVERSION
		0x80086605, // EXT4_IOC_GETRSVSZ
		0xc020660b, // FS_IOC_FIEMAP
		0x00006612, // EXT4_IOC_PRECACHE_EXTENTS
		0x40106614, // FS_IOC_GET_ENCRYPTION_PWSALT
		0x400c6615, // FS_IOC_GET_ENCRYPTION_POLICY
		0xc0096616, // FS_IOC_GET_ENCRYPTION_POLICY_EX
		0xc080661a, // FS_IOC_GET_ENCRYPTION_KEY_STATUS
		0x8010661b, // FS_IOC_GET_ENCRYPTION_NONCE
		0x40046629, // EXT4_IOC_GETSTATE
		0xc020662a, // EXT4_IOC_GET_ES_CACHE
		0x8008662c, // EXT4_IOC_GETFSUUID
		0xc0046686, // FS_IOC_MEASURE_VERITY
		0xc0286687, // FS_IOC_READ_VERITY_METADATA
		0x40049409, // FICLONE
		0x4020940d, // FICLONERANGE
		0xc0189436, // FIDEDUPERANGE
		0x81009431, // FS_IOC_GETFSLABEL
		0x8400941f, // BTRFS_IOC_FS_INFO
		0x80189439, // BTRFS_IOC_GET_FEATURES
	}
	fsIoctlSetters = []uint32{
		0x401c5820, // FS_IOC_FSSETXATTR
		0x40087602, // FS_IOC_SETVERSION
		0x40047602, // FS_IOC32_SETVERSION
	}
)

// seccompArch is one ABI's numbers of the syscalls every filter checks.
type seccompArch struct {
	audit      uint32
	socket     uint32
	socketpair uint32
	socketcall uint32   // 0: none; the multiplexer hides its arguments, so it is denied whole
	keys       []uint32 // add_key, request_key, keyctl
	fcntl      []uint32 // fcntl, and fcntl64 where the ABI has it
	setsockopt uint32
	x32        bool // numbers with the x32 bit set are another ABI: denied
	native     *nativeCalls
	pids       *pidCalls
	// modes are the calls that set a file's mode (chmod, every form) or
	// create a file with one (open, creat, mknod, every form), with the
	// offset of their mode argument.
	modes []modeArg
}

// modeArg is a call that takes a file mode, and where its mode is.
type modeArg struct{ nr, off uint32 }

// nativeCalls are the numbers, on a 64-bit ABI, of the syscalls a policy
// beyond unix sockets denies.
type nativeCalls struct {
	ipc                  []uint32 // SysV IPC, POSIX message queues
	unshare, clone       uint32
	setns, clone3        uint32
	chmod                []uint32 // chmod and chown, every form
	xattr                []uint32 // setting and removing extended attributes
	ioctl                uint32
	sendto, sendmsg      uint32
	sendmmsg, setsockopt uint32
	listen               uint32
}

// pidCalls are an ABI's numbers of the calls that act on a process named
// by pid and that the kernel checks by uid alone. Every ABI the kernel
// runs has its own: a 32-bit program (or int 0x80 from a 64-bit one)
// reaches the same calls by the compat numbers.
type pidCalls struct {
	// pid0 act on the process named by their first argument, 0 for the
	// caller: prlimit64, sched_{set,get}{param,scheduler,affinity,attr},
	// sched_rr_get_interval (and its time64 form), migrate_pages,
	// move_pages.
	pid0                 []uint32
	setpriority, getprio uint32
	ioprioSet, ioprioGet uint32
	kcmp                 uint32
}

// The pid calls of each ABI, from the kernel's tables:
// arch/x86/entry/syscalls/syscall_64.tbl and syscall_32.tbl,
// include/uapi/asm-generic/unistd.h (arm64) and arch/arm/tools/syscall.tbl.
var (
	amd64Pids = &pidCalls{
		pid0:        []uint32{302, 142, 143, 144, 145, 203, 204, 314, 315, 148, 256, 279},
		setpriority: 141, getprio: 140, ioprioSet: 251, ioprioGet: 252, kcmp: 312,
	}
	i386Pids = &pidCalls{
		pid0:        []uint32{340, 154, 155, 156, 157, 241, 242, 351, 352, 161, 423, 294, 317},
		setpriority: 97, getprio: 96, ioprioSet: 289, ioprioGet: 290, kcmp: 349,
	}
	arm64Pids = &pidCalls{
		pid0:        []uint32{261, 118, 121, 119, 120, 122, 123, 274, 275, 127, 238, 239},
		setpriority: 140, getprio: 141, ioprioSet: 30, ioprioGet: 31, kcmp: 272,
	}
	armPids = &pidCalls{
		pid0:        []uint32{369, 154, 155, 156, 157, 241, 242, 380, 381, 161, 423, 400, 344},
		setpriority: 97, getprio: 96, ioprioSet: 314, ioprioGet: 315, kcmp: 378,
	}
)

var (
	amd64Calls = &nativeCalls{
		ipc:     []uint32{29, 30, 31, 64, 65, 66, 67, 68, 69, 70, 71, 220, 240, 241, 242, 243, 244, 245},
		unshare: 272, clone: 56, setns: 308, clone3: 435,
		chmod:  []uint32{90, 91, 92, 93, 94, 260, 268, 452},
		xattr:  []uint32{188, 189, 190, 197, 198, 199, 463, 466},
		ioctl:  16,
		sendto: 44, sendmsg: 46, sendmmsg: 307, setsockopt: 54, listen: 50,
	}
	arm64Calls = &nativeCalls{
		ipc:     []uint32{180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191, 192, 193, 194, 195, 196, 197},
		unshare: 97, clone: 220, setns: 268, clone3: 435,
		chmod:  []uint32{52, 53, 54, 55, 452},
		xattr:  []uint32{5, 6, 7, 14, 15, 16, 463, 466},
		ioctl:  29,
		sendto: 206, sendmsg: 211, sendmmsg: 269, setsockopt: 208, listen: 201,
	}
)

// seccompArches maps GOARCH to the native and the compat ABI the kernel
// runs on it.
var seccompArches = map[string][]seccompArch{
	"amd64": {
		{audit: auditArchX86_64, socket: 41, socketpair: 53, keys: []uint32{248, 249, 250}, fcntl: []uint32{72}, setsockopt: 54, x32: true, native: amd64Calls, pids: amd64Pids,
			// chmod, fchmod, fchmodat, fchmodat2, open, openat, creat, mknod, mknodat
			modes: []modeArg{{90, offArg1}, {91, offArg1}, {268, offArg2}, {452, offArg2}, {2, offArg2}, {257, offArg3}, {85, offArg1}, {133, offArg1}, {259, offArg2}}},
		{audit: auditArchI386, socket: 359, socketpair: 360, socketcall: 102, keys: []uint32{286, 287, 288}, fcntl: []uint32{55, 221}, setsockopt: 366, pids: i386Pids,
			modes: []modeArg{{15, offArg1}, {94, offArg1}, {306, offArg2}, {452, offArg2}, {5, offArg2}, {295, offArg3}, {8, offArg1}, {14, offArg1}, {297, offArg2}}},
	},
	"arm64": {
		{audit: auditArchAArch64, socket: 198, socketpair: 199, keys: []uint32{217, 218, 219}, fcntl: []uint32{25}, setsockopt: 208, native: arm64Calls, pids: arm64Pids,
			// fchmod, fchmodat, fchmodat2, openat, mknodat
			modes: []modeArg{{52, offArg1}, {53, offArg2}, {452, offArg2}, {56, offArg3}, {33, offArg2}}},
		{audit: auditArchARM, socket: 281, socketpair: 288, keys: []uint32{309, 310, 311}, fcntl: []uint32{55, 221}, setsockopt: 294, pids: armPids,
			modes: []modeArg{{15, offArg1}, {94, offArg1}, {333, offArg2}, {452, offArg2}, {5, offArg2}, {322, offArg3}, {8, offArg1}, {14, offArg1}, {324, offArg2}}},
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
	// With tcpOnly, no listening (listen(2) binds an unbound socket to
	// an ephemeral port of every address, past Landlock's BIND_TCP) and
	// no TCP Fast Open (a send with MSG_FASTOPEN connects without
	// connect(2), the only call Landlock's CONNECT_TCP sees).
	chmod bool // no chmod or chown: a server running as root owns the host's files
	// suid: no set-user-ID or set-group-ID bit set, by chmod or in a new
	// file's mode, and no openat2 (its mode is in memory; ENOSYS makes
	// the C library fall back to openat): a server running as root.
	suid  bool
	xattr bool // no extended attributes set or removed: Landlock does not cover them
	// pids: the calls that act on a process by pid, which the kernel
	// checks by uid alone, act on the caller only (pid 0): limits,
	// priorities, scheduling, affinity, I/O priority, page migration;
	// kcmp, process_madvise and process_mrelease are denied. Landlock
	// scopes signals and ptrace, not these.
	pids bool
	// fsFlags: of the file systems' ioctls, those that read only
	// (fsIoctlReads): Landlock lets a read-only descriptor set inode
	// flags, encryption policies, fs-verity and btrfs subvolumes.
	fsFlags bool
}

// landlockPolicy is the seccomp policy of the landlock backend.
func landlockPolicy(network, tcpOnly, root bool) seccompPolicy {
	return seccompPolicy{native: true, ipc: true, ns: true, xattr: true, noNet: !network, tcpOnly: network && tcpOnly, chmod: root, suid: root, pids: true, fsFlags: true}
}

// cloneNewFlags are the CLONE_NEW* bits of clone(2) and unshare(2).
const cloneNewFlags = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

const (
	eperm  = 1
	enosys = 38
)

// seccompFilter returns the filter as bwrap --seccomp reads it, for a
// server running as root or not: the raw struct sock_filter array. Any
// other architecture is denied every syscall, failing closed.
func seccompFilter(goarch string, root bool) ([]byte, error) {
	return buildSeccomp(goarch, bwrapPolicy(root))
}

// bwrapPolicy is the seccomp policy of the bubblewrap backend. Its pid
// namespace keeps the host's processes out of reach, but not the
// session agent, which shares it and the command's uid: the pid calls
// act on the caller only, on every ABI, as under landlock.
func bwrapPolicy(root bool) seccompPolicy {
	return seccompPolicy{suid: root, pids: true}
}

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
		// argIn: a call of nr whose argument at off (its low half) is one
		// of vals gets e; other calls of nr go on to the checks after it,
		// with the syscall number loaded again.
		argIn := func(nr uint32, off uint32, e uint32, vals ...uint32) {
			n := len(vals)
			body = append(body, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: nr, SkipTrue: uint8(n + 4)},
				bpf.LoadAbsolute{Off: off, Size: 4})
			for i, v := range vals {
				body = append(body, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: uint8(n - i + 1)})
			}
			body = append(body, bpf.LoadAbsolute{Off: offNr, Size: 4}, bpf.Jump{Skip: 1}, errno(e))
		}
		// argOnly: a call of nr whose argument at off (its low half) is
		// none of vals gets e; other calls of nr go on, as with argIn.
		argOnly := func(nr uint32, off uint32, e uint32, vals ...uint32) {
			n := len(vals)
			body = append(body, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: nr, SkipTrue: uint8(n + 3)},
				bpf.LoadAbsolute{Off: off, Size: 4})
			for i, v := range vals {
				body = append(body, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: uint8(n - i)})
			}
			body = append(body, errno(e), bpf.LoadAbsolute{Off: offNr, Size: 4})
		}
		// argBits: a call of nr with any of bits set in its argument at
		// off gets e.
		argBits := func(nr uint32, off uint32, e uint32, bits uint32) {
			body = append(body, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: nr, SkipTrue: 5},
				bpf.LoadAbsolute{Off: off, Size: 4},
				bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: bits, SkipTrue: 2},
				bpf.LoadAbsolute{Off: offNr, Size: 4}, bpf.Jump{Skip: 1}, errno(e))
		}
		// sockopt: setsockopt (number nr) of level with one of opts gets
		// EPERM; other calls of nr go on, as with argIn.
		sockopt := func(nr, level uint32, opts ...uint32) {
			n := len(opts)
			body = append(body, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: nr, SkipTrue: uint8(6 + n)},
				bpf.LoadAbsolute{Off: offArg1, Size: 4},
				bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: level, SkipTrue: uint8(1 + n)},
				bpf.LoadAbsolute{Off: offArg2, Size: 4})
			for i, o := range opts {
				body = append(body, bpf.JumpIf{Cond: bpf.JumpEqual, Val: o, SkipTrue: uint8(n - i + 1)})
			}
			body = append(body, bpf.LoadAbsolute{Off: offNr, Size: 4}, bpf.Jump{Skip: 1}, errno(eperm))
		}
		// Leases and directory notifications, on every backend.
		for _, nr := range a.fcntl {
			argIn(nr, offArg1, eperm, fSetLease, fNotify)
		}
		// setsockopt(fd, SOL_SOCKET, SO_REUSEPORT), on every backend:
		// with network on the command shares the host's network, and a
		// socket of the same uid with it binds beside a host listener
		// that set it too and takes a share of its connections (as root:
		// of every listener a root process opened, before it dropped its
		// privileges).
		sockopt(a.setsockopt, solSocket, soReusePort)
		if pol.suid {
			for _, m := range a.modes {
				argBits(m.nr, m.off, eperm, sIsuid|sIsgid)
			}
			denyNr(openat2, enosys)
		}
		// The pid calls act on the caller only (pid 0).
		pidRules := func(n *pidCalls) {
			for _, nr := range n.pid0 {
				argOnly(nr, offArg0, eperm, 0)
			}
			for _, nr := range []uint32{n.setpriority, n.getprio} {
				argOnly(nr, offArg0, eperm, prioProcess, prioPgrp)
				argOnly(nr, offArg1, eperm, 0)
			}
			for _, nr := range []uint32{n.ioprioSet, n.ioprioGet} {
				argOnly(nr, offArg0, eperm, ioprioWhoProcess, ioprioWhoPgrp)
				argOnly(nr, offArg1, eperm, 0)
			}
			for _, nr := range []uint32{n.kcmp, processMadvise, processMrelease} {
				denyNr(nr, eperm)
			}
		}
		if pol.pids && a.pids == nil {
			return nil, fmt.Errorf("no pid syscall numbers of %s's ABI %#x", goarch, a.audit)
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
			if pol.pids {
				pidRules(a.pids)
			}
			if pol.fsFlags {
				body = append(body, fsIoctls(n.ioctl)...)
			}
			if pol.tcpOnly {
				denyNr(n.listen, eperm)
				argBits(n.sendto, offArg3, eperm, msgFastOpen)
				argBits(n.sendmsg, offArg2, eperm, msgFastOpen)
				argBits(n.sendmmsg, offArg3, eperm, msgFastOpen)
				sockopt(n.setsockopt, ipprotoTCP, tcpFastOpen, tcpFastOpenConnect)
			}
			if pol.ns {
				denyNr(n.setns, eperm)
				// clone3 hides its flags in memory; ENOSYS makes the C
				// library fall back to clone, whose flags are seen.
				denyNr(n.clone3, enosys)
				denyNewNS(n.unshare)
				denyNewNS(n.clone)
			}
		} else if pol.ipc || pol.chmod || pol.xattr || pol.ns || pol.fsFlags || pol.tcpOnly {
			return nil, fmt.Errorf("no syscall numbers of %s for this policy", goarch)
		} else if pol.pids {
			pidRules(a.pids)
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
		// for routing; of the rest the internet families only; with
		// network off nothing else either; held to a proxy, TCP only
		// (protocol 0 or IPPROTO_TCP).
		other := []bpf.Instruction{
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: afInet, SkipTrue: 2},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: afInet6, SkipTrue: 1},
			deny,
			allow,
		}
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
		// Another ABI's calls jump over this one's body.
		prog = append(prog, bpf.LoadAbsolute{Off: offArch, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.audit, SkipTrue: 1},
			bpf.Jump{Skip: uint32(len(body))})
		prog = append(prog, body...)
	}
	prog = append(prog, deny)
	return prog, nil
}

// fsIoctls is the filter's test of ioctl (number nr) under fsFlags: a
// command of one of fsIoctlTypes passes only if it is one of
// fsIoctlReads, one of fsIoctlSetters never; other calls go on with the
// syscall number loaded.
func fsIoctls(nr uint32) []bpf.Instruction {
	nt, ns, nrd := len(fsIoctlTypes), len(fsIoctlSetters), len(fsIoctlReads)
	check := 3 + nt + 1 + ns + 2 // index of the reads' test
	deny := check + 1 + nrd
	ok, end := deny+1, deny+2
	b := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArg1, Size: 4},
		bpf.ALUOpConstant{Op: bpf.ALUOpShiftRight, Val: 8},
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xff},
	}
	for _, t := range fsIoctlTypes {
		b = append(b, bpf.JumpIf{Cond: bpf.JumpEqual, Val: t, SkipTrue: uint8(check - len(b) - 1)})
	}
	b = append(b, bpf.LoadAbsolute{Off: offArg1, Size: 4})
	for _, c := range fsIoctlSetters {
		b = append(b, bpf.JumpIf{Cond: bpf.JumpEqual, Val: c, SkipTrue: uint8(deny - len(b) - 1)})
	}
	b = append(b, bpf.LoadAbsolute{Off: offNr, Size: 4}, bpf.Jump{Skip: uint32(end - len(b) - 2)})
	b = append(b, bpf.LoadAbsolute{Off: offArg1, Size: 4})
	for _, c := range fsIoctlReads {
		b = append(b, bpf.JumpIf{Cond: bpf.JumpEqual, Val: c, SkipTrue: uint8(ok - len(b) - 1)})
	}
	b = append(b, bpf.RetConstant{Val: seccompRetErrno | eperm}, bpf.LoadAbsolute{Off: offNr, Size: 4})
	if len(b) != end {
		panic("fsIoctls: miscounted")
	}
	return append([]bpf.Instruction{bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: nr, SkipTrue: uint8(end)}}, b...)
}
