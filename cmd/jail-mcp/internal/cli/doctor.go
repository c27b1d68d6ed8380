package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session"
	"github.com/jail-mcp/jail-mcp/session/limits"
)

// DoctorReport is what "jail-mcp doctor --json" prints.
type DoctorReport struct {
	Backends   []jail.Report    `json:"backends"`
	Selected   string           `json:"selected"`
	Confined   bool             `json:"confined"`
	Reason     string           `json:"reason,omitempty"`
	Hint       string           `json:"hint,omitempty"`
	Guarantees *jail.Guarantees `json:"guarantees,omitempty"`
	// Allowlist says how the selected backend holds --network allow:...,
	// or why it cannot; AllowlistGaps what it cannot exclude.
	Allowlist     string   `json:"allowlist,omitempty"`
	AllowlistGaps []string `json:"allowlist_gaps,omitempty"`
	// RefusedWrites says whether a result names the write into the
	// read-only project the jail refused a command (refused_write).
	RefusedWrites string `json:"refused_writes,omitempty"`
	// Overlay says whether the project view (--overlay on) works here
	// with the selected backend (a real view mounted and written), or
	// why not.
	Overlay string `json:"overlay,omitempty"`
	// OverlayMode is --overlay as given; OverlayOn whether a server
	// started so would show commands the view, OverlayReason why (or
	// why it would refuse to start, under on), OverlayHint what would
	// turn it on.
	OverlayMode   string `json:"overlay_mode"`
	OverlayOn     bool   `json:"overlay_on"`
	OverlayReason string `json:"overlay_reason"`
	OverlayHint   string `json:"overlay_hint,omitempty"`
	// Writable are the directories of the project commands write in
	// place, on the host (--writable); empty when the project is
	// read-only to them.
	Writable []string `json:"writable"`
	// DenyRead is the --deny-read list as the server would resolve it,
	// how the selected backend hides it, and what it cannot.
	DenyRead     *auth.Deny `json:"deny_read,omitempty"`
	DenyReadHow  string     `json:"deny_read_how,omitempty"`
	DenyReadGaps []string   `json:"deny_read_gaps,omitempty"`
	// Mask are the credentials the jail would hold as placeholders
	// (--mask), each with its hosts; MaskCA says of the proxy's
	// authority what holds before a server starts.
	Mask   []session.MaskedCredential `json:"mask"`
	MaskCA string                     `json:"mask_ca,omitempty"`
	// LeftoverCgroups are cgroups of servers killed before they cleaned
	// up that this user's servers cannot remove (another user's); absent
	// when there are none.
	LeftoverCgroups *limits.LeftoverCgroups `json:"leftover_cgroups,omitempty"`
	Version         string                  `json:"version"`
}

