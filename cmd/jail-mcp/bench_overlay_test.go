package main

import (
	"context"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// BenchmarkOverlay measures the project view (--overlay, bubblewrap only)
// against its baselines, each in the same run.
func BenchmarkOverlay(b *testing.B) {
	bw := testkit.Backends()[0]
	b.Run("per-call", func(b *testing.B) {
		// jailed_exec /bin/true with --overlay against one without, the
		// calls alternating between the two servers (x-plain: the ratio
		// of their sums), each server's agent warm.
		bin := productBinary(b)
		plain := startBinary(b, bw, bin, testkit.NewProject(b), testkit.ServerEnv())
		view := startBinary(b, bw, bin, testkit.NewProject(b), testkit.ServerEnv(), "--overlay", "on")
		args := map[string]any{"argv": []string{"/bin/true"}}
		plain.Exec(args)
		view.Exec(args)
		var tv, tp time.Duration
		call := func(ts *testkit.Server) time.Duration {
			t0 := time.Now()
			res, err := ts.Call(context.Background(), "jailed_exec", args)
			d := time.Since(t0)
			if err != nil || res.IsError {
				b.Fatalf("jailed_exec: %v %v", err, res)
			}
			return d
		}
		for b.Loop() {
			tv += call(view)
			b.StopTimer()
			tp += call(plain)
			b.StartTimer()
		}
		b.ReportMetric(float64(tp.Microseconds())/float64(b.N)/1000, "plain-ms")
		b.ReportMetric(float64(tv)/float64(tp), "x-plain")
	})
}
