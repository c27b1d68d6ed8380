package jailfs

import (
	"path/filepath"
	"strings"
	"testing"
)

// A fuzz target over a jail's name. `go test` runs only its seeds (the
// f.Add calls and testdata/fuzz/FuzzValidName/); .ci/fuzz runs it with
// -fuzz.

// validNameSpec is ValidName's contract written out byte by byte, apart
// from the regular expression it is implemented with.
func validNameSpec(name string) bool {
	if len(name) < 1 || len(name) > 64 || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

func FuzzValidName(f *testing.F) {
	for _, s := range []string{
		"a", "s", "A-b_c.9", "...", ".hidden", "-", "_", "a.", ".a.", "..a", "a..",
		"", ".", "..", "./", "/", "a/b", "../x", "..\\x", "a\\b", "//",
		strings.Repeat("x", 64), strings.Repeat("x", 65), strings.Repeat(".", 64),
		"a\x00", "\x00", "a\n", "a\nb", " a", "a ", "ä", "\u2024\u2024", "\uff0e\uff0e", "a\u0338",
		"\xff", "a\xc0\xaf", "\u202e", "con",
	} {
		f.Add(s)
	}
	const base = "/project/.agent-home"
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidName(name)
		if want := validNameSpec(name); (err == nil) != want {
			t.Fatalf("ValidName(%q) = %v, want ok %t", name, err, want)
		}
		if err != nil {
			return
		}
		joined := filepath.Join(base, name)
		if strings.ContainsRune(name, filepath.Separator) || strings.ContainsRune(name, '/') {
			t.Fatalf("ValidName accepted %q, which holds a separator", name)
		}
		if filepath.Dir(joined) != base || filepath.Base(joined) != name || joined != base+string(filepath.Separator)+name {
			t.Fatalf("ValidName accepted %q, but Join(%s, it) = %s is not a direct child of the base", name, base, joined)
		}
	})
}
