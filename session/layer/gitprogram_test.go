//go:build linux || darwin

package layer

import (
	"strings"
	"testing"
)

// TestProgramPaths: which variables name a program, and which of their
// values name one by a path (the first word, and the whole value as
// git runs one without the shell; "|" between).
func TestProgramPaths(t *testing.T) {
	for _, tt := range []struct {
		section, sub, key, value string
		want                     string
	}{
		{"core", "", "pager", "tools/pager -R", "tools/pager|tools/pager -R"},
		{"core", "", "pager", "less -R", ""},
		{"core", "", "fsmonitor", "true", ""},
		{"core", "", "fsmonitor", ".git/hooks/fsmonitor-watchman", ".git/hooks/fsmonitor-watchman"},
		{"core", "x", "pager", "tools/pager", ""}, // git reads no core.x.pager
		{"core", "", "hookspath", "hooks/x", ""},  // not a program: note records it
		{"core", "", "sshcommand", "'my tools/ssh' -v", "my tools/ssh|'my tools/ssh' -v"},
		{"core", "", "editor", `"./ed"`, `./ed|"./ed"`},
		{"core", "", "editor", `"./ed`, `"./ed`},
		{"core", "", "editor", "./ed;true", "./ed|./ed;true"},
		{"core", "", "askpass", "  \t./ask", "./ask"},
		{"gpg", "", "program", "/usr/bin/gpg2", "/usr/bin/gpg2"},
		{"gpg", "", "program", "my tools/gpg", "my tools/gpg"},
		{"gpg", "ssh", "program", "bin/ssh-keygen", "bin/ssh-keygen"},
		{"diff", "img", "textconv", "tools/exif", "tools/exif"},
		{"diff", "", "textconv", "tools/exif", ""},
		{"filter", "lfs", "process", "git-lfs filter-process", ""},
		{"filter", "x", "smudge", "./smudge %f", "./smudge|./smudge %f"},
		{"merge", "ours", "driver", "tools/merge %O %A %B", "tools/merge|tools/merge %O %A %B"},
		{"alias", "", "st", "!./scripts/st.sh --short", "./scripts/st.sh|./scripts/st.sh --short"},
		{"alias", "", "lg", "log -- a/b", ""},
		{"credential", "", "helper", "!tools/cred get", "tools/cred|tools/cred get"},
		{"credential", "https://x", "helper", "/opt/cred/helper", "/opt/cred/helper"},
		{"credential", "", "helper", "store --file a/b", ""},
		{"pager", "", "log", "./tools/pager", "./tools/pager"},
		{"pager", "", "log", "false", ""},
		{"submodule", "lib", "update", "!./up.sh", "./up.sh"},
		{"submodule", "lib", "update", "rebase", ""},
		{"browser", "mine", "cmd", "bin/open", "bin/open"},
		{"uploadpack", "", "packobjectshook", "./hook", "./hook"},
		{"remote", "origin", "uploadpack", "./up", "./up"},
		{"user", "", "name", "a/b", ""},
		{"interactive", "", "difffilter", "tools/df --color", "tools/df|tools/df --color"},
		{"core", "", "alternaterefscommand", "./alt", "./alt"},
		{"imap", "", "tunnel", "bin/tunnel host", "bin/tunnel|bin/tunnel host"},
		{"trailer", "sign", "command", "./who", "./who"},
		{"trailer", "sign", "cmd", "./who", "./who"},
		{"guitool", "lint", "cmd", "tools/lint", "tools/lint"},
		{"man", "mine", "path", "bin/man", "bin/man"},
		{"sendemail", "", "smtpserver", "smtp.example.org", ""},
		{"sendemail", "", "smtpserver", "tools/sendmail", "tools/sendmail"},
		{"sendemail", "work", "tocmd", "./to.sh", "./to.sh"},
	} {
		v := gitVar{tt.section, tt.sub, tt.key, tt.value}
		if got := strings.Join(programPaths(v), "|"); got != tt.want {
			t.Errorf("programPaths(%+v) = %q, want %q", v, got, tt.want)
		}
	}
}
