package session

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/limits"
)

// TestSettle: how a command ended is decided once, in this order: the
// agent's loss, the timeout, a bound, the cancellation, a signal, the exit;
// a write stopped at the per-file bound is the command's own end.
func TestSettle(t *testing.T) {
	killed := jail.Exit{Code: -1, Signal: syscall.SIGKILL}
	xfsz := jail.Exit{Code: -1, Signal: syscall.SIGXFSZ}
	tests := []struct {
		name          string
		stopped       End
		bound, kernel limits.Bound
		exit          jail.Exit
		lost          error
		end           End
		limit         limits.Bound
		status        int
		failed        bool
		says          string
	}{
		{"exit 0", Exited, "", "", jail.Exit{}, nil, Exited, "", 0, false, "exit 0 in"},
		{"exit 3", Exited, "", "", jail.Exit{Code: 3}, nil, Exited, "", 3, true, "exit 3 in"},
		{"a signal of its own", Exited, "", "", jail.Exit{Code: -1, Signal: syscall.SIGTERM}, nil, Signalled, "", 128 + 15, true, "killed by SIGTERM"},
		{"timed out", TimedOut, "", "", killed, nil, TimedOut, limits.BoundTimeout, 128 + 9, true, "timed out after"},
		{"the watchdog's bound", OverBound, limits.BoundProcs, "", killed, nil, OverBound, limits.BoundProcs, 128 + 9, true, "procs bound (--max-procs)"},
		{"the kernel's bound", Exited, "", limits.BoundMemory, killed, nil, OverBound, limits.BoundMemory, 128 + 9, true, "memory bound (--max-memory)"},
		{"the kernel's bound over a cancellation", Cancelled, "", limits.BoundMemory, killed, nil, OverBound, limits.BoundMemory, 128 + 9, true, "memory bound"},
		{"a timeout over the kernel's bound", TimedOut, "", limits.BoundMemory, killed, nil, TimedOut, limits.BoundTimeout, 128 + 9, true, "timed out"},
		{"cancelled", Cancelled, "", "", killed, nil, Cancelled, "", 128 + 9, true, "cancelled after"},
		{"agent lost", Exited, "", "", jail.Exit{}, errors.New("gone"), AgentLost, "", 0, true, "lost after"},
		{"agent lost over a timeout", TimedOut, "", "", killed, errors.New("gone"), AgentLost, "", 128 + 9, true, "lost after"},
		{"SIGXFSZ", Exited, "", "", xfsz, nil, Signalled, limits.BoundFileSize, 128 + 25, true, "killed by SIGXFSZ"},
		{"a shell's 153", Exited, "", "", jail.Exit{Code: 128 + 25}, nil, Exited, limits.BoundFileSize, 153, true, "per-file size bound"},
		{"SIGXFSZ found as the disk bound", OverBound, limits.BoundDisk, "", xfsz, nil, Signalled, limits.BoundFileSize, 128 + 25, true, "killed by SIGXFSZ"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Result{Duration: 1500 * time.Millisecond, Timeout: time.Second}
			r.settle(tt.stopped, tt.bound, tt.kernel, tt.exit, tt.lost)
			if r.End != tt.end || r.Limit != tt.limit || r.ExitStatus() != tt.status || r.Failed() != tt.failed {
				t.Errorf("end %d limit %q status %d failed %t, want %d %q %d %t", r.End, r.Limit, r.ExitStatus(), r.Failed(), tt.end, tt.limit, tt.status, tt.failed)
			}
			if s := r.Status(); !strings.Contains(s, tt.says) || strings.Contains(s, "\n") {
				t.Errorf("status %q, want one line with %q", s, tt.says)
			}
		})
	}
}

// TestLimitAfterExit: the jail found over its disk bound once the command
// ended is a note on its own end, which says what to do.
func TestLimitAfterExit(t *testing.T) {
	r := &Result{}
	r.settle(Exited, "", "", jail.Exit{}, nil)
	r.Limit = limits.BoundDisk
	if !r.LimitAfterExit() || !r.Failed() || r.ExitStatus() != 0 {
		t.Errorf("after exit %t failed %t status %d, want true true 0", r.LimitAfterExit(), r.Failed(), r.ExitStatus())
	}
	if s := r.Status(); !strings.HasPrefix(s, "exit 0 in") || !strings.Contains(s, "jail_reset") {
		t.Errorf("status %q", s)
	}
	r.settle(OverBound, limits.BoundDisk, "", jail.Exit{Code: -1, Signal: syscall.SIGKILL}, nil)
	if r.LimitAfterExit() {
		t.Error("a command killed for the disk bound reported as over it after its exit")
	}
}

// TestRefusal: one line, which names what was wrong.
func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{inputErrorf("cwd %q: no such directory", "x"), `refused: cwd "x": no such directory`},
		{fmt.Errorf("open: %w", jail.ErrUnavailable), "refused: no jail can confine commands here: open: "},
		{errors.New("fork: no memory"), "could not start the command: fork: no memory"},
	} {
		if got := Refusal(tc.err); !strings.HasPrefix(got, tc.want) {
			t.Errorf("Refusal(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
