// Package metrics is the server's Prometheus metrics, served over HTTP at
// /metrics: tool calls and their durations, how commands ended, bounds
// hit, refusals, and the live sessions and agents.
package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/jail-mcp/jail-mcp/session"
)

// Metrics holds the server's metrics in a registry of their own (with the
// Go runtime's and the process's); it is a session.Observer.
type Metrics struct {
	reg          *prometheus.Registry
	calls        *prometheus.CounterVec
	durations    *prometheus.HistogramVec
	commands     *prometheus.CounterVec
	limits       *prometheus.CounterVec
	refusals     *prometheus.CounterVec
	netRefusals  prometheus.Counter
	connsShed    *prometheus.CounterVec
	connsRefused prometheus.Counter
}

// New registers the metrics; sessions and agents count the live MCP
// sessions and session agents when scraped.
func New(sessions, agents func() int) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jail_mcp_tool_calls_total", Help: "MCP tool calls, by tool and outcome (ok, or error: the result's isError).",
		}, []string{"tool", "outcome"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "jail_mcp_tool_call_duration_seconds", Help: "How long MCP tool calls took, by tool.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 600},
		}, []string{"tool"}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jail_mcp_commands_total", Help: "Commands that ran (calls and jobs), by how they ended: exited, signalled, timed_out, over_bound, cancelled, agent_lost.",
		}, []string{"end"}),
		limits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jail_mcp_limits_total", Help: "Commands that hit a bound, by bound: timeout, procs, memory, disk, file_size.",
		}, []string{"limit"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jail_mcp_refusals_total", Help: "Calls that ran no command, by why: input (a bad request), no_jail (nothing confines here: refused, fail closed), start (the start failed).",
		}, []string{"reason"}),
		netRefusals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jail_mcp_network_refusals_total", Help: "Connections and requests a session's proxy refused: an allowlist's refusals, and masked credentials' placeholders sent where they are not bound.",
		}),
		connsShed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jail_mcp_http_connections_shed_total", Help: "HTTP connections closed to make room under --max-conns or --max-conns-per-addr, by what they were: idle, new, active (unauthenticated), authenticated_idle.",
		}, []string{"class"}),
		connsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jail_mcp_http_connections_refused_total", Help: "HTTP connections refused (503) because every open one was authenticated and busy.",
		}),
	}
	m.reg.MustRegister(m.calls, m.durations, m.commands, m.limits, m.refusals, m.netRefusals, m.connsShed, m.connsRefused,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "jail_mcp_sessions", Help: "Live MCP sessions (each its own jail)."},
			func() float64 { return float64(sessions()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "jail_mcp_agents", Help: "Live session agents (one per session and policy)."},
			func() float64 { return float64(agents()) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Connections registers the gauge of open HTTP connections, counted when
// scraped.
func (m *Metrics) Connections(open func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "jail_mcp_http_connections", Help: "Open HTTP connections."},
		func() float64 { return float64(open()) }))
}

// ConnShed counts an HTTP connection closed to make room.
func (m *Metrics) ConnShed(class string) { m.connsShed.WithLabelValues(class).Inc() }

// ConnRefused counts an HTTP connection refused.
func (m *Metrics) ConnRefused() { m.connsRefused.Inc() }

// Handler serves the metrics in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Tools is mcp-go tool middleware that counts every call and its time.
func (m *Metrics) Tools(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		res, err := next(ctx, req)
		outcome := "ok"
		if err != nil || res == nil || res.IsError {
			outcome = "error"
		}
		m.calls.WithLabelValues(req.Params.Name, outcome).Inc()
		m.durations.WithLabelValues(req.Params.Name).Observe(time.Since(start).Seconds())
		return res, err
	}
}

// Ran counts how a command ended, the bound it hit, and its connections
// refused.
func (m *Metrics) Ran(res *session.Result) {
	m.commands.WithLabelValues(res.End.String()).Inc()
	if res.Limit != "" {
		m.limits.WithLabelValues(string(res.Limit)).Inc()
	}
	m.netRefusals.Add(float64(len(res.Refusals)))
}

// Refused counts a call that ran no command.
func (m *Metrics) Refused(err error) {
	m.refusals.WithLabelValues(session.RefusalKind(err)).Inc()
}