// doctor tells which backends exist here, which one would be used, why the
// others cannot, and the command that enables them. Exit status 0 when a
// confining backend is usable, 1 otherwise.
func doctor(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := NewFlagSet("doctor")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	backend := fs.String("backend", cmp.Or(getenv("JAIL_MCP_BACKEND"), "auto"), "`NAME` to check: "+strings.Join(backendNames, ", ")+" [$JAIL_MCP_BACKEND]")
	// What commands write in place is checked as the server checks it.
	var skip []string
	for _, o := range options {
		if !slices.Contains([]string{"project", "root", "writable", "auth", "pass-env", "mask", "overlay"}, o.flag) {
			skip = append(skip, o.flag)
		}
	}
	rc := BindConfig(fs, getenv, skip...)
	if err := ParseFlags(fs, args, "jail-mcp doctor [--json] [--backend NAME] [--overlay MODE] [--project DIR] [--writable PATHS]", stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return UsageError("doctor: unexpected argument %q", fs.Arg(0))
	}
	if !slices.Contains(backendNames, *backend) {
		return UsageError("invalid --backend %q: want %s", *backend, alternatives(backendNames))
	}
	cfg, err := rc.Parse(fs)
	if err != nil {
		return UsageError("%v", err)
	}
	opts := jail.Options{Getenv: getenv}
	r := DoctorReport{Backends: jail.Detect(ctx, opts), Writable: cfg.Writable, Version: Version()}
	if r.Writable == nil {
		r.Writable = []string{}
	}
	home := serverHome(getenv)
	deny, err := denyList(cfg, home, getenv)
	if err != nil {
		return UsageError("%v", err)
	}
	r.DenyRead = &deny
	if left := limits.Leftovers(); left.Count > 0 {
		r.LeftoverCgroups = &left
	}
	r.Mask = cfg.Mask.Credentials()
	if len(r.Mask) > 0 {
		r.MaskCA = "made by each server at its start, its private key in the server's memory only (never written); a running server's jail_status gives its SHA-256 fingerprint, and its jails trust it through <jail>/" + session.CABundleRel
	}
	b, err := jail.Open(ctx, *backend, opts)
	if err == nil {
		r.DenyReadHow, r.DenyReadGaps = jail.DescribeUnread(b)
		r.Selected, r.Confined = b.Name(), b.Confined()
		g := b.Guarantees()
		r.Guarantees = &g
		r.Allowlist, r.AllowlistGaps = jail.DescribeEgress(b)
		r.RefusedWrites = "named: each call's session agent watches its writes (seccomp notifications) and the result names the first one refused in the project (refused_write)"
		if !b.Agents() {
			r.RefusedWrites = "not detected: " + b.Name() + " runs no session agents here, so a write refused in the project shows only as the command's own error"
		}
		r.Overlay = "available: " + b.Name() + " mounts each session's view in a user namespace of its session agent (overlayfs, the host project below, the session's layer above); the host's Go, npm, pip and cargo caches are shown copy-on-write"
		if jail.NativeOverlay(b) {
			r.Overlay = "available: " + b.Name() + " (0.9 or later) mounts each session agent's view itself (overlayfs, the host project below, the session's layer above), no user namespace nested in its sandbox; the host's Go, npm, pip and cargo caches are shown copy-on-write"
		}
		viewErr := jail.ProbeOverlay(ctx, b)
		if viewErr != nil {
			r.Overlay = "not available: " + viewErr.Error()
		}
		r.setView(cfg.Overlay, viewErr)
	} else if ue, ok := err.(*jail.UnavailableError); ok {
		r.Selected, r.Reason, r.Hint = ue.Backend, ue.Reason, ue.Hint
		r.setView(cfg.Overlay, jail.OverlayUsable(jail.Refusing{Err: ue}))
	} else {
		return err
	}

	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		printDoctor(stdout, r, *backend)
	}
	if !r.Confined {
		return &exitError{code: 1}
	}
	return nil
}

// setView fills the Overlay* fields as a server started with --overlay
// mode would decide them, viewErr saying why the view cannot run here.
func (r *DoctorReport) setView(mode string, viewErr error) {
	v, err := chooseView(mode, r.Selected, func() error { return viewErr })
	if err != nil {
		v.Reason = "the server refuses to start: " + err.Error()
		v.Hint = viewHint(r.Selected, viewErr)
	}
	r.OverlayMode, r.OverlayOn, r.OverlayReason, r.OverlayHint = v.Mode, v.On, v.Reason, v.Hint
}

// printDenyRead says what no command reads, and how and how far the
// backend holds it.
func printDenyRead(w io.Writer, r DoctorReport) {
	d := r.DenyRead
	switch {
	case d == nil:
		return
	case len(d.Paths) == 0:
		fmt.Fprintln(w, "WARNING: --deny-read is empty: commands read every file the server's user reads (SSH keys, cloud credentials, tokens)")
	case d.Default:
		fmt.Fprintf(w, "--deny-read: %d host paths no command reads (the built-in list of secret files, and those named): %s\n", len(d.Paths), r.DenyReadHow)
	default:
		fmt.Fprintf(w, "WARNING: --deny-read without default: only the %d paths named are unreadable, not the built-in list of secret files: %s\n", len(d.Paths), r.DenyReadHow)
	}
	for _, g := range r.DenyReadGaps {
		fmt.Fprintf(w, "  gap: %s\n", g)
	}
	for _, c := range r.Mask {
		fmt.Fprintf(w, "--mask: %s reaches the jail as placeholders; the real value goes only over TLS to %s\n", c.Name, strings.Join(c.Hosts, ", "))
	}
	if r.MaskCA != "" {
		fmt.Fprintf(w, "  the proxy's authority: %s\n", r.MaskCA)
	}
	if len(r.DenyReadGaps) > 0 && r.Selected == "landlock" {
		fmt.Fprintln(w, "  so: put no secret in a command line (the server takes none: --token is refused), and use bwrap where sessions belong to different people")
	}
}

