package jail_test

import (
	"fmt"
	"strings"
	"testing"
)

// filterHex renders a seccomp filter, a raw sock_filter array, one
// instruction a line in hex, for a golden file.
func filterHex(t *testing.T, filter []byte) string {
	t.Helper()
	if len(filter)%8 != 0 || len(filter) == 0 {
		t.Fatalf("filter of %d bytes is not a sock_filter array", len(filter))
	}
	var b strings.Builder
	for i := 0; i < len(filter); i += 8 {
		fmt.Fprintf(&b, "%x\n", filter[i:i+8])
	}
	return b.String()
}
