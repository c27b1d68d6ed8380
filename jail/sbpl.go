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
// The profile is given inline (-p). Each path of spec that a file rule
// names reaches the profile as a parameter (-D NAME=path), a value the
// sandbox compares and never parses: the jail's real path as JAIL, each
// writable directory of the project as WRITABLE_<i>. The unix-socket
// rules, whose address filters take a regex, hold the jail's as a
// regex-quoted, SBPL-escaped string literal. No path, whatever its
// quotes, spaces or newlines, can change the profile.
func SandboxExecArgs(spec Spec) []string {
	profile, params := sandboxProfile(spec)
	args := []string{"-p", profile}
	for _, p := range params {
		args = append(args, "-D", p.name+"="+p.value)
	}
	args = append(args, "--")
	return append(args, spec.Argv...)
}

// sbplParam is a parameter of the profile: a path it names.
type sbplParam struct{ name, value string }

// sbplParams are a profile's parameters, in the order they are named.
type sbplParams []sbplParam

// add names value as the parameter name and returns the SBPL that reads it.
func (ps *sbplParams) add(name, value string) string {
	*ps = append(*ps, sbplParam{name, value})
	return "(param " + sbplString(name) + ")"
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
	profile, _ := sandboxProfile(spec)
	return profile
}

// sandboxProfile is the profile of spec and the parameters it reads, in
// the order they are passed.
func sandboxProfile(spec Spec) (string, sbplParams) {
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	list := func(kind string, items []string) string {
		parts := make([]string, len(items))
		for i, it := range items {
			parts[i] = "(" + kind + " " + sbplString(it) + ")"
		}
		return strings.Join(parts, " ")
	}
	var ps sbplParams
	jail := "(subpath " + ps.add("JAIL", realPath(spec.Jail)) + ")"
	writable := make([]string, len(spec.Writable))
	for i, w := range spec.Writable {
		writable[i] = "(subpath " + ps.add(writableParam(i), realPath(w.Path)) + ")"
	}
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
	if len(writable) > 0 {
		line("; the project's directories commands write in place (--writable)")
		for _, w := range writable {
			line("(allow file-write* %s)", w)
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
	return b.String(), ps
}
