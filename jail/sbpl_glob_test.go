package jail

import (
	"path"
	"regexp"
	"strings"
	"testing"
)

// TestSBPLGlob checks each pattern's regex against path.Match on names
// made to tell them apart, with Go's regexp standing in for AppleMatch.
func TestSBPLGlob(t *testing.T) {
	names := []string{
		"", "a", "b", "ab", "abc", "a.b", "axb", "a-b", "a]b", "a[b", "a^b", `a\b`,
		"credentials", "credentials.toml", "credentials/x", "ssh_host_rsa_key",
		"ssh_host_ed25519_key", "ssh_host_key", "ssh_host_rsa_key.pub", "é", "aéb",
		"-", "]", "[", "^", `\`, "/", "x", "0", "9", ".", "a/b", "a*b", "a?b",
	}
	for _, tc := range []struct {
		pat, want string // want "" when malformed
	}{
		{"credentials*", `credentials[^/]*`},
		{"ssh_host_*_key", `ssh_host_[^/]*_key`},
		{"a?b", `a[^/]b`},
		{"a.b", `a\.b`},
		{`a\*b`, `a\*b`},
		{`a\?b`, `a\?b`},
		{"[ab]", `[ab]`},
		{"[a-c0-9]", `[a-c0-9]`},
		{"[^a]", `[^a/]`},
		{`a[\]\-]b`, `a(\]|-)b`},
		{`[\^]`, `\^`},
		{`[\\]`, `\\`},
		{`[^\]\\\[\^\-]`, `[^]/\\[^-]`},
		{"[!-0]", `([!-,.0]|-)`},
		{"[^!-0]", `[^!-,.0/-]`},
		{"[*?]", `[*?]`},
		{"[é]", `[é]`},
		{"*[", ""},
		{"[]", ""},
		{"[a", ""},
		{"[a-]", ""},
		{`a\`, ""},
		{"[/]", ""},
	} {
		re, ok := globRegex(tc.pat)
		if !ok {
			if tc.want != "" {
				t.Errorf("globRegex(%q): malformed, want %s", tc.pat, tc.want)
			}
			continue
		}
		if re != tc.want {
			t.Errorf("globRegex(%q) = %s, want %s", tc.pat, re, tc.want)
		}
		rx := regexp.MustCompile("^(" + re + ")$")
		for _, n := range names {
			m, err := path.Match(tc.pat, n)
			if err != nil {
				t.Fatalf("path.Match(%q): %v", tc.pat, err)
			}
			m = m && !strings.Contains(n, "/") // names have no slash
			if got := rx.MatchString(n); got != m {
				t.Errorf("%q: regex %s matches %q: %v, path.Match: %v", tc.pat, re, n, got, m)
			}
		}
	}
}
