//go:build linux

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/client"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// balancedLoad is what one run of driveSessions measured.
type balancedLoad struct {
	perSecond float64
	latencyMS []float64 // every timed call's, sorted
}

// driveSessions opens n MCP sessions through front, makes one call in
// each (their agents start: not timed), runs idle between (so that the
// caller can look at memory), then times calls calls in each, all sessions
// at once, and ends them.
func driveSessions(b *testing.B, front *testkit.HTTPServer, token string, n, calls int, idle func()) balancedLoad {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	clients := make([]*client.Client, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range clients {
		wg.Go(func() {
			c, _, err := front.Dial(ctx, "", token)
			if err == nil {
				clients[i] = c
				_, err = testkit.ExecVia(ctx, c, map[string]any{"argv": []string{"/bin/true"}})
			}
			errs[i] = err
		})
	}
	wg.Wait()
	defer func() {
		for _, c := range clients {
			if c != nil {
				front.Raw(context.Background(), http.MethodDelete, c.GetSessionId(), nil, "")
				c.Close()
			}
		}
	}()
	for _, err := range errs {
		if err != nil {
			b.Fatalf("a session's first call: %v", err)
		}
	}
	if idle != nil {
		idle()
	}
	lat := make([][]float64, n)
	start := time.Now()
	for i, c := range clients {
		wg.Go(func() {
			for range calls {
				t0 := time.Now()
				res, err := testkit.ExecVia(ctx, c, map[string]any{"argv": []string{"/bin/true"}})
				if err != nil || res.ExitCode != 0 {
					errs[i] = err
					return
				}
				lat[i] = append(lat[i], float64(time.Since(t0).Microseconds())/1000)
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	for _, err := range errs {
		if err != nil {
			b.Fatalf("a timed call: %v", err)
		}
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	return balancedLoad{perSecond: float64(len(all)) / wall.Seconds(), latencyMS: all}
}

// percentile is the p-th percentile of sorted v.
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return v[min(len(v)-1, int(p/100*float64(len(v))))]
}

// BenchmarkBalancer is the load of a team deployment: 64 MCP sessions at
// once, each making jailed_exec /bin/true calls one after another, through
// HAProxy (deploy/haproxy.cfg) to two servers; and, as the baseline in the
// same run, the same 64 straight to one server. It reports calls per
// second and the calls' p50 and p99 for each, the ratio of the balanced
// calls per second to the direct ones, and memory per idle session (each
// session made one call, and waits): the server's resident set grown by
// the 64 sessions, and their session agents' resident sets (and, as root,
// their proportional sets, which count shared pages once).
//
//	go test ./cmd/jail-mcp -run '^$' -bench '^BenchmarkBalancer$' -benchtime 1x -count 3
func BenchmarkBalancer(b *testing.B) {
	const sessions = 64
	calls := 20
	if benchShort {
		calls = 3
	}
	token := "jail-mcp-bench-" + uuid.NewString()
	servers, lb := testkit.StartBalanced(b, 2, token, testkit.ServerEnv(), "--auth", "none")
	front := lb.Server(b, token)
	direct := servers[0]

	var direct1, balanced balancedLoad
	var serverKiB, agentMiB, agentPSS float64
	for b.Loop() {
		pid := direct.Cmd.Process.Pid
		before := procStatusMB(b, pid, "VmRSS")
		direct1 = driveSessions(b, direct, token, sessions, calls, func() {
			serverKiB = (procStatusMB(b, pid, "VmRSS") - before) * 1024 / sessions
			var agents, pss float64
			for _, a := range testkit.AgentsOf(pid) {
				agents += procStatusMB(b, a, "VmRSS")
				pss += pssMB(a)
			}
			agentMiB, agentPSS = agents/sessions, pss/sessions
		})
		balanced = driveSessions(b, front, token, sessions, calls, nil)
	}
	b.ReportMetric(direct1.perSecond, "direct-calls/s")
	b.ReportMetric(balanced.perSecond, "lb-calls/s")
	b.ReportMetric(balanced.perSecond/direct1.perSecond, "x-calls")
	b.ReportMetric(percentile(direct1.latencyMS, 50), "direct-p50-ms")
	b.ReportMetric(percentile(direct1.latencyMS, 99), "direct-p99-ms")
	b.ReportMetric(percentile(balanced.latencyMS, 50), "lb-p50-ms")
	b.ReportMetric(percentile(balanced.latencyMS, 99), "lb-p99-ms")
	b.ReportMetric(serverKiB, "server-KiB/session")
	b.ReportMetric(agentMiB, "agent-MiB/session")
	if agentPSS > 0 {
		b.ReportMetric(agentPSS, "agent-PSS-MiB/session")
	}
}

// pssMB is the proportional set size of pid in MiB (its share of pages it
// shares with others, the agents' binary among them), 0 where
// /proc/<pid>/smaps_rollup cannot be read (an agent is not dumpable: as
// root only).
func pssMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(v), "%f kB", &kb)
			return kb / 1024
		}
	}
	return 0
}
