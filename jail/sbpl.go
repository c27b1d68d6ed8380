package jail

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// SandboxExecPath is where macOS keeps sandbox-exec; it is never looked up
// in PATH, which a user or a project may have changed.
const SandboxExecPath = "/usr/bin/sandbox-exec"

// SandboxExecArgs returns the sandbox-exec arguments, without the program
// name, that run spec on macOS. It is pure so that the policy and the exact
// command line can be golden-tested on any OS.
//
// The profile is given inline (-p). The jail's real path reaches its file
// rules as the parameter JAIL (-D JAIL=...), a value the sandbox compares
// and never parses, and each writable directory of the project as
// WRITABLE_<i>; the unix-socket rules, whose address filters take a
// regex, hold the jail's as a regex-quoted, SBPL-escaped string literal.
// No path, whatever its quotes, spaces or newlines, can change the profile.
func SandboxExecArgs(spec Spec) []string {
	args := []string{"-p", SandboxProfile(spec), "-D", "JAIL=" + realPath(spec.Jail)}
	for i, w := range spec.Writable {
		args = append(args, "-D", writableParam(i)+"="+realPath(w.Path))
	}
	args = append(args, "--")
	return append(args, spec.Argv...)
}

// writableParam names the profile parameter of the i-th writable directory.
func writableParam(i int) string { return fmt.Sprintf("WRITABLE_%d", i) }

// realPath spells a path as macOS resolves it: /tmp, /var and /etc are
// symlinks into /private, and the sandbox compares resolved paths.
func realPath(p string) string {
	p = path.Clean(p)
	for _, link := range []string{"/tmp", "/var", "/etc"} {
		if p == link || strings.HasPrefix(p, link+"/") {
			return "/private" + p
		}
	}
	return p
}

// sbplString quotes s as an SBPL (Scheme) string literal: backslash and
// double quote escaped, control characters as \xHH escapes.
func sbplString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// sbplDevices are the devices a shell writes, besides the jail.
var sbplDevices = []string{"/dev/null", "/dev/zero", "/dev/dtracehelper", "/dev/ptmx", "/dev/tty"}

// sbplMachServices are the only mach services a command may look up: user
// and group lookups, logging, preferences, certificate trust, the temp-dir
// helper. LaunchServices (open), AppleEvents (osascript) and launchd job
// submission (launchctl) are not among them, so nothing a command does can
// start a process outside the sandbox.
var sbplMachServices = []string{
	"com.apple.system.opendirectoryd.libinfo",
	"com.apple.system.opendirectoryd.membership",
	"com.apple.system.logger",
	"com.apple.logd",
	"com.apple.diagnosticd",
	"com.apple.system.notification_center",
	"com.apple.cfprefsd.agent",
	"com.apple.cfprefsd.daemon",
	"com.apple.trustd.agent",
	"com.apple.SecurityServer",
	"com.apple.securityd.xpc",
	"com.apple.bsd.dirhelper",
}

// sbplDNSServices resolve names; looked up only with network on.
var sbplDNSServices = []string{
	"com.apple.SystemConfiguration.DNSConfiguration",
	"com.apple.SystemConfiguration.configd",
	"com.apple.networkd",
	"com.apple.dnssd.service",
}

// SandboxProfile is the SBPL profile of spec: deny by default, reads
// allowed, writes only in the jail (parameter JAIL), the writable
// directories of the project (WRITABLE_<i>) and a few devices.
func SandboxProfile(spec Spec) string {
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	list := func(kind string, items []string) string {
		parts := make([]string, len(items))
		for i, it := range items {
			parts[i] = "(" + kind + " " + sbplString(it) + ")"
		}
		return strings.Join(parts, " ")
	}
	jail := `(subpath (param "JAIL"))`
	sockets := "(path-regex " + sbplString("^"+regexp.QuoteMeta(realPath(spec.Jail))+"/") + ")"

	line("(version 1)")
	line("(deny default)")
	line("; processes: the command and what it starts; signals, process")
	line("; information and task ports only within this sandbox")
	line("(allow process-exec process-fork)")
	line("(allow signal (target same-sandbox))")
	line("(allow process-info* (target same-sandbox))")
	line("(allow mach-priv-task-port (target same-sandbox))")
	line("; reads are not confined (docs/security.md)")
	line("(allow file-read*)")
	line("; writes (contents, creation, removal, modes, owners, times,")
	line("; extended attributes): the jail, where TMPDIR is, and the devices")
	line("; a shell needs; not /private/tmp, not /private/var/folders")
	line("(allow file-write* %s)", jail)
	if len(spec.Writable) > 0 {
		line("; the project's directories commands write in place (--writable)")
		for i := range spec.Writable {
			line("(allow file-write* (subpath (param %s)))", sbplString(writableParam(i)))
		}
	}
	line("(allow file-write* %s (regex %s) (subpath %s))", list("literal", sbplDevices), sbplString(`^/dev/ttys[0-9]+$`), sbplString("/dev/fd"))
	line("(allow file-ioctl %s (regex %s))", list("literal", []string{"/dev/null", "/dev/tty", "/dev/ptmx"}), sbplString(`^/dev/ttys[0-9]+$`))
	line("(allow pseudo-tty)")
	line("(allow sysctl-read)")
	line("(allow user-preference-read)")
	line("(allow mach-lookup %s)", list("global-name", sbplMachServices))
	line("; unix sockets: only those inside the jail, never a host daemon's")
	line("; (docker, ssh-agent, gpg-agent)")
	line("(allow network-outbound (remote unix-socket %s))", sockets)
	line("(allow network-bind network-inbound (local unix-socket %s))", sockets)
	if spec.Network {
		line("; network on: IP both ways, and name resolution")
		line("(allow network-outbound (remote ip))")
		line("(allow network-inbound network-bind (local ip))")
		line("(allow system-socket)")
		line("(allow network-outbound (remote unix-socket (path-literal %s)))", sbplString("/private/var/run/mDNSResponder"))
		line("(allow mach-lookup %s)", list("global-name", sbplDNSServices))
	} else {
		line("; network off: no IP at all")
	}
	return b.String()
}
