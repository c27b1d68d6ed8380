package tools

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session"
	"github.com/jail-mcp/jail-mcp/session/jailfs"
	"github.com/jail-mcp/jail-mcp/session/ledger"
	"github.com/jail-mcp/jail-mcp/session/limits"
)

// AuthEntry is one CLI whose credentials are exposed.
type AuthEntry struct {
	Name  string   `json:"name"`
	Paths []string `json:"paths"`
	Env   []string `json:"env"`
}

// Limits are the operator's bounds and which of them hold here.
type Limits struct {
	TimeoutMS      int64    `json:"timeout_ms"`
	MaxTimeoutMS   int64    `json:"max_timeout_ms"`
	MaxOutputBytes int64    `json:"max_output_bytes"`
	MaxProcs       int64    `json:"max_procs"`
	MaxMemoryBytes int64    `json:"max_memory_bytes"`
	MaxDiskBytes   int64    `json:"max_disk_bytes"`
	MaxFiles       int64    `json:"max_files"`
	MaxJobTimeMS   int64    `json:"max_job_time_ms"`
	MaxJobs        int      `json:"max_jobs"`
	Enforced       []string `json:"enforced"`
	NotEnforced    []string `json:"not_enforced"`
}

// StatusResult is the structured result of jail_status.
type StatusResult struct {
	Session   string `json:"session"`
	Project   string `json:"project"`
	Jail      string `json:"jail"`
	Backend   string `json:"backend"`
	Available bool   `json:"available"`
	Confined  bool   `json:"confined"`
	Reason    string `json:"reason"`
	Hint      string `json:"hint"`
	Network   bool   `json:"network"`
	Overlay   bool   `json:"overlay"`
	// OverlayMode is --overlay (auto, on, off); OverlayReason why the
	// view is on or off; OverlayHint what would turn it on.
	OverlayMode   string `json:"overlay_mode"`
	OverlayReason string `json:"overlay_reason"`
	OverlayHint   string `json:"overlay_hint"`
	ViewWatch     string `json:"view_watch"` // Manager.ViewWatch, "" without the view
	// Apply is who says yes to a jail_apply in this MCP session (--apply
	// as in force here: ask only where the client declared elicitation),
	// ApplyReason why it is not the operator's mode.
	Apply       string `json:"apply"`
	ApplyReason string `json:"apply_reason"`
	// Conflicts: the paths the host changed after the session's layer
	// copied them (commands see the session's copy).
	Conflicts  []ledger.Conflict   `json:"conflicts"`
	Allow      []string            `json:"network_allow"`
	Gaps       []string            `json:"network_gaps"`
	Writable   []string            `json:"writable"`
	DenyRead   DenyRead            `json:"deny_read"`
	Mask       session.MaskInfo    `json:"mask"`
	Auth       []AuthEntry         `json:"auth"`
	Usage      jailfs.Usage        `json:"usage"`
	Running    int                 `json:"running"`
	Limits     Limits              `json:"limits"`
	Guarantees jail.Guarantees     `json:"guarantees"`
	Agents     []session.AgentInfo `json:"agents"`
	Jobs       []session.JobInfo   `json:"jobs"`
	Version    string              `json:"version"`
}

// DenyRead is the --deny-read list in effect and how the backend holds it.
type DenyRead struct {
	Default bool     `json:"default"` // the built-in list is in it
	Paths   []string `json:"paths"`   // no command reads them (the last element may be a pattern)
	Shown   []string `json:"shown"`   // below them, what stays readable
	How     string   `json:"how"`
	Gaps    []string `json:"gaps"`
}

// limitNames are the bounds of Limits, by field name.
var limitNames = []string{"timeout_ms", "max_timeout_ms", "max_output_bytes", "max_job_time_ms", "max_jobs", "max_procs", "max_memory_bytes", "max_disk_bytes", "max_files"}

// alwaysEnforced is how many of limitNames hold wherever commands run.
const alwaysEnforced = 5

