package jail_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/jail"
)

// TestSandboxExecArgs pins the macOS profile and the exact sandbox-exec
// command line per case. No Mac runs in CI: these golden files are what
// would run there.
func TestSandboxExecArgs(t *testing.T) {
	base := jail.Spec{
		Argv:    []string{"/bin/sh", "-c", "echo ok"},
		Dir:     "/Users/u/project",
		Env:     []string{"HOME=/Users/u/project/.agent-home/s", "PATH=/usr/bin:/bin"},
		Jail:    "/Users/u/project/.agent-home/s",
		Network: true,
	}
	for _, tc := range []struct {
		name string
		edit func(*jail.Spec)
	}{
		{"sbpl_network_on", func(s *jail.Spec) {}},
		{"sbpl_network_off", func(s *jail.Spec) { s.Network = false }},
		{"sbpl_jail_in_tmp", func(s *jail.Spec) { s.Jail = "/tmp/p/.agent-home/s"; s.Dir = "/var/folders/x/p" }},
		{"sbpl_jail_path_quotes", func(s *jail.Spec) {
			s.Jail = "/Users/u/my \"quoted\" project (1)/.agent-home/a\\b;c"
		}},
		{"sbpl_jail_path_newline", func(s *jail.Spec) {
			s.Jail = "/Users/u/new\nline\")(allow file-write* (subpath \"/\"))/.agent-home/s"
		}},
		{"sbpl_argv_dash", func(s *jail.Spec) { s.Argv = []string{"-p", "(allow default)", "--", "-D"} }},
		{"sbpl_writable", func(s *jail.Spec) {
			s.Writable = []jail.WritableDir{{Path: "/Users/u/project/node_modules"}, {Path: "/Users/u/project/we\"ird\n)(allow default)"}, {Path: "/tmp/p/build"}}
		}},
		// The deny list: directories, files, patterns; what stays shown
		// below a denied directory, and the project, which is not below one.
		{"sbpl_deny_read", func(s *jail.Spec) {
			s.Unread = []string{
				"/Users/u/.ssh", "/Users/u/.netrc", "/Users/u/.config/gh/hosts.yml",
				"/etc/shadow", "/etc/ssh/ssh_host_*_key", "/Users/u/.cargo/credentials*",
			}
			s.Visible = []string{"/Users/u/project", "/Users/u/.ssh/known_hosts", "/Users/u/.ssh/config"}
		}},
		// Deeper rules last: a denied path below a shown one stays denied,
		// and so does a shown path's neighbour matched by a class.
		{"sbpl_deny_read_nested", func(s *jail.Spec) {
			s.Unread = []string{"/Users/u/.config/gh/hosts.yml", "/Users/u/.config", "/Users/u/.aws/[^c]*"}
			s.Visible = []string{"/Users/u/.config/gh", "/Users/u/.aws/config/x", "/Users/u/.aws/keys/x"}
		}},
		// Paths are parameters; a pattern's directory is in a quoted regex.
		{"sbpl_deny_read_quotes", func(s *jail.Spec) {
			s.Unread = []string{
				"/Users/u/we\"ird\n)(allow default)/secret",
				"/Users/u/we\"ird\n)(allow file-read*)/tok?n*[\\\\\"]",
			}
			s.Visible = []string{"/Users/u/we\"ird\n)(allow default)/secret/shown \"(x)\""}
		}},
		// In a directory written in place, the directories above a denied
		// path are not renamed: what they hold would leave its rule.
		{"sbpl_deny_read_writable", func(s *jail.Spec) {
			s.Writable = []jail.WritableDir{{Path: "/Users/u/project/node_modules"}}
			s.Unread = []string{"/Users/u/project/node_modules/pkg/lib/.token", "/Users/u/project/node_modules/.cache/keys/*.pem", "/Users/u/project/node_modules/.npmrc"}
		}},
		// Other sessions' jails: their directory is looked up, not listed.
		{"sbpl_siblings", func(s *jail.Spec) { s.Siblings = "/Users/u/project/.agent-home" }},
		// A jail deeper in it: the directories on its way are looked up.
		{"sbpl_siblings_deeper", func(s *jail.Spec) {
			s.Siblings = "/Users/u/project/.agent-home"
			s.Jail = "/Users/u/project/.agent-home/a/b/s"
		}},
		// A project in /tmp: every path as macOS resolves it.
		{"sbpl_siblings_in_tmp", func(s *jail.Spec) {
			s.Jail = "/tmp/p/.agent-home/s"
			s.Dir = "/tmp/p"
			s.Siblings = "/tmp/p/.agent-home"
			s.Unread = []string{"/var/root/.ssh", "/tmp/p/.agent-home/token", "/etc/ssh/ssh_host_*_key"}
			s.Visible = []string{"/tmp/p", "/var/root/.ssh/known_hosts"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := base
			tc.edit(&spec)
			args := jail.SandboxExecArgs(spec)
			profile := jail.SandboxProfile(spec)
			var b strings.Builder
			b.WriteString("argv (the profile as <profile>):\n")
			b.WriteString(strconv.Quote(jail.SandboxExecPath) + "\n")
			for _, a := range args {
				if a == profile {
					a = "<profile>"
				}
				b.WriteString(strconv.Quote(a) + "\n")
			}
			b.WriteString("\nprofile:\n" + profile)
			golden(t, filepath.Join("testdata", tc.name+".golden"), b.String())
			// The jail's path is in the profile only as the escaped
			// socket regex: every line still parses as the rules above,
			// one form per line.
			for _, l := range strings.Split(strings.TrimSpace(profile), "\n") {
				if !strings.HasPrefix(l, "(") && !strings.HasPrefix(l, ";") {
					t.Errorf("profile line %q is not a rule or a comment: a path broke out", l)
				}
			}
			// The command follows "--" untouched.
			if i := len(args) - len(spec.Argv); i < 1 || args[i-1] != "--" {
				t.Errorf("argv %q does not end with -- and the command", args)
			}
		})
	}
}

func TestSBPLString(t *testing.T) {
	for in, want := range map[string]string{
		`/plain/path`:       `"/plain/path"`,
		`with space`:        `"with space"`,
		`a"quote`:           `"a\"quote"`,
		`back\slash`:        `"back\\slash"`,
		"new\nline\ttab":    `"new\nline\ttab"`,
		"bell\x07del\x7f":   `"bell\x07del\x7f"`,
		`")(allow default)`: `"\")(allow default)"`,
	} {
		if got := jail.SBPLString(in); got != want {
			t.Errorf("sbplString(%q) = %s, want %s", in, got, want)
		}
	}
}
