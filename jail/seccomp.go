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
}

// seccompArches maps GOARCH to the native and the compat ABI the kernel
// runs on it.
var seccompArches = map[string][]seccompArch{
	"amd64": {{audit: auditArchX86_64, socket: 41, x32: true}, {audit: auditArchI386, socket: 359, socketcall: 102}},
	"arm64": {{audit: auditArchAArch64, socket: 198}, {audit: auditArchARM, socket: 281}},
}

// seccompFilter returns the filter as bwrap --seccomp reads it: the raw
// struct sock_filter array. Any other architecture is denied every
// syscall, failing closed.
func seccompFilter(goarch string) ([]byte, error) {
	arches, ok := seccompArches[goarch]
	if !ok {
		return nil, fmt.Errorf("no seccomp filter for %s", goarch)
	}
	deny := bpf.RetConstant{Val: seccompRetErrno | eacces}
	allow := bpf.RetConstant{Val: seccompRetAllow}
	var prog []bpf.Instruction
	for _, a := range arches {
		// Per arch: [ld arch; jne next] ld nr; [x32: jge deny]; [socketcall:
		// jeq deny]; jne allow; ld arg0; jeq AF_UNIX deny; ret allow.
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
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.socket, SkipFalse: 3},
			bpf.LoadAbsolute{Off: offArg0, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: afUnix, SkipTrue: 1},
			deny,
			allow,
		)
		prog = append(prog, bpf.LoadAbsolute{Off: offArch, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.audit, SkipFalse: uint8(len(body))})
		prog = append(prog, body...)
	}
	prog = append(prog, deny)
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
