package jail

import (
	"cmp"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
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
// writable directory of the project as WRITABLE_<i>, and the paths of the
// read rules (see SandboxProfile). The unix-socket rules, whose address
// filters take a regex, hold the jail's as a regex-quoted, SBPL-escaped
// string literal, and so do the rules of the deny list's patterns. No
// path, whatever its quotes, spaces or newlines, can change the profile.
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
// allowed but for the paths below, writes only in the jail (parameter
// JAIL), the writable directories of the project (WRITABLE_<i>) and a few
// devices.
//
// What no command reads (Spec.Unread) and other sessions' jails
// (Spec.Siblings) are denied by rules after the writes (sbplReads), whose
// paths are parameters too: UNREAD_<i> (the i-th of Spec.Unread, when not
// a pattern), SHOWN_<i> (the i-th of Spec.Visible, kept readable below
// them), SIBLINGS, and DIR_<n> for the directories on the way.
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
	reads := sbplReads(spec, &ps)
	sockets := "(path-regex " + sbplString("^"+regexp.QuoteMeta(realPath(spec.Jail))+"/") + ")"

	line("(version 1)")
	line("(deny default)")
	line("; processes: the command and what it starts; signals, process")
	line("; information and task ports only within this sandbox")
	line("(allow process-exec process-fork)")
	line("(allow signal (target same-sandbox))")
	line("(allow process-info* (target same-sandbox))")
	line("(allow mach-priv-task-port (target same-sandbox))")
	if len(reads) > 0 {
		line("; reads: all but what the rules after the writes deny")
	} else {
		line("; reads are not confined (docs/security.md)")
	}
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
	for _, r := range reads {
		line("%s", r)
	}
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

// sbplReads are the rules of what a command reads nothing of, after the
// writes. Among rules that filter what they match, SBPL's later matching
// rule wins, and a rule without a filter, (allow file-read*) above,
// undoes no filtered one in either order (Microsoft's mxc,
// docs/seatbelt/seatbelt-backend.md, measured in microsoft/mxc#754:
// deny then allow of one path allows, allow then deny refuses). So, in
// this order:
//   - each path of Spec.Unread is denied (read, written, run) and each
//     of Spec.Visible below one allowed again (read, run), shallower
//     paths first so that the deepest rule decides at every path; the
//     directories on the way to a shown path are looked up and stat'ed;
//   - in a directory written in place, the directories above a denied
//     path are not written (renamed, removed): the rules match paths, not
//     files, and a rename would take what they hold out of them;
//   - other sessions' jails (Spec.Siblings): nothing below their
//     directory is read or run; the directory is looked up and stat'ed,
//     not listed; its .gitignore is read;
//   - last the jail, read, written and run whatever above holds it.
//
// The profile allows no file-link (hard links) nor file-clone anywhere,
// so no command gives a denied file's data a path of its own.
func sbplReads(spec Spec, ps *sbplParams) []string {
	unread := unreadEntries(spec.Unread)
	jail := realPath(spec.Jail)
	siblings := ""
	if spec.Siblings != "" {
		if s := realPath(spec.Siblings); jail != s && Within(jail, s) {
			siblings = s
		}
	}
	if len(unread) == 0 && siblings == "" {
		return nil
	}
	r := &sbplReadRules{ps: ps, dirs: map[string]string{}}
	r.unread(unread, shownBelow(spec.Visible, unread))
	r.holders(unread, spec.Writable)
	if siblings != "" {
		r.siblings(siblings, jail)
	}
	r.rule("; the jail, whatever above holds it")
	r.rule(`(allow file-read* file-write* process-exec (subpath (param "JAIL")))`)
	return r.out
}

// sbplReadRules accumulates sbplReads' rules, and the parameters they
// name in ps.
type sbplReadRules struct {
	out  []string
	ps   *sbplParams
	dirs map[string]string // a directory's literal, by path
}

func (r *sbplReadRules) rule(format string, a ...any) {
	r.out = append(r.out, fmt.Sprintf(format, a...))
}

// literals are the (literal …) filters of paths, one parameter a
// directory however often it is named.
func (r *sbplReadRules) literals(paths []string) string {
	var parts []string
	for _, p := range paths {
		d, ok := r.dirs[p]
		if !ok {
			d = "(literal " + r.ps.add(fmt.Sprintf("DIR_%d", len(r.dirs)), p) + ")"
			r.dirs[p] = d
		}
		if !slices.Contains(parts, d) {
			parts = append(parts, d)
		}
	}
	return strings.Join(parts, " ")
}

// shownPath is what stays shown below a denied path, and the shallowest
// denied path above it: the directories from there on are looked up.
type shownPath struct {
	index     int // in spec.Visible
	path, top string
}

// shownBelow are the paths of visible that lie below a path of unread.
func shownBelow(visible []string, unread []unreadEntry) []shownPath {
	var shown []shownPath
	for i, v := range visible {
		rv := realPath(v)
		top := ""
		for _, e := range unread {
			if t, ok := e.top(rv); ok && t != rv && (top == "" || len(t) < len(top)) {
				top = t
			}
		}
		if top != "" {
			shown = append(shown, shownPath{i, rv, top})
		}
	}
	return shown
}

// unread denies each path of unread and allows again what is shown below
// one, shallower first and at one depth a denial before what is shown, so
// that the deepest rule decides; the directories on the way to a shown
// path are looked up and stat'ed.
func (r *sbplReadRules) unread(unread []unreadEntry, shown []shownPath) {
	type step struct {
		depth, order int
		deny         *unreadEntry
		shown        *shownPath
	}
	var steps []step
	names := map[int]string{}
	for i, e := range unread {
		steps = append(steps, step{depth: e.depth(), deny: &unread[i]})
		if e.pat == "" {
			names[e.index] = r.ps.add(fmt.Sprintf("UNREAD_%d", e.index), e.path)
		}
	}
	var way []string
	for i, v := range shown {
		steps = append(steps, step{depth: strings.Count(v.path, "/"), order: 1, shown: &shown[i]})
		way = append(way, v.top)
		way = append(way, dirsBetween(v.top, path.Dir(v.path))...)
	}
	slices.SortStableFunc(steps, func(a, b step) int {
		return cmp.Or(cmp.Compare(a.depth, b.depth), cmp.Compare(a.order, b.order))
	})
	if len(unread) > 0 {
		r.rule("; what no command reads (the deny list, the server's token): not")
		r.rule("; read, written nor run; what is shown below it read and run again,")
		r.rule("; the deepest rule last, and the directories on its way stat'ed")
	}
	for _, s := range steps {
		if v := s.shown; v != nil {
			r.rule("(allow file-read* process-exec (subpath %s))", r.ps.add(fmt.Sprintf("SHOWN_%d", v.index), v.path))
			continue
		}
		if e := s.deny; e.pat == "" {
			r.rule("(deny file-read* file-write* process-exec (subpath %s))", names[e.index])
		} else {
			at := "^" + regexp.QuoteMeta(strings.TrimSuffix(e.path, "/")+"/") + e.regex
			r.rule("(deny file-read* file-write* process-exec (regex %s) (regex %s))", sbplString(at+"$"), sbplString(at+"/"))
		}
	}
	if len(way) > 0 {
		r.rule("(allow file-read-metadata %s)", r.literals(way))
	}
}

// holders keeps, in a directory written in place, the directories above
// a denied path: a rename would take what they hold out of the rules.
func (r *sbplReadRules) holders(unread []unreadEntry, writable []WritableDir) {
	var fixed []string
	for _, e := range unread {
		last := e.path
		if e.pat == "" {
			last = path.Dir(e.path)
		}
		for _, w := range writable {
			fixed = append(fixed, dirsBetween(realPath(w.Path), last)...)
		}
	}
	if len(fixed) > 0 {
		r.rule("; in a directory written in place, what holds a denied path stays:")
		r.rule("; a rename would take it out of the rules above")
		r.rule("(deny file-write* %s)", r.literals(fixed))
	}
}

// siblings hides other sessions' jails: nothing below their directory is
// read or run; the directory, and those on the way to jail, are looked up
// and stat'ed, not listed; its .gitignore is read.
func (r *sbplReadRules) siblings(siblings, jail string) {
	r.rule("; other sessions' jails: their directory is looked up, not listed")
	r.rule("(deny file-read* process-exec (subpath %s))", r.ps.add("SIBLINGS", siblings))
	between := ""
	if d := dirsBetween(siblings, path.Dir(jail)); len(d) > 0 {
		between = " " + r.literals(d)
	}
	r.rule(`(allow file-read-metadata (literal (param "SIBLINGS"))%s)`, between)
	r.rule(`(allow file-read* (literal (string-append (param "SIBLINGS") %s)))`, sbplString("/.gitignore"))
}

// dirsBetween are the directories below top on the way to p, p included,
// shallowest first; none unless p lies strictly below top.
func dirsBetween(top, p string) []string {
	var out []string
	for ; p != top && Within(p, top); p = path.Dir(p) {
		out = append(out, p)
	}
	slices.Reverse(out)
	return out
}

// unreadEntry is a path of Spec.Unread as the profile denies it.
type unreadEntry struct {
	index int    // in Spec.Unread
	path  string // its real path; with a pattern, its directory's
	pat   string // the pattern of its last element, if it has one
	regex string // pat as a regex of one element
}

// unreadEntries are the absolute paths of unread. A last element that is
// not a well-formed pattern, or matches no name, is taken as the name.
func unreadEntries(unread []string) []unreadEntry {
	var out []unreadEntry
	for i, u := range unread {
		if !path.IsAbs(u) {
			continue
		}
		dir, base := path.Split(path.Clean(u))
		if isPattern(base) {
			if re, ok := globRegex(base); ok {
				out = append(out, unreadEntry{index: i, path: realPath(dir), pat: base, regex: re})
				continue
			}
		}
		out = append(out, unreadEntry{index: i, path: realPath(u)})
	}
	return out
}

// depth orders e among the rules: how many elements it has.
func (e unreadEntry) depth() int {
	if e.pat == "" {
		return strings.Count(e.path, "/")
	}
	return strings.Count(path.Join(e.path, "x"), "/")
}

// top returns the path of e that p is or lies below: e's path or, with
// a pattern, the element of its directory that matches it.
func (e unreadEntry) top(p string) (string, bool) {
	if e.pat == "" {
		return e.path, Within(p, e.path)
	}
	rest, ok := strings.CutPrefix(p, strings.TrimSuffix(e.path, "/")+"/")
	if !ok {
		return "", false
	}
	first, _, _ := strings.Cut(rest, "/")
	if m, _ := path.Match(e.pat, first); !m || first == "" {
		return "", false
	}
	return path.Join(e.path, first), true
}

// globRegex translates pat, a pattern (path.Match) of one path element,
// into an unanchored regex of that element: *, ? and classes match no
// slash, everything else is quoted. AppleMatch's dialect is not
// documented, so a class is written as POSIX and PCRE-style engines both
// read it: ']' first, '/' after the ranges, then a doubled backslash, '[',
// '^' and '-'; a class that is not negated and holds one of those is an
// alternation instead. ? and a class stand for one character: exact on
// ASCII names, and on others if AppleMatch reads characters, not bytes.
// ok is false when pat is malformed or a class of it matches no character
// of a name.
func globRegex(pat string) (re string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(pat); {
		switch pat[i] {
		case '*':
			b.WriteString("[^/]*")
			i++
		case '?':
			b.WriteString("[^/]")
			i++
		case '\\':
			if i+1 == len(pat) {
				return "", false
			}
			_, n := utf8.DecodeRuneInString(pat[i+1:])
			b.WriteString(regexp.QuoteMeta(pat[i+1 : i+1+n]))
			i += 1 + n
		case '[':
			class, n, ok := globClass(pat[i:])
			if !ok {
				return "", false
			}
			b.WriteString(class)
			i += n
		default:
			j := i + 1
			for j < len(pat) && !strings.ContainsRune(`*?\[`, rune(pat[j])) {
				j++
			}
			b.WriteString(regexp.QuoteMeta(pat[i:j]))
			i = j
		}
	}
	return b.String(), true
}

// globClass translates the class s starts with, n bytes of s.
func globClass(s string) (re string, n int, ok bool) {
	i := 1
	negated := i < len(s) && s[i] == '^'
	if negated {
		i++
	}
	var ranges [][2]rune
	for {
		if i < len(s) && s[i] == ']' && len(ranges) > 0 {
			i++
			break
		}
		lo, m, ok := globChar(s[i:])
		if !ok {
			return "", 0, false
		}
		i += m
		hi := lo
		if s[i] == '-' {
			if hi, m, ok = globChar(s[i+1:]); !ok {
				return "", 0, false
			}
			i += 1 + m
		}
		ranges = append(ranges, [2]rune{lo, hi})
	}
	// The characters that are special in one dialect or another, and
	// '/', leave the ranges; the others are written as they are.
	const special = `-/[\]^` // in ascending order
	var plain []string
	has := map[rune]bool{}
	span := func(lo, hi rune) {
		if lo == hi {
			plain = append(plain, string(lo))
		} else if lo < hi {
			plain = append(plain, string(lo)+"-"+string(hi))
		}
	}
	for _, r := range ranges {
		lo, hi := r[0], r[1]
		for _, c := range special {
			if c < lo || c > hi {
				continue
			}
			has[c] = c != '/'
			span(lo, c-1)
			lo = c + 1
		}
		span(lo, hi)
	}
	if negated {
		var b strings.Builder
		b.WriteString("[^")
		if has[']'] {
			b.WriteByte(']')
		}
		b.WriteString(strings.Join(plain, ""))
		b.WriteByte('/')
		for _, c := range []rune{'\\', '[', '^', '-'} {
			if has[c] {
				if c == '\\' {
					b.WriteByte('\\')
				}
				b.WriteRune(c)
			}
		}
		b.WriteByte(']')
		return b.String(), i, true
	}
	var alts []string
	if len(plain) > 0 {
		alts = append(alts, "["+strings.Join(plain, "")+"]")
	}
	for _, c := range []rune{']', '\\', '[', '^', '-'} {
		if has[c] {
			alts = append(alts, regexp.QuoteMeta(string(c)))
		}
	}
	switch len(alts) {
	case 0:
		return "", 0, false
	case 1:
		return alts[0], i, true
	}
	return "(" + strings.Join(alts, "|") + ")", i, true
}

// globChar reads one character of a class, n bytes of s, as path.Match
// does: escaped by a backslash or not, never a bare '-' or ']', and not
// the last byte of the pattern.
func globChar(s string) (r rune, n int, ok bool) {
	if s == "" || s[0] == '-' || s[0] == ']' {
		return 0, 0, false
	}
	if s[0] == '\\' {
		n = 1
	}
	r, m := utf8.DecodeRuneInString(s[n:])
	if r == utf8.RuneError && m <= 1 || n+m == len(s) {
		return 0, 0, false
	}
	return r, n + m, true
}
