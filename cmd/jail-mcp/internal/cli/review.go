package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/dustin/go-humanize"

	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session"
	"github.com/jail-mcp/jail-mcp/session/layer"
	"github.com/jail-mcp/jail-mcp/session/ledger"
	"github.com/jail-mcp/jail-mcp/tools/result"
)

// Exit statuses of jail-mcp diff, apply and discard: 0 done (or nothing
// to do), 1 refused, 2 bad use (UsageError).
const exitReviewRefused = 1

// reviewVerbs are the sub-commands of a person's review, each with its
// synopsis.
var reviewVerbs = map[string]string{
	"diff":    "jail-mcp diff [--session NAME] [--patch] [--all] [--json]",
	"apply":   "jail-mcp apply [--session NAME] [--dry-run] [--json] [PATH...]",
	"discard": "jail-mcp discard [--session NAME] [--json] [PATH...]",
}

// reviewFlags are the flags of a review: where the project and its jails
// are, the session, and what bounds an apply or shapes a patch as the
// server's own would (--writable, --deny-read, --max-disk).
var reviewFlags = []string{"project", "root", "session", "writable", "deny-read", "max-disk", "log-level"}

// review is "jail-mcp diff", "jail-mcp apply" and "jail-mcp discard": a
// person reviews, applies or drops a session's project changes from the
// command line, through the code of jail_diff, jail_apply and
// jail_discard (session.Diff, Apply, Discard). Without --session it lists
// the project's sessions whose changes were not applied, and chooses
// none. Reading works beside a server that holds the session; a change
// of its layer is refused then, naming the server.
func review(verb string, args []string, environ []string, getenv func(string) string, stdout, stderr io.Writer) error {
	flags := NewFlagSet(verb)
	var skip []string
	for _, o := range options {
		if !slices.Contains(reviewFlags, o.flag) {
			skip = append(skip, o.flag)
		}
	}
	rc := BindConfig(flags, getenv, skip...)
	var patch, all, dryRun bool
	switch verb {
	case "diff":
		flags.BoolVar(&patch, "patch", false, "print the unified patch of the text files changed, and both sides of a conflict")
		flags.BoolVar(&all, "all", false, "list the files under directories .gitignore ignores one by one")
	case "apply":
		flags.BoolVar(&dryRun, "dry-run", false, "say what would be written, and what refused; write nothing")
	}
	asJSON := flags.Bool("json", false, "print the result as JSON, as the tool's structured result")
	if err := ParseFlags(flags, args, reviewVerbs[verb], stdout); err != nil {
		return err
	}
	paths := flags.Args()
	if verb == "diff" && len(paths) > 0 {
		return UsageError("diff: unexpected argument %q (diff takes no paths)", paths[0])
	}
	cfg, err := rc.Parse(flags)
	if err != nil {
		return UsageError("%v", err)
	}
	level := cfg.LogLevel
	if rc.set["log-level"] == "" {
		// What it did is its output: the log says only what went wrong.
		level = slog.LevelWarn
	}
	log := NewLogger(stderr, level)
	if _, err := os.Lstat(cfg.Root); errors.Is(err, fs.ErrNotExist) {
		if cfg.Session != "" {
			return &exitError{code: exitReviewRefused, msg: fmt.Sprintf("no session %s: %s holds no jails", cfg.Session, cfg.Root)}
		}
		fmt.Fprintf(stdout, "no session of %s holds changes not applied: %s holds no jails\n", cfg.Project, cfg.Root)
		return nil
	}
	home := serverHome(getenv)
	deny, err := denyList(cfg, home, getenv)
	if err != nil {
		return UsageError("%v", err)
	}
	m, err := session.New(session.Config{
		Project: cfg.Project, Root: cfg.Root, Writable: cfg.Writable, Deny: deny, Home: home, Environ: environ,
		MaxDisk: cfg.MaxDisk, Logger: log, Overlay: true, Review: true,
		Backend: jail.Refusing{Err: &jail.UnavailableError{Backend: "review", Reason: "jail-mcp " + verb + " runs no command"}},
	})
	if err != nil {
		return &exitError{code: exitReviewRefused, msg: err.Error()}
	}
	defer m.Close()
	if cfg.Session == "" {
		return listUnapplied(m, verb, *asJSON, stdout)
	}
	s, err := m.OpenReview(cfg.Session, verb != "diff")
	if err != nil {
		return &exitError{code: exitReviewRefused, msg: err.Error()}
	}
	defer s.Close()
	switch verb {
	case "diff":
		return reviewDiff(s, layer.Options{Patch: patch, All: all}, *asJSON, stdout)
	case "apply":
		return reviewApply(s, paths, dryRun, *asJSON, stdout)
	default:
		return reviewDiscard(s, paths, *asJSON, stdout)
	}
}

