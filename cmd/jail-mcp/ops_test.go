//go:build linux

package main

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// httpGet is GET path of the server at hs, with auth as the
// Authorization header when not empty.
func httpGet(t *testing.T, hs *testkit.HTTPServer, method, path, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, strings.TrimSuffix(hs.URL, "/mcp")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue is the value of the sample named series (with its labels as
// Prometheus's text format writes them, sorted) in text, or -1.
func metricValue(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// TestHTTPHealthAndMetrics: /healthz answers anyone and says nothing but
// that the server serves; /metrics wants the token and counts the calls,
// how commands ended, the bounds hit, the refusals (a bad request, an
// allowlist's) and the live sessions and agents.
func TestHTTPHealthAndMetrics(t *testing.T) {
	token := "jail-mcp-test-" + uuid.NewString()
	project := testkit.NewProject(t)
	hs := testkit.StartHTTP(t, project, testkit.ServerEnv(testkit.TestHosts+"=allowed.test=127.0.0.1,other.test=127.0.0.1", "JAIL_MCP_TOKEN="+token),
		"--network", "allow:allowed.test")
	bearer := "Bearer " + token

	for _, auth := range []string{"", "Bearer wrong-token-0123456789", bearer} {
		if code, body := httpGet(t, hs, http.MethodGet, "/healthz", auth); code != 200 || body != "ok\n" {
			t.Errorf("GET /healthz (Authorization %q): %d %q, want 200 ok", auth, code, body)
		}
	}
	if code, _ := httpGet(t, hs, http.MethodPost, "/healthz", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz: %d, want 405", code)
	}
	for _, auth := range []string{"", "Bearer wrong-token-0123456789"} {
		if code, body := httpGet(t, hs, http.MethodGet, "/metrics", auth); code != http.StatusUnauthorized || strings.Contains(body, "jail_mcp_") {
			t.Errorf("GET /metrics (Authorization %q): %d, want 401 and no metrics", auth, code)
		}
	}
	code, before := httpGet(t, hs, http.MethodGet, "/metrics", bearer)
	if code != 200 || metricValue(before, "jail_mcp_sessions") != 0 {
		t.Fatalf("GET /metrics: %d, sessions %v:\n%s", code, metricValue(before, "jail_mcp_sessions"), before)
	}

	s := hs.Connect(t, "")
	if res, raw := s.Exec(map[string]any{"command": "true"}); res.ExitCode != 0 || raw.IsError {
		t.Fatalf("true: %+v %s; stderr:\n%s", res, testkit.ResultText(raw), hs.Stderr)
	}
	s.Exec(map[string]any{"command": "exit 3"})
	s.Exec(map[string]any{"command": "sleep 5", "timeout_ms": 200})
	s.Exec(map[string]any{"command": "true", "cwd": "/definitely/not/here"})
	s.Exec(map[string]any{"command": "curl -fsS -m 5 http://other.test:1/"})
	s.Status()

	_, text := httpGet(t, hs, http.MethodGet, "/metrics", bearer)
	for _, want := range []struct {
		series string
		value  float64
	}{
		{`jail_mcp_tool_calls_total{outcome="ok",tool="jailed_exec"}`, 1},
		{`jail_mcp_tool_calls_total{outcome="error",tool="jailed_exec"}`, 4},
		{`jail_mcp_tool_calls_total{outcome="ok",tool="jail_status"}`, 1},
		{`jail_mcp_tool_call_duration_seconds_count{tool="jailed_exec"}`, 5},
		{`jail_mcp_commands_total{end="exited"}`, 3},
		{`jail_mcp_commands_total{end="timed_out"}`, 1},
		{`jail_mcp_limits_total{limit="timeout"}`, 1},
		{`jail_mcp_refusals_total{reason="input"}`, 1},
		{`jail_mcp_network_refusals_total`, 1},
		{`jail_mcp_sessions`, 1},
	} {
		if got := metricValue(text, want.series); got != want.value {
			t.Errorf("%s = %v, want %v", want.series, got, want.value)
		}
	}
	if agents := metricValue(text, "jail_mcp_agents"); agents < 1 {
		t.Errorf("jail_mcp_agents = %v, want the session's agents", agents)
	}
	if metricValue(text, "process_resident_memory_bytes") <= 0 || metricValue(text, "go_goroutines") <= 0 {
		t.Error("no process or Go runtime metrics")
	}

	// An ended session is no longer counted. (mcp-go's client sends its
	// DELETE without the token: sent here.)
	if r := hs.MustRaw(t, http.MethodDelete, s.ID, nil, ""); r.Code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", r.Code, r.Body)
	}
	var after string
	testkit.WaitFor(10*time.Second, func() bool {
		_, after = httpGet(t, hs, http.MethodGet, "/metrics", bearer)
		return metricValue(after, "jail_mcp_sessions") == 0
	})
	if n := metricValue(after, "jail_mcp_sessions"); n != 0 {
		t.Errorf("after DELETE: jail_mcp_sessions = %v; stderr:\n%s", n, hs.Stderr)
	}
}
