package egress

import (
	"bytes"
	"testing"
)

// TestScrubberSplits: a value is replaced wherever reads split it, and
// text that only begins one is passed on whole.
func TestScrubberSplits(t *testing.T) {
	var s scrubber
	s.reset()
	s.add("sk-secret-0123456789", "sk-xxxxxx-9876543210")
	s.add("ghp_abcdefgh", "ghp_zyxwvuts")
	in := "a sk-secret-0123456789 b ghp_abcdefghsk-secret-0123456789 sk-secret-01 ghp_"
	want := "a sk-xxxxxx-9876543210 b ghp_zyxwvutssk-xxxxxx-9876543210 sk-secret-01 ghp_"
	for i := 0; i <= len(in); i++ {
		for j := i; j <= len(in); j++ {
			var out bytes.Buffer
			var held []byte
			for k, part := range []string{in[:i], in[i:j], in[j:]} {
				data := append(held, part...)
				h, _ := s.write(&out, data, k == 2)
				held = append([]byte(nil), data[len(data)-h:]...)
			}
			if out.String() != want {
				t.Fatalf("split at %d, %d: %q", i, j, out.String())
			}
		}
	}
}
