package tools

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jail-mcp/jail-mcp/session"
	"github.com/jail-mcp/jail-mcp/session/layer"
	"github.com/jail-mcp/jail-mcp/tools/result"
)

// The modes of --apply: who says yes to a jail_apply.
const (
	ApplyAsk   = "ask"   // the person, through the client (MCP elicitation)
	ApplyAllow = "allow" // the assistant alone
	ApplyNever = "never" // nobody through MCP: the person, with jail-mcp apply
)

// approvalID names the elicitation in a jail_apply's input requests.
const approvalID = "apply"

// Answers to an approval, as ApplyResult.Approval says them.
const (
	approvalAccepted  = "accepted"
	approvalDeclined  = "declined"
	approvalCancelled = "cancelled"
)

// applyMode is the --apply mode in force for the request's MCP session:
// ask only where the client declared elicitation, else allow; and why,
// when that is not the operator's mode.
func (h *Handler) applyMode(ctx context.Context) (mode, why string) {
	mode = h.ApplyMode
	if mode == "" {
		mode = ApplyAllow
	}
	if mode == ApplyAsk && !clientElicits(ctx) {
		return ApplyAllow, "--apply ask, but the client does not declare elicitation: the assistant applies alone"
	}
	return mode, ""
}

// clientElicits reports whether the request's client declared that it
// asks its user on the server's behalf (elicitation).
func clientElicits(ctx context.Context) bool {
	cs, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo)
	return ok && cs.GetClientCapabilities().Elicitation != nil
}

// approval is what an ask binds the person's answer to: the session, the
// paths asked for and the layer's digest as the summary showed it. It
// travels in the input request's state, which the client echoes back,
// signed: an answer applies what was shown and nothing else.
type approval struct {
	Session string   `json:"s"`
	Paths   []string `json:"p"`
	Digest  string   `json:"d"`
}

// stateKey signs approvals: drawn once per server.
var stateKey = sync.OnceValue(func() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
})

// seal is a's state: its JSON, base64, a dot and its MAC.
func (a approval) seal() string {
	b, _ := json.Marshal(a)
	m := hmac.New(sha256.New, stateKey())
	m.Write(b)
	return base64.RawURLEncoding.EncodeToString(b) + "." + hex.EncodeToString(m.Sum(nil))
}

// openApproval is the approval state sealed, or false when it is not one
// this server sealed.
func openApproval(state string) (approval, bool) {
	var a approval
	enc, mac, ok := strings.Cut(state, ".")
	if !ok {
		return a, false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return a, false
	}
	m := hmac.New(sha256.New, stateKey())
	m.Write(b)
	want := hex.EncodeToString(m.Sum(nil))
	if !hmac.Equal([]byte(mac), []byte(want)) || json.Unmarshal(b, &a) != nil {
		return a, false
	}
	return a, true
}

// askApply is a jail_apply of paths under --apply ask: the person's
// answer applies, or declines, what the summary showed (an apply bound to
// the layer's digest then); without an answer yet, the summary is asked
// for, unless the dry run refuses (nothing to ask), whose result it is.
func (h *Handler) askApply(ctx context.Context, req mcp.CallToolRequest, s *session.Session, p applyParams) *mcp.CallToolResult {
	if ans := server.ElicitationResponse(req.Params.InputResponses, approvalID); ans != nil {
		a, ok := openApproval(req.Params.RequestState)
		if !ok || a.Session != s.Name || !slices.Equal(a.Paths, p.Paths) {
			return refuse("refused: the approval does not match this jail_apply (a forged or stale answer): call jail_apply again")
		}
		switch ans.Action {
		case mcp.ElicitationResponseActionAccept:
			return h.apply(s, p.Paths, false, a.Digest, approvalAccepted)
		case mcp.ElicitationResponseActionDecline:
			return structured(ApplyResult{Session: s.Name, Applied: []layer.Change{}, Refused: []Refusal{}, Digest: a.Digest, Approval: approvalDeclined},
				"the user declined this apply: nothing was written to the project. The changes stay in the session's layer; do not apply them again unless the user asks\n", false)
		default:
			return structured(ApplyResult{Session: s.Name, Applied: []layer.Change{}, Refused: []Refusal{}, Digest: a.Digest, Approval: approvalCancelled},
				"the user dismissed the request without answering: nothing was written to the project. The changes stay in the session's layer; ask the user before trying again\n", false)
		}
	}
	dry, err := s.ApplyReviewed(p.Paths, true, p.Digest)
	if err != nil {
		return refuseView(err)
	}
	if len(dry.Refused) > 0 || len(dry.Changes) == 0 {
		out := result.NewApply(s.Name, dry)
		out.DryRun = false
		return structured(out, renderApply(out), len(out.Refused) > 0)
	}
	msg := approvalMessage(s, h.Manager.Config().Project, dry, p.Paths)
	state := approval{Session: s.Name, Paths: p.Paths, Digest: dry.Digest}.seal()
	return server.NewInputRequestBuilder(state).Elicit(approvalID, mcp.ElicitationParams{
		Message:         msg,
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
	}).ToolResult()
}

