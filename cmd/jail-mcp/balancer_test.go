//go:build linux

package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/client"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// balancedSession is one MCP session driven through the balancer.
type balancedSession struct {
	c      *client.Client
	id     string
	server int // which server's jail it has: 0 or 1
	lines  int // lines its file has
}

// appendLine appends line n to the session's file in its jail and reads
// the file back: it must hold 1..n and be in the same jail as before.
func (s *balancedSession) appendLine(ctx context.Context, projects []string) error {
	n := s.lines + 1
	res, err := testkit.ExecVia(ctx, s.c, map[string]any{"command": fmt.Sprintf("echo %d >> $HOME/lines; cat $HOME/lines", n)})
	if err != nil {
		return err
	}
	var want strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if res.ExitCode != 0 || res.Stdout != want.String() {
		return fmt.Errorf("call %d: exit %d, file %q, want 1..%d", n, res.ExitCode, res.Stdout, n)
	}
	server := -1
	for i, p := range projects {
		if strings.HasPrefix(res.Jail, p+"/") {
			server = i
		}
	}
	if server < 0 || s.lines > 0 && server != s.server {
		return fmt.Errorf("call %d ran in %s, the session's jail was on server %d", n, res.Jail, s.server)
	}
	s.server, s.lines = server, n
	return nil
}

// TestBalancer: two servers behind HAProxy with deploy/haproxy.cfg; 32
// sessions at once, each writing and reading back a file in its jail over
// 20 calls, every call on the server that minted the session's id. Then
// one server is killed: the other's sessions go on untouched; the dead
// one's get a clean "unknown MCP session id", and a client that
// initializes again gets a working session on the survivor.
func TestBalancer(t *testing.T) {
	const sessions, calls = 32, 20
	token := "jail-mcp-test-" + uuid.NewString()
	servers, lb := testkit.StartBalanced(t, 2, token, testkit.ServerEnv())
	projects := []string{servers[0].Project, servers[1].Project}
	front := lb.Server(t, token)

	all := make([]*balancedSession, sessions)
	run := func(each func(i int, s *balancedSession) error) []error {
		errs := make([]error, sessions)
		var wg sync.WaitGroup
		for i := range all {
			wg.Go(func() { errs[i] = each(i, all[i]) })
		}
		wg.Wait()
		return errs
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	errs := run(func(i int, _ *balancedSession) error {
		c, _, err := front.Dial(ctx, "", token)
		if err != nil {
			return fmt.Errorf("initialize: %w", err)
		}
		s := &balancedSession{c: c, id: c.GetSessionId()}
		all[i] = s
		for range calls {
			if err := s.appendLine(ctx, projects); err != nil {
				return err
			}
		}
		return nil
	})
	perServer := [2]int{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("session %d: %v; balancer log:\n%s", i, err, lb.Log)
		}
		perServer[all[i].server]++
	}
	t.Logf("sessions per server: %v", perServer)
	if perServer[0] == 0 || perServer[1] == 0 {
		t.Fatalf("the balancer sent every session to one server: %v", perServer)
	}
	for _, s := range all {
		defer s.c.Close()
	}

	// Server 1 dies.
	dead := 1
	servers[dead].Cmd.Process.Kill()
	servers[dead].WaitExit(10 * time.Second)

	errs = run(func(i int, s *balancedSession) error {
		if s.server != dead {
			// Untouched: five more calls, the file whole.
			for range 5 {
				if err := s.appendLine(ctx, projects); err != nil {
					return fmt.Errorf("a survivor's session: %w", err)
				}
			}
			return nil
		}
		// A clean answer: the session is unknown, initialize again.
		r, err := front.Raw(ctx, http.MethodPost, s.id, nil, testkit.ToolsCallRPC(2, "true", nil))
		if err != nil {
			return fmt.Errorf("a dead server's session: %w", err)
		}
		if r.Code != http.StatusNotFound || !strings.Contains(r.Body, "unknown MCP session id: initialize a new session") {
			return fmt.Errorf("a dead server's session: %d %q, want 404 unknown session", r.Code, r.Body)
		}
		if _, err := testkit.ExecVia(ctx, s.c, map[string]any{"command": "true"}); err == nil {
			return fmt.Errorf("a dead server's session still runs calls")
		}
		c, _, err := front.Dial(ctx, "", token)
		if err != nil {
			return fmt.Errorf("initialize again: %w", err)
		}
		s.c.Close()
		*s = balancedSession{c: c, id: c.GetSessionId()}
		for range 3 {
			if err := s.appendLine(ctx, projects); err != nil {
				return fmt.Errorf("the new session: %w", err)
			}
		}
		if s.server == dead {
			return fmt.Errorf("the new session is on the dead server")
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("session %d: %v", i, err)
		}
	}
	if t.Failed() {
		t.Logf("balancer log:\n%s", lb.Log)
	}
}
