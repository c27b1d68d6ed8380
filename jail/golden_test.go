package jail_test

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with the file at path, or rewrites it with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs (run go test -update if intended):\ngot:\n%s", path, got)
	}
}

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
