package auth

import (
	"strings"
	"testing"
)

// TestPlaceholderShape: a placeholder keeps the secret's prefix, length
// and character classes, differs from it and from another placeholder.
func TestPlaceholderShape(t *testing.T) {
	for _, secret := range []string{
		"sk-ant-oat01-AbCdEf0123456789_xyzXYZ-0123456789abcdefABCDEF",
		"ghp_0123456789abcdefABCDEF0123456789abcd",
		"github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
		"ya29.a0AfH6SMBx-abc.def_GHI",
		"AIzaSyA-0123456789abcdefghijklmnopqrstu",
		"plainsecretvalue123",
	} {
		p, err := Placeholder(secret)
		if err != nil {
			t.Fatalf("%q: %v", secret, err)
		}
		q, _ := Placeholder(secret)
		if p == secret || p == q || len(p) != len(secret) {
			t.Errorf("%q: placeholder %q (another %q)", secret, p, q)
		}
		for _, pre := range knownPrefixes {
			if strings.HasPrefix(secret, pre) {
				if !strings.HasPrefix(p, pre) {
					t.Errorf("%q: placeholder %q lost the prefix %q", secret, p, pre)
				}
				break
			}
		}
		for i := range secret {
			if class(secret[i]) != class(p[i]) {
				t.Errorf("%q: placeholder %q differs in kind at %d", secret, p, i)
				break
			}
		}
	}
	for _, weak := range []string{"short", "sk-ant-oat01-ab", "--------........"} {
		if _, err := Placeholder(weak); err == nil {
			t.Errorf("%q: a placeholder", weak)
		}
	}
}

func class(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return 1
	case c >= 'a' && c <= 'z':
		return 2
	case c >= 'A' && c <= 'Z':
		return 3
	}
	return int(c) + 4
}
