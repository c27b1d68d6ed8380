package tools

import (
	"slices"
	"strings"
	"testing"
)

// TestApprovalSealed: an approval's state opens only as this server
// sealed it; a changed path, digest or session, a state sealed with
// another key, or garbage, does not.
func TestApprovalSealed(t *testing.T) {
	a := approval{Session: "s", Paths: []string{"a.txt"}, Digest: "d1"}
	state := a.seal()
	if got, ok := openApproval(state); !ok || got.Session != "s" || !slices.Equal(got.Paths, a.Paths) || got.Digest != "d1" {
		t.Fatalf("open(seal): %+v %t", got, ok)
	}
	enc, mac, _ := strings.Cut(state, ".")
	forged := approval{Session: "s", Paths: []string{"a.txt", ".mcp.json"}, Digest: "d1"}.seal()
	fenc, _, _ := strings.Cut(forged, ".")
	for name, s := range map[string]string{
		"other body":  fenc + "." + mac,
		"other mac":   enc + "." + strings.Repeat("0", len(mac)),
		"no mac":      enc,
		"empty":       "",
		"not base64":  "!!!." + mac,
		"mac trimmed": enc + "." + mac[:len(mac)-2],
	} {
		if got, ok := openApproval(s); ok {
			t.Errorf("%s opened: %+v", name, got)
		}
	}
}