// Status is the jail_status tool.
func (h *Handler) Status(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	s, refused := h.sessionNoArgs(ctx, req)
	if refused != nil {
		return refused, nil
	}
	cfg := h.Manager.Config()
	usage, err := s.Usage()
	if err != nil {
		return refuse("count jail usage: %v", err), nil
	}
	out := StatusResult{
		Session: s.Name, Project: cfg.Project, Jail: s.Path,
		Backend: cfg.Backend.Name(), Available: !jail.IsRefusing(cfg.Backend), Confined: cfg.Backend.Confined(),
		Reason: h.Reason, Hint: h.Hint, Network: cfg.Network, Overlay: cfg.Overlay, OverlayMode: h.OverlayMode, OverlayReason: h.OverlayReason, OverlayHint: h.OverlayHint, ViewWatch: h.Manager.ViewWatch(), Allow: []string{}, Gaps: []string{},
		Auth: authEntries(h.Manager, s), Usage: usage, Running: s.Running(),
		Limits: Limits{
			TimeoutMS: cfg.Timeout.Milliseconds(), MaxTimeoutMS: cfg.MaxTimeout.Milliseconds(),
			MaxOutputBytes: int64(cfg.MaxOutput), MaxProcs: cfg.MaxProcs,
			MaxMemoryBytes: cfg.MaxMemory, MaxDiskBytes: cfg.MaxDisk, MaxFiles: cfg.MaxFiles,
			MaxJobTimeMS: cfg.MaxJobTime.Milliseconds(), MaxJobs: cfg.MaxJobs,
			Enforced: enforced(cfg.Backend), NotEnforced: notEnforced(cfg.Backend),
		},
		Guarantees: cfg.Backend.Guarantees(), Agents: s.Agents(), Jobs: s.Jobs(),
		Version: h.Version,
	}
	out.Apply, out.ApplyReason = h.applyMode(ctx)
	if out.OverlayMode == "" {
		// A handler built without the start's decision (tests).
		out.OverlayMode = onOff(cfg.Overlay)
	}
	out.Writable = append([]string{}, cfg.Writable...)
	out.DenyRead = DenyRead{Default: cfg.Deny.Default, Paths: append([]string{}, cfg.Deny.Paths...), Shown: append([]string{}, cfg.Deny.Shown...)}
	out.DenyRead.How, out.DenyRead.Gaps = jail.DescribeUnread(cfg.Backend)
	out.Mask = s.MaskInfo()
	out.Conflicts = append([]ledger.Conflict{}, s.Conflicts()...)
	if cfg.Allow != nil {
		for _, r := range cfg.Allow.Rules {
			out.Allow = append(out.Allow, r.String())
		}
		_, out.Gaps = jail.DescribeEgress(cfg.Backend)
	}
	return structured(out, renderStatus(out), false), nil
}

// authEntries lists what the operator's --auth exposes: the places in the
// jail and the variable names, never values.
func authEntries(m *session.Manager, s *session.Session) []AuthEntry {
	out := []AuthEntry{}
	for _, e := range m.Exposed() {
		a := AuthEntry{Name: e.Name, Paths: []string{}, Env: e.EnvNames()}
		for _, it := range e.Items {
			a.Paths = append(a.Paths, filepath.Join(s.Path, it.Rel))
		}
		out = append(out, a)
	}
	return out
}

// enforced lists the bounds that hold here: all of them where the
// watchdog sees processes (Linux), the time and output bounds elsewhere.
func enforced(b jail.Backend) []string {
	if jail.IsRefusing(b) || !limits.Watchable {
		return limitNames[:alwaysEnforced]
	}
	return limitNames
}

func notEnforced(b jail.Backend) []string {
	if jail.IsRefusing(b) || !limits.Watchable {
		return limitNames[alwaysEnforced:]
	}
	return []string{}
}

