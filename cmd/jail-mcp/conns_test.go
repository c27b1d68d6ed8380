//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/cli"
	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/metrics"
	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// fakeConn is a connection with a remote address and nothing behind it.
type fakeConn struct {
	remote net.Addr
	closed atomic.Bool
}

func (c *fakeConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (c *fakeConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c *fakeConn) Close() error                     { c.closed.Store(true); return nil }
func (c *fakeConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8765} }
func (c *fakeConn) RemoteAddr() net.Addr             { return c.remote }
func (c *fakeConn) SetDeadline(time.Time) error      { return nil }
func (c *fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fakeConn) SetWriteDeadline(time.Time) error { return nil }

// TestConnLimiterSheds: over a bound, the connection that costs least to
// lose goes, oldest first within its class: idle unauthenticated, new,
// unauthenticated with a request in flight, idle authenticated; an
// authenticated one with a request in flight never, and the newcomer is
// refused when nothing else is left. Over the bound of one address, only
// that address's connections go.
func TestConnLimiterSheds(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	port := 40000
	dial := func(l *connLimiter, host string) (*limitedConn, *fakeConn) {
		port++
		c := &fakeConn{remote: &net.TCPAddr{IP: net.ParseIP(host), Port: port}}
		return l.admit(c), c
	}
	// kept gives lc a request past the token, in flight.
	kept := func(l *connLimiter, lc *limitedConn) {
		l.connState(lc, http.StateActive)
		l.trust(lc)
	}

	t.Run("order", func(t *testing.T) {
		l := newConnLimiter(nil, 5, 5, nil, log)
		k, _ := dial(l, "192.0.2.1")
		kept(l, k)
		trustedIdle, tic := dial(l, "192.0.2.2")
		kept(l, trustedIdle)
		l.connState(trustedIdle, http.StateIdle)
		active, ac := dial(l, "192.0.2.3")
		l.connState(active, http.StateActive)
		_, nc := dial(l, "192.0.2.4")
		idle, ic := dial(l, "192.0.2.5")
		l.connState(idle, http.StateActive)
		l.connState(idle, http.StateIdle)
		if l.count() != 5 {
			t.Fatalf("%d open, want 5", l.count())
		}
		// Each newcomer is made busy and authenticated at once, so that
		// the next one must take from the others.
		for i, want := range []*fakeConn{ic, nc, ac, tic} {
			x, _ := dial(l, "192.0.2.9")
			if x == nil {
				t.Fatalf("newcomer %d refused", i)
			}
			kept(l, x)
			if !want.closed.Load() {
				t.Errorf("newcomer %d: the %s connection was not the one shed", i, []string{"idle", "new", "active", "authenticated idle"}[i])
			}
			if l.count() != 5 {
				t.Errorf("newcomer %d: %d open, want 5", i, l.count())
			}
		}
		x, xc := dial(l, "192.0.2.9")
		if x != nil || !xc.closed.Load() {
			t.Fatalf("a newcomer with every connection busy and authenticated: admitted %t, closed %t", x != nil, xc.closed.Load())
		}
		if l.count() != 5 {
			t.Errorf("%d open after a refusal, want 5", l.count())
		}
		// A connection that closes makes room at once.
		k.Close()
		if y, _ := dial(l, "192.0.2.9"); y == nil || l.count() != 5 {
			t.Errorf("after a close: admitted %t, %d open", y != nil, l.count())
		}
	})

	t.Run("per address", func(t *testing.T) {
		l := newConnLimiter(nil, 10, 2, nil, log)
		a1, _ := dial(l, "192.0.2.1")
		kept(l, a1)
		a2, a2c := dial(l, "192.0.2.1")
		kept(l, a2)
		b1, b1c := dial(l, "192.0.2.2")
		l.connState(b1, http.StateActive)
		l.connState(b1, http.StateIdle)
		if a3, a3c := dial(l, "192.0.2.1"); a3 != nil || !a3c.closed.Load() {
			t.Errorf("a third connection of an address bound to 2, both busy: admitted")
		}
		l.connState(a2, http.StateIdle)
		if a4, _ := dial(l, "192.0.2.1"); a4 == nil || !a2c.closed.Load() || b1c.closed.Load() {
			t.Errorf("a third connection of an address with one idle: admitted %t, its idle one shed %t, another address's shed %t", a4 != nil, a2c.closed.Load(), b1c.closed.Load())
		}
		if l.count() != 3 || len(l.addrs) != 2 {
			t.Errorf("%d open from %d addresses, want 3 from 2", l.count(), len(l.addrs))
		}
	})
}

