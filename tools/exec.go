package tools

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jail-mcp/jail-mcp/session"
	"github.com/jail-mcp/jail-mcp/session/egress"
	"github.com/jail-mcp/jail-mcp/session/ledger"
	"github.com/jail-mcp/jail-mcp/session/limits"
)

var execFields = fieldsOf("exec")

type execParams struct {
	Command    *string           `json:"command"`
	Argv       []string          `json:"argv"`
	Cwd        string            `json:"cwd"`
	Stdin      *string           `json:"stdin"`
	Env        map[string]string `json:"env"`
	TimeoutMS  *int64            `json:"timeout_ms"`
	Network    *bool             `json:"network"`
	Allow      []string          `json:"allow"`
	Auth       []string          `json:"auth"`
	Background bool              `json:"background"`
	YieldMS    *int64            `json:"yield_ms"`
	TTY        bool              `json:"tty"`
}

// Outcome is what jailed_exec and jail_job both say of a command: how it
// ended (or that it runs on, as a job), its output, and where it ran.
type Outcome struct {
	JobID           string `json:"job_id"`
	Running         bool   `json:"running"`
	ExitCode        int    `json:"exit_code"`
	Signal          string `json:"signal"`
	TimedOut        bool   `json:"timed_out"`
	Limit           string `json:"limit"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	OutputPath      string `json:"output_path"`
	DurationMS      int64  `json:"duration_ms"`
	Session         string `json:"session"`
	Jail            string `json:"jail"`
	Backend         string `json:"backend"`
	Confined        bool   `json:"confined"`
	// Refusals: the connections the allowlist's proxy refused while the
	// command ran (so far, for a job that runs).
	Refusals []egress.Refusal `json:"network_refusals"`
	// RefusedWrite: the first path of the read-only project the jail
	// refused the command a write to, RefusedWrites how many.
	RefusedWrite  string `json:"refused_write"`
	RefusedWrites int    `json:"refused_writes"`
	// Stopped: why the session agent ended the command, when it did
	// (an inode of its read view moved to a denied path, or its share
	// of inotify watches passed).
	Stopped string `json:"stopped"`
	// ProjectChanges: what the command changed in the project view
	// (--overlay), in the session's layer, not on the host; zero when it
	// changed nothing there. Conflicts: the paths the host changed
	// after the layer copied them. Refreshed: the copies dropped before
	// the call, which held the host's bytes unchanged.
	ProjectChanges ledger.Changes    `json:"project_changes"`
	Conflicts      []ledger.Conflict `json:"conflicts"`
	Refreshed      []string          `json:"refreshed"`
	// ViewBehind: when the command saw an older state of the project
	// than the host's at its start, the time of the state it saw (RFC
	// 3339): a call of the session that still ran holds that view.
	ViewBehind string `json:"view_behind"`
}

// newOutcome is an Outcome with a command's output and where it ran.
func newOutcome(stdout, stderr session.Stream, d time.Duration, sessionName, jailPath, backend string, confined bool) Outcome {
	return Outcome{
		Stdout: stdout.Text, Stderr: stderr.Text, StdoutBytes: stdout.Bytes, StderrBytes: stderr.Bytes,
		StdoutTruncated: stdout.Truncated, StderrTruncated: stderr.Truncated, DurationMS: d.Milliseconds(),
		Session: sessionName, Jail: jailPath, Backend: backend, Confined: confined,
		Refusals:       []egress.Refusal{},
		ProjectChanges: ledger.Changes{First: []ledger.Path{}}, Conflicts: []ledger.Conflict{}, Refreshed: []string{},
	}
}

// ended records how the command ended.
func (o *Outcome) ended(res *session.Result) {
	o.ExitCode, o.Signal, o.TimedOut, o.Limit = res.ExitCode, res.Signal, res.End == session.TimedOut, string(res.Limit)
	if len(res.Refusals) > 0 {
		o.Refusals = res.Refusals
	}
	o.RefusedWrite, o.RefusedWrites = res.RefusedWrite, res.RefusedWrites
	o.Stopped = res.Stopped
	if c := res.Project; c != nil && c.Total() > 0 {
		o.ProjectChanges = *c
	}
	if len(res.Conflicts) > 0 {
		o.Conflicts = res.Conflicts
	}
	if len(res.Refreshed) > 0 {
		o.Refreshed = res.Refreshed
	}
	if !res.ViewBehind.IsZero() {
		o.ViewBehind = res.ViewBehind.UTC().Format(time.RFC3339)
	}
}

// ExecResult is the structured result of jailed_exec.
type ExecResult struct {
	Outcome
	Cancelled bool   `json:"cancelled"`
	Agent     string `json:"agent"`
}

// Exec is the jailed_exec tool.
func (h *Handler) Exec(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var p execParams
	if err := decode(req, &p, execFields); err != nil {
		return refuse("refused: %v", err), nil
	}
	// An empty command or argv, given, is told apart from one not given
	// here; session checks the rest of the request.
	r := session.Request{Argv: p.Argv, Cwd: p.Cwd, Env: p.Env, Network: p.Network, Allow: p.Allow, Auth: p.Auth}
	switch {
	case p.Command != nil && p.Argv != nil:
		return refuseRun(session.ErrCommandAndArgv), nil
	case p.Command != nil && *p.Command == "":
		return refuse("refused: command is empty"), nil
	case p.Argv != nil && len(p.Argv) == 0:
		return refuse("refused: argv is empty"), nil
	case p.Command != nil:
		r.Command = *p.Command
	}
	if p.Stdin != nil {
		r.Stdin = strings.NewReader(*p.Stdin)
	}
	job := p.Background || p.YieldMS != nil
	switch {
	case p.Background && p.YieldMS != nil:
		return refuse("refused: give one of background and yield_ms: background returns at once, yield_ms waits first"), nil
	case p.YieldMS != nil && *p.YieldMS <= 0:
		return refuse("refused: yield_ms must be a positive integer, got %d", *p.YieldMS), nil
	}
	if p.TimeoutMS != nil {
		// 0 would be the operator's default; session clamps the rest.
		if *p.TimeoutMS <= 0 {
			return refuse("refused: timeout_ms must be a positive integer, got %d", *p.TimeoutMS), nil
		}
		r.Timeout = session.Millis(*p.TimeoutMS)
	}
	if token := progressToken(req); token != nil && !(job || p.TTY) {
		r.Progress = progressReporter(ctx, token)
	}
	s, err := h.Session(ctx)
	if err != nil {
		return refuse("refused: %v", err), nil
	}
	if job || p.TTY {
		r.Job = job
		return h.execJob(ctx, req, s, r, p)
	}
	res, err := s.Exec(ctx, r)
	if err != nil {
		return refuseRun(err), nil
	}
	if warned := warnResult(ctx, res); warned || r.Progress != nil {
		flushNotifications(ctx)
	}
	out := ExecResult{Outcome: newOutcome(res.Stdout, res.Stderr, res.Duration, res.Session, res.Jail, res.Backend, res.Confined)}
	out.OutputPath = res.OutputPath
	fillEnd(&out, res)
	return structured(out, renderExec(res), res.Failed()), nil
}

// resultWarnings are what the user should hear of a command's end beyond
// its own status: it ran unconfined, went over a bound of the operator's,
// or its session agent ended.
func resultWarnings(r *session.Result) []string {
	var w []string
	if !r.Confined {
		w = append(w, "a command ran UNCONFINED (--fallback warn: no jail could confine it)")
	}
	if r.Limit != "" && r.Limit != limits.BoundTimeout {
		w = append(w, fmt.Sprintf("a command went over its %s bound (%s) in session %s", r.Limit, r.Limit.Flag(), r.Session))
	}
	if note := agentNote(r); note != "" {
		w = append(w, "session "+r.Session+": "+note)
	}
	if r.Stopped != "" {
		w = append(w, "session "+r.Session+": "+r.Stopped)
	}
	if n := len(r.Refusals); n > 0 {
		w = append(w, fmt.Sprintf("session %s: the allowlist refused %d connection(s) of a command, the first to %s:%d (%s)", r.Session, n, r.Refusals[0].Host, r.Refusals[0].Port, r.Refusals[0].Reason))
	}
	return w
}

// warnResult sends resultWarnings to the client as log notifications
// (warning), which it receives when it set that level or a lower one; it
// reports whether there were any.
func warnResult(ctx context.Context, r *session.Result) bool {
	warnings := resultWarnings(r)
	if srv := server.ServerFromContext(ctx); srv != nil {
		for _, w := range warnings {
			srv.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(mcp.LoggingLevelWarning, "jail-mcp", w))
		}
	}
	return len(warnings) > 0
}

// agentNote is what the result says of the session agent.
func agentNote(r *session.Result) string {
	switch {
	case r.AgentLost != "":
		return "the session agent ended during this call and took the command with it (" + r.AgentLost + "); the next call starts a new one"
	case r.AgentRestarted != "":
		return "this call started a new session agent: the one before ended (" + r.AgentRestarted + ")"
	}
	return ""
}

// renderExec is the short text rendering: one status line a model can act
// on, then the output.
func renderExec(r *session.Result) string {
	var b strings.Builder
	if !r.Confined {
		b.WriteString("UNCONFINED (--fallback warn: no jail could confine this command); ")
	}
	if note := agentNote(r); note != "" {
		b.WriteString(note + "\n")
	}
	b.WriteString(r.Status() + "\n")
	if note := r.RefusedWriteNote(); note != "" {
		b.WriteString(note + "\n")
	}
	if r.Stopped != "" {
		b.WriteString("ended: " + r.Stopped + "\n")
	}
	writeLayerNotes(&b, r)
	writeRefusals(&b, r.Refusals)
	writeStreams(&b, "--- %s (%d bytes) ---\n", r.Stdout, r.Stderr)
	return b.String()
}

// writeLayerNotes writes what the command changed in the project view,
// the session's conflicts and the copies refreshed before it, a line each.
func writeLayerNotes(b *strings.Builder, r *session.Result) {
	if note := r.BehindNote(); note != "" {
		b.WriteString(note + "\n")
	}
	if note := r.ProjectNote("jail_diff, jail_apply"); note != "" {
		b.WriteString(note + "\n")
	}
	for _, line := range r.ConflictNotes() {
		b.WriteString(line + "\n")
	}
}

// maxRefusalLines bounds the refusals a result's text lists.
const maxRefusalLines = 5

// writeRefusals writes a line per connection the allowlist's proxy
// refused, the first maxRefusalLines of them.
func writeRefusals(b *strings.Builder, refusals []egress.Refusal) {
	for i, r := range refusals {
		if i == maxRefusalLines {
			fmt.Fprintf(b, "network: %d more refused (network_refusals lists them)\n", len(refusals)-i)
			break
		}
		fmt.Fprintf(b, "network: refused %s (%s): %s\n", net.JoinHostPort(r.Host, strconv.Itoa(r.Port)), r.Protocol, r.Reason)
	}
}

// writeStreams writes each stream that has text under a header made of
// format, its name and its byte count.
func writeStreams(b *strings.Builder, format string, stdout, stderr session.Stream) {
	for i, st := range [2]session.Stream{stdout, stderr} {
		if st.Text == "" {
			continue
		}
		fmt.Fprintf(b, format, [2]string{"stdout", "stderr"}[i], st.Bytes)
		b.WriteString(st.Text)
		if !strings.HasSuffix(st.Text, "\n") {
			b.WriteString("\n")
		}
	}
}

func progressToken(req mcp.CallToolRequest) mcp.ProgressToken {
	if req.Params.Meta == nil {
		return nil
	}
	return req.Params.Meta.ProgressToken
}

// progressReporter sends notifications/progress for token.
func progressReporter(ctx context.Context, token mcp.ProgressToken) func(time.Duration, string) {
	srv := server.ServerFromContext(ctx)
	return func(elapsed time.Duration, line string) {
		if srv == nil {
			return
		}
		params := map[string]any{
			"progressToken": token,
			"progress":      elapsed.Seconds(),
		}
		if line != "" {
			params["message"] = line
		}
		srv.SendNotificationToClient(ctx, "notifications/progress", params)
	}
}

// flushNotifications waits, briefly, for queued notifications to be written
// so that no progress notification follows the result on the wire.
func flushNotifications(ctx context.Context) {
	cs := server.ClientSessionFromContext(ctx)
	if cs == nil {
		return
	}
	ch := cs.NotificationChannel()
	deadline := time.Now().Add(200 * time.Millisecond)
	for len(ch) > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}
