package tools

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jail-mcp/jail-mcp/session"
)

var jobFields = fieldsOf("job")

type jobParams struct {
	JobID      string  `json:"job_id"`
	WaitMS     *int64  `json:"wait_ms"`
	Input      *string `json:"input"`
	CloseStdin bool    `json:"close_stdin"`
	Signal     string  `json:"signal"`
}

// JobResult is the structured result of jail_job.
type JobResult struct {
	Outcome
	Command   string `json:"command"`
	TTY       bool   `json:"tty"`
	StdinOpen bool   `json:"stdin_open"`
	Killed    string `json:"killed"`
}

// Job is the jail_job tool.
func (h *Handler) Job(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var p jobParams
	if err := decode(req, &p, jobFields); err != nil {
		return refuse("refused: %v", err), nil
	}
	if p.JobID == "" {
		return refuse("refused: job_id is required (jailed_exec returns it; jail_status lists the session's jobs)"), nil
	}
	if p.WaitMS != nil && *p.WaitMS < 0 {
		return refuse("refused: wait_ms must be 0 or more, got %d", *p.WaitMS), nil
	}
	s, err := h.Session(ctx)
	if err != nil {
		return refuse("refused: %v", err), nil
	}
	j, err := s.Job(p.JobID)
	if err != nil {
		return refuse("refused: %v", err), nil
	}
	if p.Input != nil || p.CloseStdin {
		in := ""
		if p.Input != nil {
			in = *p.Input
		}
		if err := j.Input(in, p.CloseStdin); err != nil {
			return refuse("refused: job %s: %v", j.ID, err), nil
		}
	}
	if p.Signal != "" {
		if err := j.Signal(p.Signal); err != nil {
			return refuse("refused: job %s: %v", j.ID, err), nil
		}
	}
	if p.WaitMS != nil && *p.WaitMS > 0 {
		wait := min(session.Millis(*p.WaitMS), h.Manager.Config().MaxTimeout)
		stop := jobProgress(ctx, req, j)
		j.Wait(ctx, wait)
		stop()
	} else if p.Signal == "KILL" {
		// KILL ends the job: its end comes with this read.
		j.WaitEnd(ctx, 10*time.Second)
	}
	r := j.Read()
	if r.Result != nil {
		warnResult(ctx, r.Result)
	}
	out := h.jobResult(s, r)
	return structured(out, renderJob(r), false), nil
}

// execJob is jailed_exec with background, yield_ms or tty: the command runs
// as a job, which this call returns at once, after yield_ms, or (tty
// alone) at its end, as a plain call would.
func (h *Handler) execJob(ctx context.Context, req mcp.CallToolRequest, s *session.Session, r session.Request, p execParams) (*mcp.CallToolResult, error) {
	r.Progress = nil
	j, err := s.StartJob(ctx, r, session.JobOptions{TTY: p.TTY, KeepInput: p.Background || p.TTY})
	if err != nil {
		return refuseRun(err), nil
	}
	switch {
	case p.Background:
	case p.YieldMS != nil:
		stop := jobProgress(ctx, req, j)
		j.WaitEnd(ctx, session.Millis(*p.YieldMS))
		stop()
	default:
		stop := jobProgress(ctx, req, j)
		j.WaitEnd(ctx, time.Duration(math.MaxInt64))
		stop()
	}
	if !p.Background {
		select {
		case <-ctx.Done():
			// The call was cancelled while it waited: the command goes
			// with it, as a call's does.
			j.Kill(fmt.Errorf("the call was cancelled: %w", context.Cause(ctx)))
		default:
		}
	}
	rd := j.Read()
	if rd.Err != nil {
		s.ForgetJob(j.ID)
		return refuseRun(rd.Err), nil
	}
	cfg := h.Manager.Config()
	out := ExecResult{Outcome: newOutcome(rd.Stdout, rd.Stderr, rd.Duration, s.Name, s.Path, cfg.Backend.Name(), cfg.Backend.Confined())}
	if rd.Running || p.Background {
		// A job from now on (a background job that already ended stays one
		// too: its id was asked for).
		out.JobID, out.Running, out.OutputPath = j.ID, rd.Running, rd.OutputPath
		if res := rd.Result; res != nil {
			fillEnd(&out, res)
			warnResult(ctx, res)
		}
		return structured(out, renderJob(rd), false), nil
	}
	// It ended while the call waited: a plain result.
	s.ForgetJob(j.ID)
	res := rd.Result
	warnResult(ctx, res)
	fillEnd(&out, res)
	if res.Stdout.Truncated || res.Stderr.Truncated {
		out.OutputPath = rd.OutputPath
	}
	return structured(out, renderExec(res), res.Failed()), nil
}

// fillEnd copies how a command ended into out.
func fillEnd(out *ExecResult, res *session.Result) {
	out.ended(res)
	out.Cancelled, out.Agent = res.End == session.Cancelled, agentNote(res)
}

// refuseRun is the result of a command that could not run.
func refuseRun(err error) *mcp.CallToolResult {
	return refuse("%s", session.Refusal(err))
}

func (h *Handler) jobResult(s *session.Session, r session.JobRead) JobResult {
	cfg := h.Manager.Config()
	out := JobResult{
		Outcome: newOutcome(r.Stdout, r.Stderr, r.Duration, s.Name, s.Path, cfg.Backend.Name(), cfg.Backend.Confined()),
		Command: r.Command, TTY: r.TTY, StdinOpen: r.InputOpen, Killed: r.Killed,
	}
	out.JobID, out.Running, out.OutputPath = r.ID, r.Running, r.OutputPath
	if res := r.Result; res != nil {
		out.ended(res)
	} else if r.Err != nil {
		out.ExitCode, out.Killed = -1, r.Err.Error()
	}
	return out
}

// renderJob is the text of a job's read: its state on one line, then what
// it printed since the last read.
func renderJob(r session.JobRead) string {
	var b strings.Builder
	d := r.Duration.Round(time.Millisecond)
	switch res := r.Result; {
	case r.Running:
		input := "input closed"
		if r.InputOpen {
			input = "input open"
		}
		fmt.Fprintf(&b, "job %s running for %v (%s); jail_job reads, waits for, feeds and signals it", r.ID, d, input)
	case r.Err != nil:
		fmt.Fprintf(&b, "job %s did not run: %v", r.ID, r.Err)
	case r.Killed != "":
		fmt.Fprintf(&b, "job %s ended after %v: %s; it and everything it started were killed", r.ID, d, r.Killed)
	default:
		fmt.Fprintf(&b, "job %s ended: %s", r.ID, res.Status())
		if note := res.RefusedWriteNote(); note != "" {
			b.WriteString("\n" + note)
		}
		if res.Stopped != "" {
			b.WriteString("\nended: " + res.Stopped)
		}
	}
	b.WriteString("\n")
	if res := r.Result; res != nil && !r.Running {
		writeLayerNotes(&b, res)
	}
	writeStreams(&b, "--- new %s (%d bytes in all) ---\n", r.Stdout, r.Stderr)
	return b.String()
}

// jobProgress reports a job's progress to the client while a call waits
// for it, when the client asked for progress.
func jobProgress(ctx context.Context, req mcp.CallToolRequest, j *session.Job) func() {
	token := progressToken(req)
	if token == nil {
		return func() {}
	}
	report := progressReporter(ctx, token)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				report(time.Since(j.Started), j.LastLine())
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
		flushNotifications(ctx)
	}
}
