//go:build linux || darwin

package layer

import (
	"path/filepath"
	"slices"
	"strings"
)

// The variables whose value is a command git runs, from the top of the
// working tree: through the shell for most (by execvp when it has no
// shell syntax), as one program's path for some (gpg.program). A program of the project named there is as much git's
// to run as a hook: an apply must not write it.

// programKeys are those taken without a subsection, by section.key.
var programKeys = map[string]bool{
	"core.fsmonitor": true, "core.pager": true, "core.editor": true,
	"core.sshcommand": true, "core.askpass": true, "core.gitproxy": true,
	"sequence.editor": true, "gpg.program": true, "diff.external": true,
	"web.browser": true, "uploadpack.packobjectshook": true,
	"interactive.difffilter": true, "core.alternaterefscommand": true,
	"imap.tunnel": true, "instaweb.httpd": true,
	// send-email's: an smtpServer that is a path is a program.
	"sendemail.smtpserver": true, "sendemail.sendmailcmd": true,
	"sendemail.tocmd": true, "sendemail.cccmd": true, "sendemail.headercmd": true,
}

// driverKeys are those of a named driver or tool, section.<name>.key.
var driverKeys = map[string]bool{
	"gpg.program": true, "gpg.defaultkeycommand": true,
	"diff.textconv": true, "diff.command": true,
	"filter.clean": true, "filter.smudge": true, "filter.process": true,
	"merge.driver": true, "browser.cmd": true, "browser.path": true,
	"mergetool.cmd": true, "mergetool.path": true,
	"difftool.cmd": true, "difftool.path": true,
	"remote.uploadpack": true, "remote.receivepack": true,
	"trailer.command": true, "trailer.cmd": true,
	"guitool.cmd": true, "man.cmd": true, "man.path": true,
	// send-email's identities: sendemail.<identity>.tocmd.
	"sendemail.smtpserver": true, "sendemail.sendmailcmd": true,
	"sendemail.tocmd": true, "sendemail.cccmd": true, "sendemail.headercmd": true,
}

// programPaths are the paths of the program v makes git run, when v is a
// variable that names one: its first word as the shell reads it, and
// the whole value as git runs one without the shell, each when it is a
// path (holds a "/"); relative, it is taken from the top of the working
// tree, as git runs it. None for any other variable, nor for a bare
// name (less, vim), which is looked up in PATH, not in the project.
// core.fsmonitor's or a pager.<cmd>'s boolean is a bare word too.
func programPaths(v gitVar) []string {
	cmd := v.value
	key := v.section + "." + v.key
	switch {
	case v.section == "alias", key == "submodule.update":
		// Only a "!" value is a shell command; another is git's own.
		c, ok := strings.CutPrefix(cmd, "!")
		if !ok {
			return nil
		}
		cmd = c
	case key == "credential.helper":
		// "!" runs the rest in the shell, an absolute path runs as
		// written, and a name is git's credential-<name>.
		if c, ok := strings.CutPrefix(cmd, "!"); ok {
			cmd = c
		} else if !filepath.IsAbs(cmd) {
			return nil
		}
	case v.section == "pager" && v.subsection == "":
	case v.subsection == "" && programKeys[key], v.subsection != "" && driverKeys[key]:
	default:
		return nil
	}
	var out []string
	for _, p := range []string{firstWord(cmd), strings.TrimSpace(cmd)} {
		if strings.Contains(p, "/") && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// firstWord is the program a shell command line starts with: its first
// word, up to a blank or an operator, one level of quotes taken off. Only
// that word: "sh ./x" names sh, not ./x.
func firstWord(cmd string) string {
	cmd = strings.TrimLeft(cmd, " \t\n")
	if cmd != "" && (cmd[0] == '\'' || cmd[0] == '"') {
		if end := strings.IndexByte(cmd[1:], cmd[0]); end >= 0 {
			return cmd[1 : 1+end]
		}
		return "" // the shell fails on an unclosed quote
	}
	if i := strings.IndexAny(cmd, " \t\n;&|<>()"); i >= 0 {
		return cmd[:i]
	}
	return cmd
}
