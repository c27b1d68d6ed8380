// Package result holds the structured results of the tools that review
// and apply a session's project changes (jail_diff, jail_apply,
// jail_discard), which jail-mcp diff, apply and discard print as JSON
// too: without the MCP SDK, so that the command line does not load it.
package result

import (
	"github.com/jail-mcp/jail-mcp/session"
	"github.com/jail-mcp/jail-mcp/session/layer"
	"github.com/jail-mcp/jail-mcp/session/ledger"
)

// Diff is the structured result of jail_diff, and of jail-mcp diff
// --json.
type Diff struct {
	Session        string          `json:"session"`
	Jail           string          `json:"jail"`
	Changes        []layer.Change  `json:"changes"`
	Ignored        []layer.Summary `json:"ignored"`
	Patch          string          `json:"patch"`
	PatchBytes     int             `json:"patch_bytes"`
	PatchTruncated bool            `json:"patch_truncated"`
	OutputPath     string          `json:"output_path"`
	Digest         string          `json:"digest"`
	// Conflicts: the paths the host changed after the session's layer
	// copied them (their changes are marked too).
	Conflicts []ledger.Conflict `json:"conflicts"`
}

// NewDiff is the structured result of session s's d.
func NewDiff(s *session.Session, d session.DiffResult) Diff {
	out := Diff{
		Session: s.Name, Jail: s.Path, Changes: d.Changes, Ignored: d.Ignored,
		Patch: d.Patch, PatchBytes: d.PatchBytes, PatchTruncated: d.PatchTruncated, OutputPath: d.OutputPath,
		Digest: d.Digest, Conflicts: d.Conflicts,
	}
	if out.Conflicts == nil {
		out.Conflicts = []ledger.Conflict{}
	}
	if out.Changes == nil {
		out.Changes = []layer.Change{}
	}
	if out.Ignored == nil {
		out.Ignored = []layer.Summary{}
	}
	return out
}

// Refusal is a path an apply did not write, and why.
type Refusal struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Apply is the structured result of jail_apply, and of jail-mcp apply
// --json.
type Apply struct {
	Session string         `json:"session"`
	Applied []layer.Change `json:"applied"`
	Refused []Refusal      `json:"refused"`
	DryRun  bool           `json:"dry_run"`
	Digest  string         `json:"digest"`
	// Approval is the user's answer when the server asked it (--apply
	// ask): "accepted", "declined" or "cancelled"; "" when not asked.
	Approval string `json:"approval"`
}

// NewApply is the structured result of an apply a of session name.
func NewApply(name string, a *layer.Applied) Apply {
	out := Apply{Session: name, Applied: a.Changes, Refused: []Refusal{}, DryRun: a.DryRun, Digest: a.Digest}
	for _, r := range a.Refused {
		out.Refused = append(out.Refused, Refusal{Path: r.Path, Reason: r.Reason})
	}
	if out.Applied == nil || len(out.Refused) > 0 {
		out.Applied = []layer.Change{}
	}
	return out
}

// Discard is the structured result of jail_discard, and of jail-mcp
// discard --json.
type Discard struct {
	Session   string   `json:"session"`
	Discarded []string `json:"discarded"`
}