// rawConn is one kept-alive connection opened by hand.
type rawConn struct {
	net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, hs *testkit.HTTPServer) *rawConn {
	t.Helper()
	u, err := url.Parse(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{Conn: c, br: bufio.NewReader(c)}
}

// ask sends one request and reads its answer; the connection stays open.
func (c *rawConn) ask(t *testing.T, request string) int {
	t.Helper()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatalf("send: %v", err)
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("answer: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// ended reports whether the server closes the connection within 30 s
// (reading and dropping whatever it sends first).
func (c *rawConn) ended() bool {
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := io.Copy(io.Discard, c.br)
	return err == nil || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset")
}

const (
	healthzRequest = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	// An initialize without the token: 401.
	unauthorizedRequest = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
)

// metricSum is the sum of the samples of name in a Prometheus text.
func metricSum(text, name string) float64 {
	sum := 0.0
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		if i := strings.LastIndexByte(rest, ' '); i >= 0 {
			var v float64
			fmt.Sscan(rest[i+1:], &v)
			sum += v
		}
	}
	return sum
}

// TestHTTPConnectionFlood: many more kept-alive connections than
// --max-conns (fewer than this test's descriptors), after a 401 or
// /healthz or with nothing sent, as in issue 27: the server closes the
// flood's to stay within the bound, and meanwhile a session's call in
// flight goes on, the session runs more calls, and a new session
// initializes and runs one.
func TestHTTPConnectionFlood(t *testing.T) {
	const maxConns, flood = 64, 400
	token := "jail-mcp-test-" + uuid.NewString()
	hs := testkit.StartHTTP(t, testkit.NewProject(t), testkit.ServerEnv("JAIL_MCP_TOKEN="+token), "--max-conns", fmt.Sprint(maxConns))
	if !strings.Contains(hs.Stderr.String(), fmt.Sprintf("max_conns=%d max_conns_per_addr=%d", maxConns, maxConns)) {
		t.Errorf("starting line does not give the bounds: %s", hs.Stderr)
	}
	s := hs.Connect(t, "")
	if res, raw := s.Exec(map[string]any{"command": "echo before"}); res.Stdout != "before\n" {
		t.Fatalf("%+v %s", res, testkit.ResultText(raw))
	}
	// A call that runs until the test lets it end.
	release := filepath.Join(s.Jail(), "release")
	inFlight := s.Background(t.Context(), `while [ ! -e "$HOME/release" ]; do sleep 0.05; done; echo released`)

	conns := make([]*rawConn, 0, flood)
	for i := range flood {
		c := dialRaw(t, hs)
		switch i % 4 {
		case 0, 1:
			if code := c.ask(t, healthzRequest); code != http.StatusOK {
				t.Fatalf("connection %d: /healthz %d", i, code)
			}
		case 2:
			if code := c.ask(t, unauthorizedRequest); code != http.StatusUnauthorized {
				t.Fatalf("connection %d: POST /mcp without the token %d", i, code)
			}
		case 3: // nothing sent
		}
		conns = append(conns, c)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if res, raw := s.Exec(map[string]any{"command": "echo during"}); res.Stdout != "during\n" {
		t.Errorf("the session's call after the flood: %+v %s", res, testkit.ResultText(raw))
	}
	c, _, err := hs.Dial(ctx, "", token)
	if err != nil {
		t.Fatalf("a new session after the flood: %v", err)
	}
	defer c.Close()
	if r, err := testkit.ExecVia(ctx, c, map[string]any{"command": "echo new"}); err != nil || r.Stdout != "new\n" {
		t.Errorf("the new session's call: %+v %v", r, err)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-inFlight:
		if r.Err != nil || r.Res.IsError || !strings.Contains(testkit.ResultText(r.Res), "released") {
			t.Errorf("the call in flight during the flood: %v %s", r.Err, testkit.ResultText(r.Res))
		}
	case <-ctx.Done():
		t.Fatal("the call in flight did not return")
	}

	code, text := httpGet(t, hs, http.MethodGet, "/metrics", "Bearer "+token)
	open, shed := metricValue(text, "jail_mcp_http_connections"), metricSum(text, "jail_mcp_http_connections_shed_total")
	if code != http.StatusOK || open > maxConns || shed < flood-maxConns {
		t.Errorf("/metrics: %d, %v open (want at most %d), %v shed (want at least %d)", code, open, maxConns, shed, flood-maxConns)
	}
	if metricValue(text, "jail_mcp_http_connections_refused_total") != 0 {
		t.Errorf("connections refused, where unauthenticated ones could be shed:\n%s", text)
	}
	// The oldest of the flood were shed: the first is closed.
	if !conns[0].ended() {
		t.Error("the flood's first connection is still open")
	}
	if !testkit.Warned(hs, "HTTP connections shed: too many open", fmt.Sprintf("max_conns=%d", maxConns)) {
		t.Errorf("no warning of the shedding:\n%s", hs.Stderr)
	}
}

// TestHTTPConnsFitDescriptors: --max-conns is held to half the server's
// descriptor limit: the default is lowered, with a warning; a value the
// operator gave is refused.
func TestHTTPConnsFitDescriptors(t *testing.T) {
	hs := testkit.StartHTTPCmd(t, testkit.NewProject(t), "127.0.0.1:0", testkit.ServerEnv(), testkit.LimitFiles(256))
	if !strings.Contains(hs.Stderr.String(), "max_conns=128 max_conns_per_addr=128") || !strings.Contains(hs.Stderr.String(), "--max-conns lowered to half the descriptor limit") {
		t.Errorf("a server with 256 descriptors:\n%s", hs.Stderr)
	}
	project := testkit.NewProject(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "serve", "--project", project, "--listen", "127.0.0.1:0", "--max-conns", "200")
	cmd.Env = testkit.ServerEnv()
	testkit.LimitFiles(256)(cmd)
	var stderr testkit.SyncBuffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("--max-conns 200 with 256 descriptors: %v, want exit status 2", err)
	}
	cfgOneLine(t, stderr.String())
	if want := "invalid --max-conns 200: more than half of this process's descriptor limit 256 (ulimit -n): lower it to 128 or raise the limit"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}

// slowToolServer serves the HTTP transport from this process, as
// startHTTPInProcess does, with limits lim and one tool, "wait", that
// returns after ms milliseconds, or says it was cancelled.
func slowToolServer(t *testing.T, lim httpLimits) *testkit.HTTPServer {
	t.Helper()
	stderr := &testkit.SyncBuffer{}
	log := cli.NewLogger(stderr, slog.LevelDebug)
	sessions := newHTTPSessions(nil, log, cli.DefaultMaxSessions)
	srv := server.NewMCPServer("jail-mcp-test", "0", server.WithToolCapabilities(false))
	srv.AddTool(mcp.NewTool("wait", mcp.WithNumber("ms")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-time.After(time.Duration(req.GetFloat("ms", 0)) * time.Millisecond):
			return mcp.NewToolResultText("waited"), nil
		case <-ctx.Done():
			return mcp.NewToolResultError("cancelled: " + context.Cause(ctx).Error()), nil
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return testkit.InProcess(t, ln, stderr, func(ctx context.Context) error {
		met := metrics.New(sessions.count, func() int { return 0 })
		return serveHTTP(ctx, ln, srv, sessions, met, cli.Config{MaxTimeout: time.Minute}, lim, log)
	})
}

// TestHTTPTimeouts: a connection that sends its request's header or body
// slowly, or stays idle between requests, is closed after its timeout; a
// tool call and a GET stream that last many times every timeout are not.
func TestHTTPTimeouts(t *testing.T) {
	const d = 200 * time.Millisecond
	hs := slowToolServer(t, httpLimits{maxConns: 64, maxConnsPerAddr: 64, readHeader: d, read: d, idle: d})

	c, _, err := hs.Dial(t.Context(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id := c.GetSessionId()
	// The GET stream of the session, opened by hand.
	stream := dialRaw(t, hs)
	fmt.Fprintf(stream, "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\nMCP-Protocol-Version: %s\r\n\r\n", id, testkit.LegacyVersion)
	stream.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(stream.br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", resp, err)
	}

	// Slow ones, each started now.
	slowHeader := dialRaw(t, hs)
	io.WriteString(slowHeader, "GET /healthz HTTP/1.1\r\n")
	slowBody := dialRaw(t, hs)
	io.WriteString(slowBody, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":")
	idle := dialRaw(t, hs)
	if code := idle.ask(t, healthzRequest); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}

	// A call of 15 times every timeout.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := testkit.CallTool(ctx, c, "wait", map[string]any{"ms": 15 * d.Milliseconds()})
	if err != nil || res.IsError || testkit.ResultText(res) != "waited" {
		t.Errorf("a call longer than the timeouts: %v %s", err, testkit.ResultText(res))
	}
	for name, rc := range map[string]*rawConn{"slow header": slowHeader, "slow body": slowBody, "idle": idle} {
		if !rc.ended() {
			t.Errorf("%s: the connection is still open 30 s after its timeout of %v", name, d)
		}
	}
	// The stream outlived them all, and the call: still open.
	stream.SetReadDeadline(time.Now().Add(2 * d))
	_, err = io.Copy(io.Discard, resp.Body)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("the GET stream after %v: %v, want it still open", 15*d, err)
	}
}
