package layer

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestParseGitConfig reads each text with git itself (git config --file)
// and with parseGitConfig: where git takes the file, both read the same
// hooks paths and includes; where git refuses it, so does the parser.
func TestParseGitConfig(t *testing.T) {
	texts := []string{
		"[core]\n\thooksPath = a\n",
		"\ufeff[core]\nhooksPath = bom\n",
		"[core] hooksPath = same-line\n",
		"[core]\n\thooksPath = a\\\nb\n",
		"[core]\n\thooksPath = \"a\\tb\" ; c\n",
		"[core]\nhooksPath = x # c\n",
		"[core]\nhooksPath = \"x # not c\"  \n",
		"[core]\r\nhooksPath = crlf\r\n",
		"[Core]\nHOOKSPATH   =   spaced   out  \n",
		"[core.sub]\nhooksPath = old-style\n",
		"[include]\npath = ../x\npath = y\n",
		"[includeIf \"gitdir:~/w/\"]\n\tpath = ~/x.inc\n",
		"[remote \"a\\\"b\"]\nurl = x\n[core]\nhooksPath=after\n",
		"[core\nhooksPath = h\n",
		"[core]\nhooksPath = \"unterminated\n",
		"[core]\nhooksPath = bad\\qescape\n",
		"hooksPath = nosection\n",
		"[core]\n\tbare\n\thooksPath = last",
	}
	dir := t.TempDir()
	for i, text := range texts {
		f := filepath.Join(dir, "c"+string(rune('a'+i)))
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		vars, err := parseGitConfig(text)
		for _, key := range []string{"core.hookspath", "include.path"} {
			out, gerr := exec.Command("git", "config", "--file", f, "--get-all", key).Output()
			gitOK := gerr == nil || exitCode(gerr) == 1 // 1: no such key
			switch {
			case !gitOK && err == nil:
				t.Errorf("%q: git refuses it (%v), the parser does not", text, gerr)
			case gitOK && err != nil:
				t.Errorf("%q: git takes it, the parser: %v", text, err)
			case gitOK:
				var want []string
				if len(out) > 0 {
					want = strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
				}
				var got []string
				for _, v := range vars {
					if v.section+"."+v.key == key && v.subsection == "" {
						got = append(got, v.value)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%q: %s = %q, git reads %q", text, key, got, want)
				}
			}
		}
	}
}

func exitCode(err error) int {
	if e, ok := err.(*exec.ExitError); ok {
		return e.ExitCode()
	}
	return -1
}