// listUnapplied lists the sessions whose layers hold changes not
// applied: the answer of a diff without --session, and for an apply or
// a discard a bad use when there is any (none is chosen for the person).
func listUnapplied(m *session.Manager, verb string, asJSON bool, stdout io.Writer) error {
	list, err := m.Unapplied()
	if err != nil {
		return &exitError{code: exitReviewRefused, msg: err.Error()}
	}
	project := m.Config().Project
	switch {
	case asJSON:
		if list == nil {
			list = []session.Unapplied{}
		}
		if err := writeJSON(stdout, list); err != nil {
			return err
		}
	case len(list) == 0:
		fmt.Fprintf(stdout, "no session of %s holds changes not applied\n", project)
	default:
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SESSION\tLAST USED\tCHANGES")
		for _, u := range list {
			changes := layer.Plural(u.Paths, "path")
			if u.Ignored > 0 {
				changes += ", " + layer.Plural(u.Ignored, "ignored file")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", u.Session, humanize.Time(u.LastUsed), changes)
		}
		tw.Flush()
	}
	if verb == "diff" || len(list) == 0 {
		return nil
	}
	return UsageError("%s: name the session with --session (jail-mcp diff --session NAME shows its changes)", verb)
}

// reviewDiff prints what session s's layer changes in the project.
func reviewDiff(s *session.Session, opt layer.Options, asJSON bool, stdout io.Writer) error {
	d, err := s.Diff(opt)
	if err != nil {
		return &exitError{code: exitReviewRefused, msg: err.Error()}
	}
	out := result.NewDiff(s, d)
	if asJSON {
		return writeJSON(stdout, out)
	}
	var b strings.Builder
	if len(out.Changes) == 0 && len(out.Ignored) == 0 {
		fmt.Fprintf(&b, "session %s changes nothing in the project\n", s.Name)
	} else {
		fmt.Fprintf(&b, "session %s changes %s of the project", s.Name, layer.Plural(len(out.Changes), "path"))
		if n := ignoredFiles(out.Ignored); n > 0 {
			fmt.Fprintf(&b, ", and %s under %s that .gitignore ignores (--all lists them)", layer.Plural(n, "file"), layer.Plural(len(out.Ignored), "path"))
		}
		fmt.Fprintf(&b, "; jail-mcp apply --session %s [PATH...] writes them to the project\n", s.Name)
	}
	for _, c := range out.Changes {
		b.WriteString(c.Line() + "\n")
	}
	for _, sum := range out.Ignored {
		fmt.Fprintf(&b, "%s %s: %s, %s (ignored)\n", layer.Letter(sum.Change), sum.Dir, layer.Plural(sum.Files, "file"), humanize.IBytes(uint64(sum.Bytes)))
	}
	for _, c := range out.Conflicts {
		b.WriteString(conflictLine(s.Name, c) + "\n")
	}
	if opt.Patch {
		patch := out.Patch
		for _, c := range out.Changes {
			if c.ConflictPatch != "" {
				patch += "--- " + c.ConflictPatch
			}
		}
		if isTerminal(stdout) {
			// What a command wrote, on the person's terminal: its escape
			// sequences are shown, never run (a title, the clipboard, a
			// line of this listing moved or hidden).
			patch = visible(patch)
		}
		b.WriteString(patch)
	}
	_, err = io.WriteString(stdout, b.String())
	return err
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// visible is s with every control character but tab and newline, every
// format character (a bidi override) and every byte that is not UTF-8
// written as its escape (\x1b, \u202e), as Go quotes them.
func visible(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r == '\t' || r == '\n':
			b.WriteRune(r)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// conflictLine says what a conflict of session name is, and what to do.
func conflictLine(name string, c ledger.Conflict) string {
	return fmt.Sprintf("conflict: the host %s %s after session %s copied it; apply refuses it (jail-mcp diff --patch shows both sides; jail-mcp discard --session %s %s takes the host's)",
		layer.HostDid(c.Host), c.Path, name, name, c.Path)
}

// ignoredFiles is how many files the summaries count.
func ignoredFiles(sums []layer.Summary) int {
	n := 0
	for _, s := range sums {
		n += s.Files
	}
	return n
}

// reviewApply writes the changes of session s's layer at paths (all of
// them when none is given) to the project: all or, refused, none.
func reviewApply(s *session.Session, paths []string, dryRun, asJSON bool, stdout io.Writer) error {
	if len(paths) == 0 {
		// Everything: nothing to do when every change is one no apply
		// writes (a protected path's copy, which jail_reset drops).
		d, err := s.Diff(layer.Options{All: true})
		if err != nil {
			return &exitError{code: exitReviewRefused, msg: err.Error()}
		}
		if !slices.ContainsFunc(d.Changes, func(c layer.Change) bool { _, p := layer.Protected(c.Path); return !p }) {
			return printApply(stdout, result.NewApply(s.Name, &layer.Applied{DryRun: dryRun, Digest: d.Digest}), asJSON, nil)
		}
		paths = []string{"."}
	}
	a, err := s.Apply(paths, dryRun)
	if err != nil && (a == nil || len(a.Changes) == 0) {
		return &exitError{code: exitReviewRefused, msg: err.Error()}
	}
	return printApply(stdout, result.NewApply(s.Name, a), asJSON, err)
}

// printApply prints an apply's result out, which err stopped halfway
// when set, and gives the exit status.
func printApply(stdout io.Writer, out result.Apply, asJSON bool, err error) error {
	if asJSON {
		if werr := writeJSON(stdout, out); werr != nil {
			return werr
		}
	} else {
		writeApply(stdout, out)
	}
	switch {
	case err != nil:
		// Stopped halfway: what was written is listed, and stays.
		return &exitError{code: exitReviewRefused, msg: fmt.Sprintf("%v (the apply stopped after writing %s)", err, layer.Plural(len(out.Applied), "change"))}
	case len(out.Refused) > 0:
		return &exitError{code: exitReviewRefused, msg: fmt.Sprintf("refused %s: nothing was written to the project", layer.Plural(len(out.Refused), "path"))}
	}
	return nil
}

// writeApply prints an apply's result.
func writeApply(w io.Writer, a result.Apply) {
	var b strings.Builder
	switch {
	case len(a.Refused) > 0:
		for _, r := range a.Refused {
			fmt.Fprintf(&b, "refused %s: %s\n", r.Path, r.Reason)
		}
	case len(a.Applied) == 0:
		fmt.Fprintf(&b, "nothing to apply: session %s changes nothing there\n", a.Session)
	case a.DryRun:
		fmt.Fprintf(&b, "dry run: would apply %s to the project; nothing was written\n", layer.Plural(len(a.Applied), "change"))
	default:
		fmt.Fprintf(&b, "applied %s to the project; they left session %s's layer\n", layer.Plural(len(a.Applied), "change"), a.Session)
	}
	for _, c := range a.Applied {
		b.WriteString(c.Line() + "\n")
	}
	io.WriteString(w, b.String())
}

// reviewDiscard drops session s's copies at paths, or of every change
// when none is given, so that commands see the host's entries there.
func reviewDiscard(s *session.Session, paths []string, asJSON bool, stdout io.Writer) error {
	if len(paths) == 0 {
		d, err := s.Diff(layer.Options{All: true})
		if err != nil {
			return &exitError{code: exitReviewRefused, msg: err.Error()}
		}
		for _, c := range d.Changes {
			// A protected path's copy stays (jail_reset drops it).
			if _, p := layer.Protected(c.Path); !p {
				paths = append(paths, c.Path)
			}
		}
		if len(paths) == 0 {
			fmt.Fprintf(stdout, "nothing to discard: session %s changes nothing in the project\n", s.Name)
			return nil
		}
	}
	dropped, err := s.Discard(paths)
	out := result.Discard{Session: s.Name, Discarded: append([]string{}, dropped...)}
	if asJSON {
		if werr := writeJSON(stdout, out); werr != nil {
			return werr
		}
	} else if len(dropped) > 0 {
		fmt.Fprintf(stdout, "dropped session %s's copy of %s: commands see the host's\n%s\n", s.Name, layer.Plural(len(dropped), "path"), strings.Join(dropped, "\n"))
	}
	if err != nil {
		return &exitError{code: exitReviewRefused, msg: err.Error()}
	}
	return nil
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
