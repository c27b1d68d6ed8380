package jail_test

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/net/bpf"
)

// filterHex renders a seccomp filter, a raw sock_filter array, one
// instruction a line: its bytes in hex, then the instruction, so that a
// change of policy reads as a change of program in review.
func filterHex(t *testing.T, filter []byte) string {
	t.Helper()
	if len(filter)%8 != 0 || len(filter) == 0 {
		t.Fatalf("filter of %d bytes is not a sock_filter array", len(filter))
	}
	var b strings.Builder
	for i := 0; i < len(filter); i += 8 {
		raw := bpf.RawInstruction{
			Op: binary.LittleEndian.Uint16(filter[i:]),
			Jt: filter[i+2], Jf: filter[i+3],
			K: binary.LittleEndian.Uint32(filter[i+4:]),
		}
		fmt.Fprintf(&b, "%x  %3d: %v\n", filter[i:i+8], i/8, raw.Disassemble())
	}
	return b.String()
}
