//go:build unix

package testkit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jail-mcp/jail-mcp/tools"
)

// HTTPServer is the real server, serving streamable HTTP.
type HTTPServer struct {
	T       testing.TB
	Cmd     *exec.Cmd
	Stderr  *SyncBuffer
	Project string
	URL     string // http://127.0.0.1:PORT/mcp, whatever address it listens on
	Token   string

	exited  chan struct{}
	waitErr error // cmd.Wait's, once exited is closed
}

var httpListenRE = regexp.MustCompile(`listen=(http://\S+/mcp)`)

// StartHTTP starts the server on a free loopback port.
func StartHTTP(t testing.TB, project string, env []string, args ...string) *HTTPServer {
	t.Helper()
	return StartHTTPOn(t, project, "127.0.0.1:0", env, args...)
}

// StartHTTPOn starts the server listening on listen, and reads the address
// it got from its starting line. The server is stopped (SIGTERM, then
// InProcess is the HTTPServer of a server this process runs on ln, which
// serve runs until its context ends, when the test ends.
func InProcess(t *testing.T, ln net.Listener, stderr *SyncBuffer, serve func(ctx context.Context) error) *HTTPServer {
	hs := &HTTPServer{T: t, Stderr: stderr, exited: make(chan struct{}), URL: "http://" + ln.Addr().String() + "/mcp"}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		hs.waitErr = serve(ctx)
		close(hs.exited)
	}()
	t.Cleanup(func() {
		cancel()
		<-hs.exited
	})
	return hs
}

// SIGKILL) when the test ends.
func StartHTTPOn(t testing.TB, project, listen string, env []string, args ...string) *HTTPServer {
	t.Helper()
	return StartHTTPCmd(t, project, listen, env, nil, args...)
}

// LimitFiles is a setup of StartHTTPCmd: the server runs with at most n
// open descriptors (soft and hard: Go raises its soft limit to the hard
// one), under prlimit(1), which keeps its pid.
func LimitFiles(n int) func(*exec.Cmd) {
	return func(cmd *exec.Cmd) {
		prlimit, err := exec.LookPath("prlimit")
		if err != nil {
			prlimit = "/usr/bin/prlimit"
		}
		cmd.Args = append([]string{prlimit, "--nofile=" + strconv.Itoa(n) + ":" + strconv.Itoa(n), "--", cmd.Path}, cmd.Args[1:]...)
		cmd.Path = prlimit
	}
}

// StartHTTPCmd is StartHTTPOn with setup, when not nil, adjusting the
// server's command before it starts.
func StartHTTPCmd(t testing.TB, project, listen string, env []string, setup func(*exec.Cmd), args ...string) *HTTPServer {
	t.Helper()
	hs := &HTTPServer{T: t, Stderr: &SyncBuffer{}, Project: project, exited: make(chan struct{})}
	// The token, as the server takes it: from its variable, or from the
	// file --token-file names (never on the command line).
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "JAIL_MCP_TOKEN="); ok {
			hs.Token = v
		}
	}
	if i := slices.Index(args, "--token-file"); i >= 0 && i+1 < len(args) {
		if b, err := os.ReadFile(args[i+1]); err == nil {
			hs.Token = strings.TrimSuffix(string(b), "\n")
		}
	}
	hs.Cmd = exec.Command(os.Args[0], append([]string{"serve", "--project", project, "--listen", listen}, args...)...)
	hs.Cmd.Env = env
	hs.Cmd.Dir = project
	hs.Cmd.Stderr = hs.Stderr
	if setup != nil {
		setup(hs.Cmd)
	}
	if err := hs.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		hs.waitErr = hs.Cmd.Wait()
		close(hs.exited)
	}()
	t.Cleanup(hs.Stop)
	var addr string
	WaitFor(30*time.Second, func() bool {
		if m := httpListenRE.FindStringSubmatch(hs.Stderr.String()); m != nil {
			addr = m[1]
			return true
		}
		return hs.HasExited()
	})
	if addr == "" {
		if hs.HasExited() {
			t.Fatalf("server exited before listening: %v; stderr:\n%s", hs.waitErr, hs.Stderr)
		}
		t.Fatalf("server did not say where it listens within 30 s; stderr:\n%s", hs.Stderr)
	}
	u, err := url.Parse(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	_, port, err := net.SplitHostPort(u.Host)
	if err != nil || port == "0" {
		t.Fatalf("listen address %q: no port", addr)
	}
	// Whatever it listens on (0.0.0.0, [::]), it is reached over loopback.
	hs.URL = "http://" + net.JoinHostPort("127.0.0.1", port) + "/mcp"
	return hs
}

// HasExited reports whether the server process has exited.
func (hs *HTTPServer) HasExited() bool {
	select {
	case <-hs.exited:
		return true
	default:
		return false
	}
}