func renderStatus(s StatusResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "session %s, jail %s\n", s.Session, s.Jail)
	switch {
	case s.Confined:
		network := onOff(s.Network)
		if len(s.Allow) > 0 {
			network = "held to " + strings.Join(s.Allow, ",") + " (through the server's proxy)"
		}
		fmt.Fprintf(&b, "confined by %s; network %s\n", s.Backend, network)
		for _, g := range s.Gaps {
			fmt.Fprintf(&b, "network gap: %s\n", g)
		}
	case s.Available:
		fmt.Fprintf(&b, "UNCONFINED (--fallback warn): %s\n", s.Reason)
	default:
		fmt.Fprintf(&b, "no backend can confine, commands are refused: %s\n", s.Reason)
		if s.Hint != "" {
			fmt.Fprintf(&b, "fix: %s\n", s.Hint)
		}
	}
	if s.Overlay {
		fmt.Fprintf(&b, "project view on (--overlay %s): commands write the project copy-on-write, their changes stay in this session's layer; jail_diff lists them, jail_apply copies them to the host\n", s.OverlayMode)
		if s.ViewWatch != "" && s.ViewWatch != "watching" {
			fmt.Fprintf(&b, "project watch %s\n", s.ViewWatch)
		}
		for _, line := range session.LayerNotes(s.Conflicts, nil) {
			b.WriteString(line + "\n")
		}
		b.WriteString(applyLine(s.Apply, s.ApplyReason) + "\n")
	} else if s.OverlayReason != "" {
		fmt.Fprintf(&b, "project view off: %s\n", s.OverlayReason)
		if s.OverlayHint != "" {
			fmt.Fprintf(&b, "to enable the view: %s\n", s.OverlayHint)
		}
	}
	if len(s.Writable) > 0 {
		fmt.Fprintf(&b, "written in place, on the host (--writable): %s\n", strings.Join(s.Writable, ", "))
	}
	switch d := s.DenyRead; {
	case len(d.Paths) == 0:
		b.WriteString("deny list empty (--deny-read ''): commands read every file the server's user reads\n")
	case d.Default:
		fmt.Fprintf(&b, "unreadable: %d host paths (the built-in list of secret files, and those --deny-read names): %s\n", len(d.Paths), d.How)
	default:
		fmt.Fprintf(&b, "unreadable: %d host paths, the operator's only (--deny-read without default): %s\n", len(d.Paths), d.How)
	}
	for _, g := range s.DenyRead.Gaps {
		fmt.Fprintf(&b, "read gap: %s\n", g)
	}
	for _, c := range s.Mask.Credentials {
		fmt.Fprintf(&b, "masked (--mask): %s, the real value sent only over TLS to %s\n", c.Name, strings.Join(c.Hosts, ", "))
	}
	if len(s.Mask.Credentials) > 0 {
		fmt.Fprintf(&b, "masking proxy's authority (key in the server's memory only): SHA-256 %s; the jail trusts it through %s\n", s.Mask.CA, s.Mask.Bundle)
	}
	if len(s.Auth) > 0 {
		var names []string
		for _, a := range s.Auth {
			names = append(names, a.Name)
		}
		fmt.Fprintf(&b, "credentials (read-only): %s\n", strings.Join(names, ", "))
	}
	fmt.Fprintf(&b, "usage %d files, %d bytes on disk", s.Usage.Files, s.Usage.Bytes)
	if s.Limits.MaxFiles > 0 || s.Limits.MaxDiskBytes > 0 {
		fmt.Fprintf(&b, " (bounds: --max-files %d, --max-disk %d)", s.Limits.MaxFiles, s.Limits.MaxDiskBytes)
	}
	fmt.Fprintf(&b, "; %d running\n", s.Running)
	for _, j := range s.Jobs {
		state := "running"
		switch {
		case j.Running:
		case j.Signal != "":
			state = "ended: " + j.Signal
		default:
			state = fmt.Sprintf("ended: exit %d", j.ExitCode)
		}
		fmt.Fprintf(&b, "job %s (%s): %s\n", j.ID, state, j.Command)
	}
	var kept, not []string
	for _, p := range s.Guarantees.Kept {
		kept = append(kept, fmt.Sprint(p.ID))
	}
	for _, p := range s.Guarantees.NotKept {
		not = append(not, fmt.Sprintf("%d (%s)", p.ID, p.Note))
	}
	fmt.Fprintf(&b, "promises kept: %s", strings.Join(kept, ", "))
	if len(not) > 0 {
		fmt.Fprintf(&b, "; not kept: %s", strings.Join(not, "; "))
	}
	b.WriteString("\n")
	return b.String()
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// applyLine says who says yes to a jail_apply (--apply as in force).
func applyLine(mode, why string) string {
	line := "apply: "
	switch mode {
	case ApplyAsk:
		line += "ask: jail_apply asks the user first, through the client (--apply ask)"
	case ApplyNever:
		line += "never: jail_apply writes nothing; the user applies with jail-mcp apply (--apply never)"
	default:
		line += "allow: jail_apply writes what it is given"
	}
	if why != "" {
		line += " (" + why + ")"
	}
	return line
}