func printDoctor(w io.Writer, r DoctorReport, asked string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, b := range r.Backends {
		if b.Available {
			where := b.Path
			if b.ABI > 0 {
				where = fmt.Sprintf("Landlock ABI %d", b.ABI)
			}
			fmt.Fprintf(tw, "%s\tavailable\t%s\n", b.Backend, where)
			continue
		}
		line := b.Reason
		if b.Hint != "" {
			line += "; fix: " + b.Hint
		}
		fmt.Fprintf(tw, "%s\tunavailable\t%s\n", b.Backend, line)
	}
	tw.Flush()
	if l := r.LeftoverCgroups; l != nil {
		fmt.Fprintf(w, "leftover cgroups: %d of jail-mcp servers killed before they cleaned up, owned by %s, which this user's servers cannot remove (they do not delay a start; a server of their owner's removes them, or as root: find %s -type d -delete)\n",
			l.Count, strings.Join(l.Owners, ", "), strings.Join(l.Dirs, " "))
	}
	if r.Confined {
		fmt.Fprintf(w, "\n%s: commands run confined by %s\n", asked, r.Selected)
		// Say why auto passed over the backends it prefers.
		for _, b := range r.Backends {
			if b.Backend == r.Selected || asked != "auto" {
				break
			}
			if !b.Available {
				fmt.Fprintf(w, "(not %s: %s)\n", b.Backend, b.Reason)
			}
		}
		fmt.Fprintln(w, "promises kept (docs/security.md):")
		for _, p := range r.Guarantees.Kept {
			if p.Note != "" {
				fmt.Fprintf(w, "  %d. %s: %s\n", p.ID, p.Name, p.Note)
				continue
			}
			fmt.Fprintf(w, "  %d. %s\n", p.ID, p.Name)
		}
		if len(r.Guarantees.NotKept) > 0 {
			fmt.Fprintln(w, "promises not kept:")
			for _, p := range r.Guarantees.NotKept {
				fmt.Fprintf(w, "  %d. %s: %s\n", p.ID, p.Name, p.Note)
			}
		}
		fmt.Fprintf(w, "refused writes in the project: %s\n", r.RefusedWrites)
		v := ViewChoice{Mode: r.OverlayMode, On: r.OverlayOn, Reason: r.OverlayReason, Hint: r.OverlayHint}
		fmt.Fprintln(w, v.String())
		if strings.HasPrefix(r.Overlay, "available") {
			fmt.Fprintf(w, "  the view here: %s\n", r.Overlay)
		}
		if len(r.Writable) > 0 {
			fmt.Fprintf(w, "WARNING: commands write these directories of the project in place, on the host (--writable): %s\n", strings.Join(r.Writable, ", "))
		} else {
			fmt.Fprintln(w, "writes in place in the project: none (no --writable)")
		}
		printDenyRead(w, r)
		fmt.Fprintf(w, "--network allow:...: %s\n", r.Allowlist)
		for _, g := range r.AllowlistGaps {
			fmt.Fprintf(w, "  gap: %s\n", g)
		}
		return
	}
	fmt.Fprintf(w, "\n%s: no backend can confine commands here: %s\n", asked, r.Reason)
	if r.Hint != "" {
		fmt.Fprintf(w, "fix: %s\n", r.Hint)
	}
	fmt.Fprintln(w, "the server refuses every command (or, with --fallback warn, runs them unconfined)")
}