// WaitExit waits up to d for the server to exit: whether it did, and
// cmd.Wait's error.
func (hs *HTTPServer) WaitExit(d time.Duration) (bool, error) {
	select {
	case <-hs.exited:
		return true, hs.waitErr
	case <-time.After(d):
		return false, nil
	}
}

// Stop ends the server (SIGTERM, then SIGKILL) and waits for it.
func (hs *HTTPServer) Stop() {
	if hs.HasExited() {
		return
	}
	hs.Cmd.Process.Signal(syscall.SIGTERM)
	if ok, _ := hs.WaitExit(10 * time.Second); !ok {
		hs.Cmd.Process.Kill()
		<-hs.exited
	}
}

// Jail is the path of the jail named name.
func (hs *HTTPServer) Jail(name string) string {
	return filepath.Join(hs.Project, ".agent-home", name)
}

// Dial opens an MCP session with the mcp-go client. version "" is the
// client's default, which probes the sessionless 2026-07-28 first and falls
// back to the handshake when the server refuses it. The token, when given,
// travels as a bearer token.
func (hs *HTTPServer) Dial(ctx context.Context, version, token string) (*client.Client, *mcp.InitializeResult, error) {
	// Quiet: closing a client after the server stopped is expected here.
	opts := []transport.StreamableHTTPCOption{transport.WithHTTPLogger(slog.New(slog.DiscardHandler))}
	if token != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	}
	tr, err := transport.NewStreamableHTTP(hs.URL, opts...)
	if err != nil {
		return nil, nil, err
	}
	c := client.NewClient(tr)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		return nil, nil, err
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = version
	req.Params.ClientInfo = mcp.Implementation{Name: "jail-mcp-http-test", Version: "1"}
	res, err := c.Initialize(ctx, req)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, res, nil
}

// HTTPSession is one MCP session of the server, driven by the mcp-go client.
type HTTPSession struct {
	T      *testing.T
	Server *HTTPServer
	Client *client.Client
	ID     string // the MCP session id
	jail   string // its jail, once asked
}

// Connect opens an MCP session with the server's token, if it has one; the
// client is closed (DELETE) when the test ends.
func (hs *HTTPServer) Connect(t *testing.T, version string) *HTTPSession {
	t.Helper()
	c, res, err := hs.Dial(t.Context(), version, hs.Token)
	if err != nil {
		t.Fatalf("initialize over HTTP: %v; server stderr:\n%s", err, hs.Stderr)
	}
	t.Cleanup(func() { c.Close() })
	s := &HTTPSession{T: t, Server: hs, Client: c, ID: c.GetSessionId()}
	if mcp.IsModernProtocol(res.ProtocolVersion) {
		t.Fatalf("negotiated %s, a version without sessions", res.ProtocolVersion)
	}
	if _, err := uuid.Parse(s.ID); err != nil {
		t.Fatalf("session id %q minted by the server is not a UUID: %v", s.ID, err)
	}
	return s
}

// Jail is the session's jail directory, as the session's first result
// gave it, or jail_status (which makes it, if no call made it before). The
// server names it, not after the MCP session id, which a command must not
// learn.
func (s *HTTPSession) Jail() string {
	s.T.Helper()
	if s.jail == "" {
		s.jail = s.Status().Jail
		if s.jail == "" {
			s.T.Fatalf("jail_status gives no jail")
		}
	}
	return s.jail
}

// Name is the name of the session's jail: the session of its results.
func (s *HTTPSession) Name() string { return filepath.Base(s.Jail()) }

// Call calls tool with args in the session.
func (s *HTTPSession) Call(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	return CallTool(ctx, s.Client, tool, args)
}

// Exec runs jailed_exec; a refusal comes back with a zero ExecResult.
func (s *HTTPSession) Exec(args map[string]any) (tools.ExecResult, *mcp.CallToolResult) {
	s.T.Helper()
	out, res := call[tools.ExecResult](s.T, s, s.Server.Stderr, "jailed_exec", args)
	if s.jail == "" {
		s.jail = out.Jail
	}
	return out, res
}

// Status is the session's jail_status.
func (s *HTTPSession) Status() tools.StatusResult {
	s.T.Helper()
	out, _ := call[tools.StatusResult](s.T, s, s.Server.Stderr, "jail_status", nil)
	if s.jail == "" {
		s.jail = out.Jail
	}
	return out
}

// RawResponse is what a raw HTTP request got back.
type RawResponse struct {
	Code   int
	Header http.Header
	Body   string
}

