package layer

import (
	"errors"
	"testing"
)

func TestClean(t *testing.T) {
	tests := []struct {
		in, want string
		bad      bool
	}{
		{in: ".", want: "."},
		{in: "a/b", want: "a/b"},
		{in: "node_modules/", want: "node_modules"},
		{in: "", bad: true},
		{in: "/etc", bad: true},
		{in: "..", bad: true},
		{in: "a/../b", bad: true},
		{in: "a//b", bad: true},
		{in: "./a", bad: true},
		{in: "a\nb", bad: true},
		{in: "a\x00b", bad: true},
		{in: "evil\u202etxt.sh", bad: true}, // a bidi override
		{in: "a\u2028b", bad: true},         // a line separator
		{in: "a\u200bb", bad: true},         // a zero-width space
		{in: "bad\xffutf8", bad: true},
		{in: "caf\u00e9 menu", want: "caf\u00e9 menu"},
	}
	for _, tt := range tests {
		got, err := Clean(tt.in)
		if tt.bad != errors.Is(err, ErrBadPath) || !tt.bad && got != tt.want {
			t.Errorf("Clean(%q) = %q, %v", tt.in, got, err)
		}
	}
}

func TestProtected(t *testing.T) {
	tests := []struct {
		rel   string
		extra []string
		want  string
	}{
		{rel: "src/main.go"},
		{rel: ".git/hooks/pre-commit", want: ".git"},
		{rel: "sub/.GIT/config", want: ".git"},
		{rel: ".mcp.json", want: ".mcp.json"},
		{rel: ".claude/settings.json", want: ".claude"},
		{rel: "tools/hooks/pre-push", extra: []string{"tools/hooks"}, want: "tools/hooks"},
		{rel: "tools", extra: []string{"tools/hooks"}, want: "tools/hooks"}, // holds it
		{rel: "tools/other", extra: []string{"tools/hooks"}},
		{rel: "anything", extra: []string{"."}, want: "."},
		{rel: "."},
	}
	for _, tt := range tests {
		got, ok := Protected(tt.rel, tt.extra...)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("Protected(%q, %q) = %q, %v; want %q", tt.rel, tt.extra, got, ok, tt.want)
		}
	}
}

func TestShown(t *testing.T) {
	tests := []struct{ in, want string }{
		{"src/main.go", "src/main.go"},
		{"caf\u00e9", "caf\u00e9"},
		{"with space", "with space"},
		{"a\nb", `"a\nb"`},
		{"\x1b[31mred", `"\x1b[31mred"`},
		{"evil\u202etxt", `"evil\u202etxt"`},
		{"bad\xff", `"bad\xff"`},
		{`"quoted"`, `"\"quoted\""`},
		{`back\slash`, `back\slash`},
	}
	for _, tt := range tests {
		got := shown(tt.in)
		if got != tt.want {
			t.Errorf("shown(%q) = %s, want %s", tt.in, got, tt.want)
		}
		if back, err := unquote(got); err != nil || back != tt.in {
			t.Errorf("unquote(%s) = %q, %v", got, back, err)
		}
	}
}

func TestIgnorer(t *testing.T) {
	var ig ignorer
	ig.push(parseIgnore([]byte("secret\n"), nil)) // info/exclude
	ig.push(parseIgnore([]byte("# c\n\n*.log\r\n!keep.log\nbuild/\n/top.txt\n!secret\n"), nil))
	ig.push(parseIgnore([]byte("gen/\n!x.log\n"), []string{"src"}))
	tests := []struct {
		path string
		dir  bool
		want bool
	}{
		{"a.log", false, true},
		{"keep.log", false, false},
		{"build", true, true},
		{"build", false, false}, // a file named build
		{"top.txt", false, true},
		{"sub/top.txt", false, false},
		{"src/gen", true, true},
		{"gen", true, false},
		{"src/x.log", false, false}, // the deeper file wins
		{"src/y.log", false, true},
		{"secret", false, false}, // .gitignore beats info/exclude
		{"a/.git", true, true},
	}
	for _, tt := range tests {
		if got := ig.ignored(splitPath(tt.path), tt.dir); got != tt.want {
			t.Errorf("ignored(%q, dir %v) = %v", tt.path, tt.dir, got)
		}
	}
}