// maxApprovalLines bounds the changes an approval's message lists.
const maxApprovalLines = 40

// approvalMessage is what the person reads before saying yes: the
// session, the project, each change with its lines added and removed,
// and what the paths hold that the apply leaves out (a protected path's
// copy).
func approvalMessage(s *session.Session, project string, dry *layer.Applied, paths []string) string {
	// One look at the layer, with its patch: the lines of each change,
	// and what the paths hold that the apply leaves out.
	d, err := s.Diff(layer.Options{Patch: true, All: true})
	stats, partial := patchStats(d, err)
	var b strings.Builder
	fmt.Fprintf(&b, "Apply %s of jail-mcp session %s to the project %s?\n", plural(len(dry.Changes), "change"), s.Name, project)
	plus, minus := 0, 0
	for _, c := range dry.Changes {
		st := stats[c.Path]
		plus, minus = plus+st[0], minus+st[1]
	}
	cut := ""
	if partial {
		cut = " (as far as the patch goes: it was cut at --max-output)"
	}
	fmt.Fprintf(&b, "%d lines added, %d removed%s.\n", plus, minus, cut)
	for i, c := range dry.Changes {
		if i == maxApprovalLines {
			fmt.Fprintf(&b, "... and %d more\n", len(dry.Changes)-i)
			break
		}
		line := layer.Letter(c.Change) + " " + c.Path
		if st, ok := stats[c.Path]; ok {
			line += fmt.Sprintf(" (+%d -%d)", st[0], st[1])
		}
		b.WriteString(line + "\n")
	}
	if left := leftOut(d, err, dry, paths); len(left) > 0 {
		if len(left) > maxApprovalLines {
			left = append(left[:maxApprovalLines], fmt.Sprintf("and %d more", len(left)-maxApprovalLines))
		}
		fmt.Fprintf(&b, "Left out (protected, or ignored by .gitignore and not named): %s\n", strings.Join(left, ", "))
	}
	b.WriteString("Nothing is written unless you accept.")
	return b.String()
}

// patchStats counts the lines each text file of the session's patch d
// (err: none could be made) adds and removes; partial: the patch was cut
// (--max-output), or is missing.
func patchStats(d session.DiffResult, err error) (map[string][2]int, bool) {
	stats := map[string][2]int{}
	if err != nil {
		return stats, true
	}
	file := ""
	sc := bufio.NewScanner(strings.NewReader(d.Patch))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "diff --git a/"):
			rest := strings.TrimPrefix(line, "diff --git a/")
			if i := strings.Index(rest, " b/"); i >= 0 {
				file = rest[:i]
			}
		case strings.HasPrefix(line, "+++ "), strings.HasPrefix(line, "--- "):
		case strings.HasPrefix(line, "+"):
			st := stats[file]
			st[0]++
			stats[file] = st
		case strings.HasPrefix(line, "-"):
			st := stats[file]
			st[1]++
			stats[file] = st
		}
	}
	return stats, d.PatchTruncated
}

// leftOut are the changes of d at or below paths that an apply of them leaves
// out: protected paths' copies, and what .gitignore ignores unless named.
func leftOut(d session.DiffResult, err error, dry *layer.Applied, paths []string) []string {
	if err != nil {
		return nil
	}
	applied := map[string]bool{}
	for _, c := range dry.Changes {
		applied[c.Path] = true
	}
	var out []string
	for _, c := range d.Changes {
		if !applied[c.Path] && under(c.Path, paths) {
			out = append(out, c.Path)
		}
	}
	return out
}

// under reports whether path is one of paths or below one ("." is all).
func under(path string, paths []string) bool {
	for _, p := range paths {
		p = strings.TrimSuffix(p, "/")
		if p == "." || path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}