// Raw sends one HTTP request to /mcp: JSON content, the legacy protocol
// version header, the server's token and the session id when not empty.
// header overrides these; an empty value removes one.
func (hs *HTTPServer) Raw(ctx context.Context, method, session string, header map[string]string, body string) (RawResponse, error) {
	req, err := http.NewRequestWithContext(ctx, method, hs.URL, strings.NewReader(body))
	if err != nil {
		return RawResponse{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcp.HeaderProtocolVersion, LegacyVersion)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if hs.Token != "" {
		req.Header.Set("Authorization", "Bearer "+hs.Token)
	}
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return RawResponse{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return RawResponse{Code: resp.StatusCode, Header: resp.Header, Body: string(b)}, err
}

// MustRaw is raw with a bound, failing the test when no answer comes.
func (hs *HTTPServer) MustRaw(t *testing.T, method, session string, header map[string]string, body string) RawResponse {
	t.Helper()
	// No test expects a GET to be served: one that is opens a stream that
	// never ends, and the bound makes that a quick failure.
	d := 20 * time.Second
	if method == http.MethodGet {
		d = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	r, err := hs.Raw(ctx, method, session, header, body)
	if err != nil {
		t.Fatalf("%s %s (session %q): %v", method, hs.URL, session, err)
	}
	return r
}

// RPC is a JSON-RPC request body; meta, when not nil, is its
// params._meta.
func RPC(id int, method string, params map[string]any, meta map[string]any) string {
	if params == nil {
		params = map[string]any{}
	}
	if meta != nil {
		params["_meta"] = meta
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// ToolsCallRPC is the body of a tools/call of jailed_exec running command.
func ToolsCallRPC(id int, command string, meta map[string]any) string {
	return RPC(id, "tools/call", map[string]any{"name": "jailed_exec", "arguments": map[string]any{"command": command}}, meta)
}

// RPCMessages are the JSON-RPC messages of a response body, whether plain
// JSON or a stream of server-sent events.
func RPCMessages(r RawResponse) []map[string]any {
	var msgs []map[string]any
	add := func(s string) {
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) == nil {
			msgs = append(msgs, m)
		}
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(strings.NewReader(r.Body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				add(strings.TrimSpace(d))
			}
		}
	} else {
		add(r.Body)
	}
	return msgs
}

// RPCResult is the result of the response to request id in r.
func RPCResult(r RawResponse, id int) (map[string]any, bool) {
	for _, m := range RPCMessages(r) {
		if m["id"] == float64(id) {
			res, ok := m["result"].(map[string]any)
			return res, ok
		}
	}
	return nil, false
}

// InitializeRPC is the body of an initialize request.
func InitializeRPC(id int) string {
	return RPC(id, "initialize", map[string]any{
		"protocolVersion": LegacyVersion, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw", "version": "1"},
	}, nil)
}

// Initialize opens an MCP session with a raw Initialize request and
// returns its id.
func (hs *HTTPServer) Initialize(t *testing.T) string {
	t.Helper()
	r := hs.MustRaw(t, http.MethodPost, "", nil, InitializeRPC(1))
	id := r.Header.Get("Mcp-Session-Id")
	if r.Code != http.StatusOK || id == "" {
		t.Fatalf("initialize: status %d, session %q: %s", r.Code, id, r.Body)
	}
	return id
}

// Warnings are the lines of a server's stderr that warn msg.
func Warnings(stderr, msg string) []string {
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, " WRN ") && strings.Contains(l, " "+msg+" ") {
			lines = append(lines, l)
		}
	}
	return lines
}

// LogAttr is key=value as the server's log writes it.
func LogAttr(key, value string) string {
	if value == "" || strings.ContainsAny(value, " =\"") {
		value = strconv.Quote(value)
	}
	return key + "=" + value
}

// Warned waits a moment for a warning msg naming every one of attrs
// ("key=value").
func Warned(hs *HTTPServer, msg string, attrs ...string) bool {
	return WaitFor(2*time.Second, func() bool {
		return slices.ContainsFunc(Warnings(hs.Stderr.String(), msg), func(l string) bool {
			return !slices.ContainsFunc(attrs, func(a string) bool { return !strings.Contains(l, " "+a) })
		})
	})
}

// JailNames lists the session directories under the project's jail base.
func JailNames(t *testing.T, project string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(project, ".agent-home"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

// CallResult is what a call made in the background returned.
type CallResult struct {
	Res *mcp.CallToolResult
	Err error
}

// Background runs jailed_exec with command in s while the test goes on.
func (s *HTTPSession) Background(ctx context.Context, command string) <-chan CallResult {
	done := make(chan CallResult, 1)
	go func() {
		res, err := s.Call(ctx, "jailed_exec", map[string]any{"command": command})
		done <- CallResult{res, err}
	}()
	return done
}

// LegacyVersion is the protocol version raw requests state: the newest one
// that has sessions.
const LegacyVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
