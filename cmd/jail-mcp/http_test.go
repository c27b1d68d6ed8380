package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/cli"
	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/tools"
)

// The tests here drive `jail-mcp serve --listen` as a subprocess over real
// HTTP: with the mcp-go client where a client would, and with raw requests
// where the transport's own checks are under test.

// httpLegacyVersion is the protocol version raw requests state: the newest one
// that has sessions.
const httpLegacyVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION

// httpModernVersion is the sessionless revision the server must refuse.
const httpModernVersion = "2026-07-28"

// httpTestServer is the real server, serving streamable HTTP.
type httpTestServer struct {
	t       *testing.T
	cmd     *exec.Cmd
	stderr  *syncBuffer
	project string
	url     string // http://127.0.0.1:PORT/mcp, whatever address it listens on
	token   string

	exited  chan struct{}
	waitErr error // cmd.Wait's, once exited is closed
}

var httpListenRE = regexp.MustCompile(`listen=(http://\S+/mcp)`)

// startHTTP starts the server on a free loopback port.
func startHTTP(t *testing.T, project string, env []string, args ...string) *httpTestServer {
	t.Helper()
	return startHTTPOn(t, project, "127.0.0.1:0", env, args...)
}

// startHTTPOn starts the server listening on listen, and reads the address
// it got from its starting line. The server is stopped (SIGTERM, then
// SIGKILL) when the test ends.
func startHTTPOn(t *testing.T, project, listen string, env []string, args ...string) *httpTestServer {
	t.Helper()
	hs := &httpTestServer{t: t, stderr: &syncBuffer{}, project: project, exited: make(chan struct{})}
	if i := slices.Index(args, "--token"); i >= 0 && i+1 < len(args) {
		hs.token = args[i+1]
	}
	hs.cmd = exec.Command(os.Args[0], append([]string{"serve", "--project", project, "--listen", listen}, args...)...)
	hs.cmd.Env = env
	hs.cmd.Dir = project
	hs.cmd.Stderr = hs.stderr
	if err := hs.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		hs.waitErr = hs.cmd.Wait()
		close(hs.exited)
	}()
	t.Cleanup(hs.stop)
	var addr string
	waitFor(30*time.Second, func() bool {
		if m := httpListenRE.FindStringSubmatch(hs.stderr.String()); m != nil {
			addr = m[1]
			return true
		}
		return hs.hasExited()
	})
	if addr == "" {
		if hs.hasExited() {
			t.Fatalf("server exited before listening: %v; stderr:\n%s", hs.waitErr, hs.stderr)
		}
		t.Fatalf("server did not say where it listens within 30 s; stderr:\n%s", hs.stderr)
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
	hs.url = "http://" + net.JoinHostPort("127.0.0.1", port) + "/mcp"
	return hs
}

func (hs *httpTestServer) hasExited() bool {
	select {
	case <-hs.exited:
		return true
	default:
		return false
	}
}

// waitExit waits up to d for the server to exit: whether it did, and
// cmd.Wait's error.
func (hs *httpTestServer) waitExit(d time.Duration) (bool, error) {
	select {
	case <-hs.exited:
		return true, hs.waitErr
	case <-time.After(d):
		return false, nil
	}
}

func (hs *httpTestServer) stop() {
	if hs.hasExited() {
		return
	}
	hs.cmd.Process.Signal(syscall.SIGTERM)
	if ok, _ := hs.waitExit(10 * time.Second); !ok {
		hs.cmd.Process.Kill()
		<-hs.exited
	}
}

// jail is where the jail of MCP session id lives.
func (hs *httpTestServer) jail(id string) string {
	return filepath.Join(hs.project, ".agent-home", id)
}

// dial opens an MCP session with the mcp-go client. version "" is the
// client's default, which probes the sessionless 2026-07-28 first and falls
// back to the handshake when the server refuses it. The token, when given,
// travels as a bearer token.
func (hs *httpTestServer) dial(ctx context.Context, version, token string) (*client.Client, *mcp.InitializeResult, error) {
	// Quiet: closing a client after the server stopped is expected here.
	opts := []transport.StreamableHTTPCOption{transport.WithHTTPLogger(slog.New(slog.DiscardHandler))}
	if token != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	}
	tr, err := transport.NewStreamableHTTP(hs.url, opts...)
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

// httpTestSession is one MCP session of the server, driven by the mcp-go client.
type httpTestSession struct {
	t  *testing.T
	hs *httpTestServer
	c  *client.Client
	id string
}

// connect opens an MCP session with the server's token, if it has one; the
// client is closed (DELETE) when the test ends.
func (hs *httpTestServer) connect(t *testing.T, version string) *httpTestSession {
	t.Helper()
	c, res, err := hs.dial(t.Context(), version, hs.token)
	if err != nil {
		t.Fatalf("initialize over HTTP: %v; server stderr:\n%s", err, hs.stderr)
	}
	t.Cleanup(func() { c.Close() })
	s := &httpTestSession{t: t, hs: hs, c: c, id: c.GetSessionId()}
	if mcp.IsModernProtocol(res.ProtocolVersion) {
		t.Fatalf("negotiated %s, a version without sessions", res.ProtocolVersion)
	}
	if _, err := uuid.Parse(s.id); err != nil {
		t.Fatalf("session id %q minted by the server is not a UUID: %v", s.id, err)
	}
	return s
}

func (s *httpTestSession) jail() string { return s.hs.jail(s.id) }

func (s *httpTestSession) call(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	return callTool(ctx, s.c, tool, args)
}

// exec runs jailed_exec; a refusal comes back with a zero ExecResult.
func (s *httpTestSession) exec(args map[string]any) (tools.ExecResult, *mcp.CallToolResult) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), time.Minute)
	defer cancel()
	res, err := s.call(ctx, "jailed_exec", args)
	if err != nil {
		s.t.Fatalf("jailed_exec %v in session %s: %v; server stderr:\n%s", args, s.id, err, s.hs.stderr)
	}
	var out tools.ExecResult
	decodeStructured(s.t, res, &out)
	return out, res
}

func (s *httpTestSession) status() tools.StatusResult {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), time.Minute)
	defer cancel()
	res, err := s.call(ctx, "jail_status", nil)
	if err != nil {
		s.t.Fatalf("jail_status in session %s: %v", s.id, err)
	}
	var out tools.StatusResult
	decodeStructured(s.t, res, &out)
	return out
}

// httpRawResponse is what a raw HTTP request got back.
type httpRawResponse struct {
	code   int
	header http.Header
	body   string
}

// raw sends one HTTP request to /mcp: JSON content, the legacy protocol
// version header, the server's token and the session id when not empty.
// header overrides these; an empty value removes one.
func (hs *httpTestServer) raw(ctx context.Context, method, session string, header map[string]string, body string) (httpRawResponse, error) {
	req, err := http.NewRequestWithContext(ctx, method, hs.url, strings.NewReader(body))
	if err != nil {
		return httpRawResponse{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcp.HeaderProtocolVersion, httpLegacyVersion)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if hs.token != "" {
		req.Header.Set("Authorization", "Bearer "+hs.token)
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
		return httpRawResponse{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return httpRawResponse{code: resp.StatusCode, header: resp.Header, body: string(b)}, err
}

// mustRaw is raw with a bound, failing the test when no answer comes.
func (hs *httpTestServer) mustRaw(t *testing.T, method, session string, header map[string]string, body string) httpRawResponse {
	t.Helper()
	// No test expects a GET to be served: one that is opens a stream that
	// never ends, and the bound makes that a quick failure.
	d := 20 * time.Second
	if method == http.MethodGet {
		d = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	r, err := hs.raw(ctx, method, session, header, body)
	if err != nil {
		t.Fatalf("%s %s (session %q): %v", method, hs.url, session, err)
	}
	return r
}

// httpRPC is a JSON-RPC request body; meta, when not nil, is its
// params._meta.
func httpRPC(id int, method string, params map[string]any, meta map[string]any) string {
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

// httpToolsCall is the body of a tools/call of jailed_exec running command.
func httpToolsCall(id int, command string, meta map[string]any) string {
	return httpRPC(id, "tools/call", map[string]any{"name": "jailed_exec", "arguments": map[string]any{"command": command}}, meta)
}

// httpRPCMessages are the JSON-RPC messages of a response body, whether plain
// JSON or a stream of server-sent events.
func httpRPCMessages(r httpRawResponse) []map[string]any {
	var msgs []map[string]any
	add := func(s string) {
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) == nil {
			msgs = append(msgs, m)
		}
	}
	if strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(strings.NewReader(r.body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				add(strings.TrimSpace(d))
			}
		}
	} else {
		add(r.body)
	}
	return msgs
}

// httpRPCResult is the result of the response to request id in r.
func httpRPCResult(r httpRawResponse, id int) (map[string]any, bool) {
	for _, m := range httpRPCMessages(r) {
		if m["id"] == float64(id) {
			res, ok := m["result"].(map[string]any)
			return res, ok
		}
	}
	return nil, false
}

// httpInitialize is the body of an initialize request.
func httpInitialize(id int) string {
	return httpRPC(id, "initialize", map[string]any{
		"protocolVersion": httpLegacyVersion, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw", "version": "1"},
	}, nil)
}

// initialize opens an MCP session with a raw initialize request and
// returns its id.
func (hs *httpTestServer) initialize(t *testing.T) string {
	t.Helper()
	r := hs.mustRaw(t, http.MethodPost, "", nil, httpInitialize(1))
	id := r.header.Get("Mcp-Session-Id")
	if r.code != http.StatusOK || id == "" {
		t.Fatalf("initialize: status %d, session %q: %s", r.code, id, r.body)
	}
	return id
}

// startHTTPInProcess serves the HTTP transport from this process, on a
// free loopback port, with an MCP server that has no tools, until the test
// ends: for the tests that lower the limits of the session table, or read
// it. set, when not nil, adjusts the table before the server starts.
func startHTTPInProcess(t *testing.T, set func(*httpSessions)) (*httpTestServer, *httpSessions) {
	t.Helper()
	hs := &httpTestServer{t: t, stderr: &syncBuffer{}, exited: make(chan struct{})}
	log := cli.NewLogger(hs.stderr, slog.LevelDebug)
	sessions := newHTTPSessions(nil, log, cli.DefaultMaxSessions)
	if set != nil {
		set(sessions)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs.url = "http://" + ln.Addr().String() + "/mcp"
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		hs.waitErr = serveHTTP(ctx, ln, server.NewMCPServer("jail-mcp-test", "0"), sessions, cli.Config{MaxTimeout: time.Minute}, log)
		close(hs.exited)
	}()
	t.Cleanup(func() {
		cancel()
		<-hs.exited
	})
	return hs, sessions
}

// httpWarnings are the lines of a server's stderr that warn msg.
func httpWarnings(stderr, msg string) []string {
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, " WRN ") && strings.Contains(l, " "+msg+" ") {
			lines = append(lines, l)
		}
	}
	return lines
}

// httpAttr is key=value as the server's log writes it.
func httpAttr(key, value string) string {
	if value == "" || strings.ContainsAny(value, " =\"") {
		value = strconv.Quote(value)
	}
	return key + "=" + value
}

// httpWarned waits a moment for a warning msg naming every one of attrs
// ("key=value").
func httpWarned(hs *httpTestServer, msg string, attrs ...string) bool {
	return waitFor(2*time.Second, func() bool {
		return slices.ContainsFunc(httpWarnings(hs.stderr.String(), msg), func(l string) bool {
			return !slices.ContainsFunc(attrs, func(a string) bool { return !strings.Contains(l, " "+a) })
		})
	})
}

// httpJailNames lists the session directories under the project's jail base.
func httpJailNames(t *testing.T, project string) []string {
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

// httpFoundUnder reports whether anything named name exists under root.
func httpFoundUnder(root, name string) bool {
	found := false
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == name {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

// httpTree lists every path under root with its size, for before/after checks.
func httpTree(t *testing.T, root string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = fi.Size()
		if d.IsDir() {
			out[rel] = -1
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// zombies lists the server's children that have exited and were never
// waited for, after giving it a moment to reap those just ended.
func (hs *httpTestServer) zombies() []string {
	var z []string
	waitFor(2*time.Second, func() bool {
		z = z[:0]
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			b, err := os.ReadFile(filepath.Join(d, "stat"))
			if err != nil {
				continue
			}
			// pid (comm) state ppid ...
			i := strings.LastIndexByte(string(b), ')')
			f := strings.Fields(string(b[i+1:]))
			if len(f) > 1 && f[0] == "Z" && f[1] == fmt.Sprint(hs.cmd.Process.Pid) {
				z = append(z, filepath.Base(d)+" "+string(b[:i+1]))
			}
		}
		return len(z) == 0
	})
	return z
}

// keeps reports whether st says the backend keeps promise id of docs/security.md.
func keeps(st tools.StatusResult, id int) bool {
	return slices.ContainsFunc(st.Guarantees.Kept, func(p jail.Promise) bool { return p.ID == id })
}

// httpMarkers numbers the markers of this file.
var httpMarkers atomic.Int64

// httpMarker is a number unique to this test process and call, long
// enough a sleep to outlive any test, and findable in /proc.
func httpMarker() string {
	return fmt.Sprintf("%d.%d3", 630000+httpMarkers.Add(1), os.Getpid())
}

// httpSleepers starts two sleeps carrying marker, one of them in a new session
// (a daemon's escape from the shell's process group).
func httpSleepers(marker string) string {
	return fmt.Sprintf("setsid sleep %s & sleep %s", marker, marker)
}

// httpWaitSleepers waits for both sleeps of httpSleepers(marker) to run:
// processes that are sleep itself, not the shell or a launcher whose
// command line holds the marker too.
func httpWaitSleepers(t *testing.T, marker string) {
	t.Helper()
	if !waitFor(15*time.Second, func() bool { return httpSleeping(marker) == 2 }) {
		t.Fatalf("command did not start: %v", processesWith(marker))
	}
}

// httpSleeping counts the processes running exactly "sleep marker".
func httpSleeping(marker string) int {
	n := 0
	for _, pid := range processesWith(marker) {
		b, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if err == nil && string(b) == "sleep\x00"+marker+"\x00" {
			n++
		}
	}
	return n
}

func httpWaitGone(t *testing.T, marker, after string) {
	t.Helper()
	if !waitFor(5*time.Second, func() bool { return len(processesWith(marker)) == 0 }) {
		t.Errorf("left running after %s: %v", after, processesWith(marker))
	}
}

// httpCallResult is what a call made in the background returned.
type httpCallResult struct {
	res *mcp.CallToolResult
	err error
}

// httpIsCancelled reports whether r is a result saying the call was
// cancelled.
func httpIsCancelled(t *testing.T, r httpCallResult) bool {
	t.Helper()
	if r.err != nil || r.res == nil {
		return false
	}
	var out tools.ExecResult
	decodeStructured(t, r.res, &out)
	return r.res.IsError && out.Cancelled && out.ExitCode == -1 && strings.Contains(text(r.res), "cancelled")
}

// background runs jailed_exec with command in s while the test goes on.
func (s *httpTestSession) background(ctx context.Context, command string) <-chan httpCallResult {
	done := make(chan httpCallResult, 1)
	go func() {
		res, err := s.call(ctx, "jailed_exec", map[string]any{"command": command})
		done <- httpCallResult{res, err}
	}()
	return done
}

// 1. Each MCP session has its own jail, named by the id the server minted,
// and no tool argument reaches another session's jail.
func TestHTTPSessionsGetTheirOwnJails(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b testBackend) {
		project := newProject(t)
		hs := startHTTP(t, project, serverEnv(b.env...), b.args...)
		// One client with mcp-go's default (it probes 2026-07-28 first and
		// falls back), one pinned to the newest version with sessions.
		sa := hs.connect(t, "")
		sb := hs.connect(t, httpLegacyVersion)
		if sa.id == sb.id {
			t.Fatalf("two sessions got the same id %s", sa.id)
		}
		for _, s := range []struct {
			*httpTestSession
			name string
		}{{sa, "a"}, {sb, "b"}} {
			res, raw := s.exec(map[string]any{"command": "echo " + s.name + " > $HOME/owner; echo $HOME"})
			if res.ExitCode != 0 || raw.IsError {
				t.Fatalf("session %s: %+v %s", s.name, res, text(raw))
			}
			if got := strings.TrimSpace(res.Stdout); got != s.jail() {
				t.Errorf("session %s: HOME = %q, want %q", s.name, got, s.jail())
			}
			if res.Session != s.id || res.Jail != s.jail() || res.Backend != b.name || !res.Confined {
				t.Errorf("session %s: result session %q jail %q backend %q confined %t; want %q %q %q confined",
					s.name, res.Session, res.Jail, res.Backend, res.Confined, s.id, s.jail(), b.name)
			}
			if got := mustRead(t, filepath.Join(s.jail(), "owner")); got != s.name+"\n" {
				t.Errorf("session %s: %s/owner = %q", s.name, s.jail(), got)
			}
			st := s.status()
			if st.Session != s.id || st.Jail != s.jail() || st.Backend != b.name || !st.Confined || st.Project != project {
				t.Errorf("session %s: jail_status session %q jail %q backend %q confined %t project %q",
					s.name, st.Session, st.Jail, st.Backend, st.Confined, st.Project)
			}
		}
		if got, want := httpJailNames(t, project), slices.Sorted(slices.Values([]string{sa.id, sb.id})); !slices.Equal(got, want) {
			t.Errorf("jails %v, want %v", got, want)
		}

		link := filepath.Join(project, "link-to-other")
		for _, pair := range [][2]*httpTestSession{{sa, sb}, {sb, sa}} {
			self, other := pair[0], pair[1]
			t.Run("into "+other.id[:8], func(t *testing.T) {
				before := httpTree(t, other.jail())
				ownerBefore := mustRead(t, filepath.Join(other.jail(), "owner"))
				os.Remove(link)
				if err := os.Symlink(other.jail(), link); err != nil {
					t.Fatal(err)
				}
				// A cwd in the other jail is refused before anything runs.
				rel, _ := filepath.Rel(project, other.jail())
				for i, args := range []map[string]any{
					{"command": "touch crossed-0", "cwd": other.jail()},
					{"command": "touch crossed-1", "cwd": rel},
					{"command": "touch crossed-2", "cwd": filepath.Join(other.jail(), ".tmp")},
					{"command": "touch crossed-3", "cwd": "link-to-other"},
					{"command": "touch crossed-4", "cwd": link},
					{"command": "touch crossed-5", "cwd": filepath.Join(self.jail(), "..", other.id)},
					{"argv": []string{"touch", "crossed-6"}, "cwd": other.jail()},
					{"command": "touch $HOME/crossed-7", "env": map[string]any{"HOME": other.jail()}},
					{"command": "touch $TMPDIR/crossed-8", "env": map[string]any{"TMPDIR": other.jail()}},
					{"command": "touch $XDG_CONFIG_HOME/crossed-9", "env": map[string]any{"XDG_CONFIG_HOME": other.jail()}},
				} {
					res, raw := self.exec(args)
					if !raw.IsError || res.Session != "" || !strings.HasPrefix(text(raw), "refused") {
						t.Errorf("%v: not refused: %+v %q", args, res, text(raw))
					}
					if httpFoundUnder(project, fmt.Sprintf("crossed-%d", i)) {
						t.Errorf("%v: the command ran", args)
					}
				}
				// A command running in its own jail cannot write into the other.
				oj := other.jail()
				attempts := []string{
					"echo pwned > " + oj + "/owner",
					"echo pwned >> " + oj + "/owner",
					"touch " + oj + "/new",
					"mkdir " + oj + "/newdir",
					"ln -s /etc " + oj + "/lnk",
					"ln $HOME/owner " + oj + "/hard",
					"rm -f " + oj + "/owner",
					"mv " + oj + "/owner " + oj + "/moved",
					"mv $HOME/owner " + oj + "/given",
					"truncate -s 0 " + oj + "/owner",
					"cd " + oj + " && touch here",
					"ln -s " + oj + " $HOME/to-other && echo pwned > $HOME/to-other/owner",
					"echo pwned > /proc/self/root" + oj + "/owner",
					"cp $HOME/owner " + oj + "/.tmp/copied",
				}
				// Changes of metadata are refused where the backend claims
				// promise 1 whole: Landlock lists it as not kept (it cannot
				// stop chmod and utime of the server's user's files).
				metadata := []string{"chmod 777 " + oj + "/owner", "touch -d 2001-01-01 " + oj + "/owner"}
				if keeps(self.status(), 1) {
					attempts = append(attempts, metadata...)
				}
				for _, cmd := range attempts {
					if res, raw := self.exec(map[string]any{"command": cmd}); res.ExitCode == 0 || !raw.IsError {
						t.Errorf("%q succeeded: %+v", cmd, res)
					}
				}
				if got := mustRead(t, filepath.Join(oj, "owner")); got != ownerBefore {
					t.Errorf("the other jail's owner file = %q, want %q", got, ownerBefore)
				}
				after := httpTree(t, oj)
				for p, size := range after {
					if before[p] != size {
						t.Errorf("the other jail changed: %s (size %d, was %d)", p, size, before[p])
					}
				}
				for p := range before {
					if _, ok := after[p]; !ok {
						t.Errorf("the other jail lost %s", p)
					}
				}
				if keeps(self.status(), 1) {
					fi, err := os.Stat(filepath.Join(oj, "owner"))
					if err != nil || fi.Mode().Perm() == 0o777 || fi.ModTime().Year() == 2001 {
						t.Errorf("the other jail's owner changed: %v %v", fi, err)
					}
				}
				// Put back what mv $HOME/owner may have taken.
				self.exec(map[string]any{"command": "test -e $HOME/owner || echo restored > $HOME/owner"})
			})
		}

		// jail_reset empties the caller's jail only.
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if res, err := sa.call(ctx, "jail_reset", nil); err != nil || res.IsError {
			t.Fatalf("jail_reset: %v %v", err, res)
		}
		if fileExists(filepath.Join(sa.jail(), "owner")) {
			t.Error("jail_reset left the caller's file")
		}
		if got := mustRead(t, filepath.Join(sb.jail(), "owner")); got != "b\n" {
			t.Errorf("jail_reset of one session touched the other's jail: owner = %q", got)
		}
		if z := hs.zombies(); len(z) > 0 {
			t.Errorf("the server has %d unreaped children, e.g. %v", len(z), z[:min(len(z), 3)])
		}
	})
}

// 2. Only ids the server minted and has not ended are served; requests
// without a session, or of the sessionless 2026-07-28 revision, run nothing.
func TestHTTPRefusesUnknownSessions(t *testing.T) {
	project := newProject(t)
	hs := startHTTP(t, project, serverEnv())
	live := hs.connect(t, "")
	if res, raw := live.exec(map[string]any{"command": "echo live > $HOME/live"}); res.ExitCode != 0 {
		t.Fatalf("%+v %s", res, text(raw))
	}
	ended := hs.connect(t, httpLegacyVersion)
	if res, raw := ended.exec(map[string]any{"command": "echo kept > $HOME/kept"}); res.ExitCode != 0 {
		t.Fatalf("%+v %s", res, text(raw))
	}
	if r := hs.mustRaw(t, http.MethodDelete, ended.id, nil, ""); r.code != http.StatusOK {
		t.Fatalf("DELETE of a live session: %d %s", r.code, r.body)
	}
	if got := mustRead(t, filepath.Join(ended.jail(), "kept")); got != "kept\n" {
		t.Errorf("ended session's file: %q", got)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if res, err := ended.call(ctx, "jail_status", nil); err == nil {
		t.Errorf("the ended session's client still gets answers: %+v", res)
	}
	wantJails := slices.Sorted(slices.Values([]string{live.id, ended.id}))

	n := 100
	refusedCall := func(t *testing.T, session string, header map[string]string, meta map[string]any, want int) {
		t.Helper()
		n++
		marker := fmt.Sprintf("ran-%d-%d", os.Getpid(), n)
		r := hs.mustRaw(t, http.MethodPost, session, header, httpToolsCall(n, "touch $HOME/"+marker, meta))
		if r.code != want {
			t.Errorf("tools/call: status %d, want %d: %s", r.code, want, r.body)
		}
		if res, ok := httpRPCResult(r, n); ok {
			t.Errorf("tools/call answered with a result: %v", res)
		}
		// tools/call answers once the command is over: had it run, its
		// file would be there now.
		if httpFoundUnder(project, marker) {
			t.Errorf("the refused tools/call ran its command")
		}
	}

	for _, c := range []struct{ name, id string }{
		{"forged", uuid.NewString()},
		{"garbage", "not-a-session-id"},
		{"path", "../../etc"},
		{"live id with a suffix", live.id + "0"},
		{"live id in upper case", strings.ToUpper(live.id)},
		{"terminated", ended.id},
	} {
		t.Run(c.name, func(t *testing.T) {
			refusedCall(t, c.id, nil, nil, http.StatusNotFound)
			r := hs.mustRaw(t, http.MethodPost, c.id, nil, httpRPC(1, "tools/list", nil, nil))
			if r.code != http.StatusNotFound {
				t.Errorf("tools/list: status %d, want 404", r.code)
			}
			for _, method := range []string{http.MethodGet, http.MethodDelete} {
				if r := hs.mustRaw(t, method, c.id, nil, ""); r.code != http.StatusNotFound {
					t.Errorf("%s: status %d, want 404: %s", method, r.code, r.body)
				}
			}
			if c.id != ended.id && fileExists(hs.jail(c.id)) {
				t.Errorf("a jail was made for %q", c.id)
			}
			// Each refusal is logged, with where it came from, the id and why.
			reason := "unknown"
			if c.id == ended.id {
				reason = "ended"
			}
			for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
				if !httpWarned(hs, "MCP session id refused", "remote=127.0.0.1:", "method="+method, httpAttr("session", c.id), "reason="+reason) {
					t.Errorf("no warning of the refused %s with reason %s; stderr:\n%s", method, reason, hs.stderr)
				}
			}
		})
	}

	t.Run("no session id", func(t *testing.T) {
		refusedCall(t, "", nil, nil, http.StatusBadRequest)
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			if r := hs.mustRaw(t, method, "", nil, ""); r.code != http.StatusBadRequest {
				t.Errorf("%s: status %d, want 400: %s", method, r.code, r.body)
			}
		}
	})

	t.Run(httpModernVersion, func(t *testing.T) {
		meta := map[string]any{mcp.MetaKeyProtocolVersion: httpModernVersion}
		modern := map[string]string{mcp.HeaderProtocolVersion: httpModernVersion}
		noHeader := map[string]string{mcp.HeaderProtocolVersion: ""}
		later := map[string]string{mcp.HeaderProtocolVersion: "2027-01-01"}
		for _, c := range []struct {
			name    string
			session string
			header  map[string]string
			meta    map[string]any
		}{
			{"header, live session", live.id, modern, nil},
			{"header, no session", "", modern, nil},
			{"header and _meta, no session", "", modern, meta},
			{"header and _meta, live session", live.id, modern, meta},
			{"_meta, legacy header, live session", live.id, nil, meta},
			{"_meta, no header, live session", live.id, noHeader, meta},
			{"_meta, no header, no session", "", noHeader, meta},
			{"later version, live session", live.id, later, map[string]any{mcp.MetaKeyProtocolVersion: "2027-01-01"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				refusedCall(t, c.session, c.header, c.meta, http.StatusBadRequest)
			})
		}
		t.Run("server/discover", func(t *testing.T) {
			r := hs.mustRaw(t, http.MethodPost, "", modern, httpRPC(1, "server/discover", nil, meta))
			if r.code != http.StatusBadRequest || r.header.Get("Mcp-Session-Id") != "" {
				t.Errorf("status %d, session %q: %s", r.code, r.header.Get("Mcp-Session-Id"), r.body)
			}
			if _, ok := httpRPCResult(r, 1); ok {
				t.Errorf("discover answered: %s", r.body)
			}
		})
		t.Run("initialize", func(t *testing.T) {
			body := httpRPC(1, "initialize", map[string]any{
				"protocolVersion": httpModernVersion, "capabilities": map[string]any{},
				"clientInfo": map[string]any{"name": "raw", "version": "1"},
			}, meta)
			r := hs.mustRaw(t, http.MethodPost, "", modern, body)
			if r.code != http.StatusBadRequest || r.header.Get("Mcp-Session-Id") != "" {
				t.Errorf("status %d, session %q: %s", r.code, r.header.Get("Mcp-Session-Id"), r.body)
			}
		})
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			t.Run(method, func(t *testing.T) {
				if r := hs.mustRaw(t, method, live.id, modern, ""); r.code != http.StatusBadRequest {
					t.Errorf("status %d, want 400: %s", r.code, r.body)
				}
			})
		}
	})

	// None of it touched the live session, nor made a jail.
	if res, raw := live.exec(map[string]any{"command": "cat $HOME/live"}); res.Stdout != "live\n" {
		t.Errorf("live session after the refusals: %+v %s", res, text(raw))
	}
	if got := httpJailNames(t, project); !slices.Equal(got, wantJails) {
		t.Errorf("jails %v, want %v", got, wantJails)
	}
}

// 3. With --token, only requests carrying it are served; a non-loopback
// address needs one.
func TestHTTPToken(t *testing.T) {
	token := "jail-mcp-test-" + uuid.NewString()

	t.Run("loopback with token", func(t *testing.T) {
		project := newProject(t)
		hs := startHTTP(t, project, serverEnv(), "--token", token)
		wrong := "wrong-token-" + uuid.NewString()
		for _, c := range []struct{ auth, reason string }{
			{"", "missing"},
			{"Bearer " + wrong, "wrong"},
			{"Bearer " + token + "x", "wrong"},
			{"Bearer " + token[:len(token)-1], "wrong"},
			{"Bearer ", "missing"},
			{token, "not a bearer token"},
			{"Basic " + token, "not a bearer token"},
			{"Bearer  " + token, "wrong"},
		} {
			before := len(httpWarnings(hs.stderr.String(), "bearer token refused"))
			r := hs.mustRaw(t, http.MethodPost, "", map[string]string{"Authorization": c.auth}, httpInitialize(1))
			if r.code != http.StatusUnauthorized {
				t.Errorf("Authorization %q: status %d, want 401", c.auth, r.code)
			}
			// The body says what is wrong and what to send.
			if !strings.HasPrefix(r.body, c.reason) && !strings.Contains(r.body, c.reason) || !strings.Contains(r.body, "--token") {
				t.Errorf("Authorization %q: body %q does not say %q and what to send", c.auth, r.body, c.reason)
			}
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("Authorization %q: WWW-Authenticate %q", c.auth, r.header.Get("WWW-Authenticate"))
			}
			if r.header.Get("Mcp-Session-Id") != "" {
				t.Errorf("Authorization %q: a session was minted", c.auth)
			}
			// Each refusal is logged once, with where it came from and why.
			var lines []string
			waitFor(2*time.Second, func() bool {
				lines = httpWarnings(hs.stderr.String(), "bearer token refused")[before:]
				return len(lines) > 0
			})
			if len(lines) != 1 || !strings.Contains(lines[0], " remote=127.0.0.1:") || !strings.Contains(lines[0], " "+httpAttr("reason", c.reason)) {
				t.Errorf("Authorization %q: logged %q, want one warning with the remote address and reason %q", c.auth, lines, c.reason)
			}
		}
		// No token, right or wrong, nor any piece of one, is ever logged.
		for _, secret := range []string{token, wrong} {
			for i := 0; i+8 <= len(secret); i++ {
				if piece := secret[i : i+8]; strings.Contains(hs.stderr.String(), piece) {
					t.Fatalf("stderr holds %q of the token %q:\n%s", piece, secret, hs.stderr)
				}
			}
		}
		if c, _, err := hs.dial(t.Context(), "", ""); err == nil {
			c.Close()
			t.Error("the mcp-go client without the token got a session")
		} else if !errors.Is(err, transport.ErrAuthorizationRequired) {
			t.Errorf("without the token: %v, want authorization required", err)
		}
		if c, _, err := hs.dial(t.Context(), "", "wrong-token-0123456789"); err == nil {
			c.Close()
			t.Error("the mcp-go client with a wrong token got a session")
		}

		s := hs.connect(t, "")
		if res, raw := s.exec(map[string]any{"command": "echo ok > $HOME/ok; echo $HOME"}); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != s.jail() {
			t.Fatalf("with the token: %+v %s", res, text(raw))
		}
		// A live session id is no substitute for the token.
		noAuth := map[string]string{"Authorization": ""}
		marker := fmt.Sprintf("ran-token-%d", os.Getpid())
		if r := hs.mustRaw(t, http.MethodPost, s.id, noAuth, httpToolsCall(2, "touch $HOME/"+marker, nil)); r.code != http.StatusUnauthorized {
			t.Errorf("tools/call with a live session, no token: %d", r.code)
		}
		if httpFoundUnder(project, marker) {
			t.Error("tools/call without the token ran")
		}
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			if r := hs.mustRaw(t, method, s.id, noAuth, ""); r.code != http.StatusUnauthorized {
				t.Errorf("%s with a live session, no token: %d", method, r.code)
			}
		}
		if res, raw := s.exec(map[string]any{"command": "cat $HOME/ok"}); res.Stdout != "ok\n" {
			t.Errorf("session after unauthenticated DELETE: %+v %s", res, text(raw))
		}
	})

	t.Run("non-loopback without token", func(t *testing.T) {
		project := newProject(t)
		// Hold the port on every interface: had the server tried to listen
		// before refusing, it would fail with "address already in use".
		held, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
		port := fmt.Sprint(held.Addr().(*net.TCPAddr).Port)
		for _, c := range []struct {
			name string
			args []string
			env  []string
			want []string
		}{
			{"0.0.0.0", []string{"--listen", "0.0.0.0:" + port}, nil, []string{"--listen", "--token", "not a loopback"}},
			{"every interface", []string{"--listen", ":" + port}, nil, []string{"--listen", "--token", "not a loopback"}},
			{"variable", nil, []string{"JAIL_MCP_LISTEN=0.0.0.0:" + port}, []string{"JAIL_MCP_LISTEN", "--token", "JAIL_MCP_TOKEN"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"serve", "--project", project}, c.args...)...)
				cmd.Env = serverEnv(c.env...)
				cmd.Dir = project
				var stdout, stderr syncBuffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 2 {
					t.Errorf("exit: %v, want status 2", err)
				}
				cfgOneLine(t, stderr.String())
				for _, w := range c.want {
					if !strings.Contains(stderr.String(), w) {
						t.Errorf("stderr does not name %q: %s", w, stderr.String())
					}
				}
				if s := stderr.String(); strings.Contains(s, "in use") || strings.Contains(s, "starting") {
					t.Errorf("the server got as far as listening: %s", s)
				}
				if stdout.String() != "" {
					t.Errorf("stdout: %q", stdout.String())
				}
			})
		}
	})

	t.Run("non-loopback with token", func(t *testing.T) {
		project := newProject(t)
		hs := startHTTPOn(t, project, "0.0.0.0:0", serverEnv(), "--token", token)
		if !strings.Contains(hs.stderr.String(), "token=true") {
			t.Errorf("starting line does not say a token is set: %s", hs.stderr)
		}
		s := hs.connect(t, "")
		if res, raw := s.exec(map[string]any{"command": "echo $HOME"}); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != s.jail() {
			t.Errorf("%+v %s", res, text(raw))
		}
		if r := hs.mustRaw(t, http.MethodPost, s.id, map[string]string{"Authorization": ""}, httpToolsCall(2, "true", nil)); r.code != http.StatusUnauthorized {
			t.Errorf("no token: %d", r.code)
		}
	})
}

// 4. A client's cancellation kills the command and everything it started.
func TestHTTPCancel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b testBackend) {
		project := newProject(t)
		hs := startHTTP(t, project, serverEnv(b.env...), b.args...)
		s := hs.connect(t, "")

		t.Run("context", func(t *testing.T) {
			// mcp-go over HTTP cancels by ending the request: the server
			// sees the request's context end.
			marker := httpMarker()
			ctx, cancel := context.WithCancel(t.Context())
			done := s.background(ctx, httpSleepers(marker))
			httpWaitSleepers(t, marker)
			cancel()
			select {
			case r := <-done:
				if !errors.Is(r.err, context.Canceled) {
					t.Errorf("cancelled call returned %v %v, want context.Canceled", r.res, r.err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("cancelled call did not return within 5 s")
			}
			httpWaitGone(t, marker, "cancel")
			if !waitFor(5*time.Second, func() bool { return s.status().Running == 0 }) {
				t.Error("jail_status still counts the cancelled command")
			}
		})

		t.Run("notifications/cancelled", func(t *testing.T) {
			marker := httpMarker()
			const id = 4242
			done := make(chan httpRawResponse, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
				defer cancel()
				r, err := hs.raw(ctx, http.MethodPost, s.id, nil, httpToolsCall(id, httpSleepers(marker), nil))
				if err != nil {
					r.body = err.Error()
				}
				done <- r
			}()
			httpWaitSleepers(t, marker)
			cancelled := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"test"}}`, id)
			// Another session cancelling the same request id cancels
			// nothing of this one.
			other := hs.connect(t, "")
			if r := hs.mustRaw(t, http.MethodPost, other.id, nil, cancelled); r.code != http.StatusAccepted {
				t.Errorf("cancel from another session: %d %s", r.code, r.body)
			}
			time.Sleep(300 * time.Millisecond)
			if httpSleeping(marker) != 2 {
				t.Fatalf("another session's notifications/cancelled stopped this session's command")
			}
			if r := hs.mustRaw(t, http.MethodPost, s.id, nil, cancelled); r.code != http.StatusAccepted {
				t.Errorf("notifications/cancelled: %d %s", r.code, r.body)
			}
			var r httpRawResponse
			select {
			case r = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("cancelled call did not return within 5 s")
			}
			res, ok := httpRPCResult(r, id)
			if !ok {
				t.Fatalf("no result for the cancelled call: %d %s", r.code, r.body)
			}
			sc, _ := res["structuredContent"].(map[string]any)
			if res["isError"] != true || sc["cancelled"] != true || sc["session"] != s.id {
				t.Errorf("cancelled call's result: %v", res)
			}
			httpWaitGone(t, marker, "notifications/cancelled")
		})

		// The session keeps serving.
		if res, raw := s.exec(map[string]any{"argv": []string{"true"}}); res.ExitCode != 0 || res.Backend != b.name {
			t.Errorf("after cancel: %+v %s", res, text(raw))
		}
	})
}

// 5. DELETE ends the session: its commands are killed, its files kept.
func TestHTTPDeleteKillsAndKeepsFiles(t *testing.T) {
	project := newProject(t)
	hs := startHTTP(t, project, serverEnv())
	s := hs.connect(t, "")
	other := hs.connect(t, "")
	if res, raw := s.exec(map[string]any{"command": "echo kept > $HOME/kept; mkdir -p $HOME/d && echo deep > $HOME/d/f"}); res.ExitCode != 0 {
		t.Fatalf("%+v %s", res, text(raw))
	}
	marker, otherMarker := httpMarker(), httpMarker()
	done := s.background(context.WithoutCancel(t.Context()), httpSleepers(marker))
	otherDone := other.background(t.Context(), httpSleepers(otherMarker))
	httpWaitSleepers(t, marker)
	httpWaitSleepers(t, otherMarker)

	if r := hs.mustRaw(t, http.MethodDelete, s.id, nil, ""); r.code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", r.code, r.body)
	}
	httpWaitGone(t, marker, "DELETE")
	select {
	case r := <-done:
		// The connection is still up: the call answers that it was cancelled.
		if !httpIsCancelled(t, r) {
			t.Errorf("the call of the deleted session: %v %+v, want a cancelled result", r.err, r.res)
		}
	case <-time.After(5 * time.Second):
		t.Error("the call of the deleted session did not return within 5 s")
	}
	if got := mustRead(t, filepath.Join(s.jail(), "kept")); got != "kept\n" {
		t.Errorf("kept = %q", got)
	}
	if got := mustRead(t, filepath.Join(s.jail(), "d", "f")); got != "deep\n" {
		t.Errorf("d/f = %q", got)
	}
	if r := hs.mustRaw(t, http.MethodPost, s.id, nil, httpToolsCall(1, "true", nil)); r.code != http.StatusNotFound {
		t.Errorf("tools/call after DELETE: %d", r.code)
	}
	// The other session's command was not touched.
	if httpSleeping(otherMarker) != 2 {
		t.Errorf("DELETE of one session killed another's command")
	}
	select {
	case r := <-otherDone:
		t.Errorf("the other session's call returned: %+v %v", r.res, r.err)
	default:
	}
	if st := other.status(); st.Running != 1 {
		t.Errorf("other session runs %d commands, want 1", st.Running)
	}
	if r := hs.mustRaw(t, http.MethodDelete, other.id, nil, ""); r.code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", r.code, r.body)
	}
	httpWaitGone(t, otherMarker, "DELETE")
	// A new session still works, in a new jail.
	n := hs.connect(t, "")
	if res, raw := n.exec(map[string]any{"command": "test ! -e $HOME/kept && echo $HOME"}); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != n.jail() {
		t.Errorf("new session: %+v %s", res, text(raw))
	}
}

// 5 and 6. Ending a session while one of its calls is being set up (the
// server counting a large jail's disk usage before it starts the command)
// still kills that command, and neither DELETE nor SIGTERM waits for it.
func TestHTTPEndWhileACallStarts(t *testing.T) {
	for _, how := range []string{"DELETE", "SIGTERM"} {
		t.Run(how, func(t *testing.T) {
			project := newProject(t)
			hs := startHTTP(t, project, serverEnv())
			s := hs.connect(t, "")
			// Before it starts a command the server walks the jail to count
			// its disk usage: enough entries (hard links, cheap to make)
			// make that last tens of milliseconds, a window to end the
			// session in.
			timeTrue := func() time.Duration {
				start := time.Now()
				if res, raw := s.exec(map[string]any{"argv": []string{"true"}}); res.ExitCode != 0 {
					t.Fatalf("%+v %s", res, text(raw))
				}
				return time.Since(start)
			}
			base := timeTrue()
			many := filepath.Join(s.jail(), "many")
			if err := os.Mkdir(many, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(many, "0"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			links, walk := 0, time.Duration(0)
			for links < 40000 && walk < 100*time.Millisecond {
				for range 5000 {
					links++
					if err := os.Link(filepath.Join(many, "0"), filepath.Join(many, fmt.Sprint(links))); err != nil {
						t.Fatal(err)
					}
				}
				// The faster of two, as the load of the machine varies.
				walk = min(timeTrue(), timeTrue()) - base
			}
			t.Logf("a call takes %v to start, %v of it counting %d entries", (base + walk).Round(time.Millisecond), walk.Round(time.Millisecond), links)

			marker := httpMarker()
			done := make(chan httpRawResponse, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
				defer cancel()
				body := httpRPC(7, "tools/call", map[string]any{"name": "jailed_exec",
					"arguments": map[string]any{"command": "sleep " + marker, "timeout_ms": 10000}}, nil)
				r, _ := hs.raw(ctx, http.MethodPost, s.id, nil, body)
				done <- r
			}()
			time.Sleep(walk / 3)
			ended := time.Now()
			switch how {
			case "DELETE":
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				defer cancel()
				if r, err := hs.raw(ctx, http.MethodDelete, s.id, nil, ""); err != nil || r.code != http.StatusOK {
					t.Errorf("DELETE while a call starts: %v %d, want 200 within 5 s", err, r.code)
				}
			case "SIGTERM":
				hs.cmd.Process.Signal(syscall.SIGTERM)
				if ok, err := hs.waitExit(5 * time.Second); !ok || err != nil {
					t.Errorf("SIGTERM while a call starts: exited %t (%v), want status 0 within 5 s", ok, err)
				}
			}
			t.Logf("%s returned after %v", how, time.Since(ended).Round(time.Millisecond))
			if !waitFor(3*time.Second, func() bool { return len(processesWith(marker)) == 0 }) {
				t.Errorf("the call being started when the session ended is still running %v after %s", time.Since(ended).Round(time.Millisecond), how)
			}
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Errorf("the call did not return")
			}
			if !fileExists(filepath.Join(many, fmt.Sprint(links))) {
				t.Errorf("the jail's files are gone")
			}
		})
	}
}

// 5. An idle session ends well after the longest call could.
func TestHTTPIdleTimeout(t *testing.T) {
	for _, c := range []struct{ max, want time.Duration }{
		{time.Second, 30 * time.Minute},
		{time.Minute, 30 * time.Minute},
		{10 * time.Minute, 30 * time.Minute},
		{11 * time.Minute, 33 * time.Minute},
		{20 * time.Minute, time.Hour},
		{2 * time.Hour, 6 * time.Hour},
	} {
		if got := cli.IdleTimeout(c.max); got != c.want {
			t.Errorf("idleTimeout(%v) = %v, want %v", c.max, got, c.want)
		}
		if got := cli.IdleTimeout(c.max); got < 3*c.max || got < 30*time.Minute {
			t.Errorf("idleTimeout(%v) = %v: shorter than 3x the max timeout or 30 min", c.max, got)
		}
	}
	// The server runs with it and says so.
	hs := startHTTP(t, newProject(t), serverEnv(), "--max-timeout", "20m")
	if !strings.Contains(hs.stderr.String(), "idle_timeout=1h0m0s") {
		t.Errorf("starting line does not give the idle timeout of 3x 20m: %s", hs.stderr)
	}
}

// 6. SIGTERM stops the server at once, with calls in flight in two
// sessions: nothing they started survives, their files stay.
func TestHTTPSIGTERM(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b testBackend) {
		project := newProject(t)
		hs := startHTTP(t, project, serverEnv(b.env...), b.args...)
		var markers []string
		var calls []<-chan httpCallResult
		var sessions []*httpTestSession
		for i := range 2 {
			s := hs.connect(t, "")
			if res, raw := s.exec(map[string]any{"command": fmt.Sprintf("echo %d > $HOME/kept", i)}); res.ExitCode != 0 {
				t.Fatalf("%+v %s", res, text(raw))
			}
			m := httpMarker()
			calls = append(calls, s.background(context.WithoutCancel(t.Context()), httpSleepers(m)))
			markers = append(markers, m)
			sessions = append(sessions, s)
		}
		for _, m := range markers {
			httpWaitSleepers(t, m)
		}
		start := time.Now()
		hs.cmd.Process.Signal(syscall.SIGTERM)
		ok, err := hs.waitExit(5 * time.Second)
		if !ok {
			t.Fatalf("server still running 5 s after SIGTERM; stderr:\n%s", hs.stderr)
		}
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want status 0; stderr:\n%s", err, hs.stderr)
		}
		t.Logf("exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
		for _, m := range markers {
			httpWaitGone(t, m, "SIGTERM")
		}
		for i, c := range calls {
			select {
			case r := <-c:
				// Ending the sessions first lets the calls answer before
				// the connections close.
				if !httpIsCancelled(t, r) {
					t.Errorf("call %d in flight: %v %+v, want a cancelled result", i, r.err, r.res)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("call %d in flight did not return", i)
			}
		}
		for i, s := range sessions {
			if got := mustRead(t, filepath.Join(s.jail(), "kept")); got != fmt.Sprintf("%d\n", i) {
				t.Errorf("session %d's file: %q", i, got)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if _, err := hs.raw(ctx, http.MethodPost, "", nil, "{}"); err == nil {
			t.Error("still answering HTTP after exit")
		}
	})
}

// 6. For stdio: the end of standard input with a call in flight is a clean
// stop too (SIGTERM is TestServerDeathKillsCommands's; EOF's exit status
// with nothing running is TestStdoutIsOnlyJSONRPC's).
func TestStdioEOFWithCallInFlight(t *testing.T) {
	project := newProject(t)
	cmd := exec.Command(os.Args[0], "serve", "--project", project, "--session", "eof")
	cmd.Env = serverEnv()
	cmd.Dir = project
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() {
		io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
	})
	marker := httpMarker()
	for _, l := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		httpToolsCall(2, "echo kept > $HOME/kept; "+httpSleepers(marker), nil),
	} {
		io.WriteString(stdin, l+"\n")
	}
	httpWaitSleepers(t, marker)
	stdin.Close()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit on EOF with a call in flight: %v, want status 0; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("server still running 5 s after EOF; stderr:\n%s", stderr.String())
	}
	httpWaitGone(t, marker, "EOF")
	if got := mustRead(t, filepath.Join(project, ".agent-home", "eof", "kept")); got != "kept\n" {
		t.Errorf("kept = %q", got)
	}
}

// 7. Many sessions with concurrent calls each see their own jail.
func TestHTTPManySessions(t *testing.T) {
	const sessions, calls = 32, 2
	project := newProject(t)
	hs := startHTTP(t, project, serverEnv())
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ids  []string
		errs []string
	)
	fail := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, fmt.Sprintf(format, a...))
	}
	start := time.Now()
	for i := range sessions {
		wg.Go(func() {
			c, _, err := hs.dial(t.Context(), "", "")
			if err != nil {
				fail("session %d: initialize: %v", i, err)
				return
			}
			defer c.Close()
			id := c.GetSessionId()
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
			jail := hs.jail(id)
			var cwg sync.WaitGroup
			for j := range calls {
				cwg.Go(func() {
					ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
					defer cancel()
					req := mcp.CallToolRequest{}
					req.Params.Name = "jailed_exec"
					req.Params.Arguments = map[string]any{"command": fmt.Sprintf("echo $HOME; echo %d > $HOME/call-%d; sleep 0.2", j, j)}
					res, err := c.CallTool(ctx, req)
					if err != nil {
						fail("session %d call %d: %v", i, j, err)
						return
					}
					var out tools.ExecResult
					b, _ := json.Marshal(res.StructuredContent)
					json.Unmarshal(b, &out)
					if res.IsError || out.ExitCode != 0 || strings.TrimSpace(out.Stdout) != jail || out.Session != id || out.Jail != jail {
						fail("session %d call %d: %+v %s", i, j, out, text(res))
					}
				})
			}
			cwg.Wait()
			for j := range calls {
				if got, err := os.ReadFile(filepath.Join(jail, fmt.Sprintf("call-%d", j))); err != nil || string(got) != fmt.Sprintf("%d\n", j) {
					fail("session %d: call-%d = %q %v", i, j, got, err)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d sessions x %d calls in %v", sessions, calls, time.Since(start).Round(time.Millisecond))
	for _, e := range errs {
		t.Error(e)
	}
	slices.Sort(ids)
	if len(slices.Compact(slices.Clone(ids))) != sessions {
		t.Errorf("%d distinct session ids, want %d: %v", len(slices.Compact(slices.Clone(ids))), sessions, ids)
	}
	if got := httpJailNames(t, project); !slices.Equal(got, ids) {
		t.Errorf("%d jails %v, want the %d sessions' %v", len(got), got, len(ids), ids)
	}
	// A server that serves many calls must not keep one dead process
	// per call.
	if z := hs.zombies(); len(z) > 0 {
		t.Errorf("after %d calls the server has %d unreaped children, e.g. %v", sessions*calls, len(z), z[:min(len(z), 3)])
	}
}

// The ids of ended sessions are remembered within bounds of count and
// age, however many sessions come and go; an id forgotten is refused
// exactly as one never minted.
func TestHTTPForgetsEndedSessions(t *testing.T) {
	const maxEnded, sessions = 3, 100
	var clock atomic.Int64
	clock.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	hs, table := startHTTPInProcess(t, func(h *httpSessions) {
		h.maxEnded, h.endedTTL = maxEnded, time.Hour
		h.now = func() time.Time { return time.Unix(0, clock.Load()) }
	})
	// refusal is how each kind of request naming id is refused.
	refusal := func(id string) []string {
		t.Helper()
		var out []string
		for _, method := range []string{http.MethodGet, http.MethodDelete, http.MethodPost} {
			body := ""
			if method == http.MethodPost {
				body = httpRPC(2, "tools/list", nil, nil)
			}
			r := hs.mustRaw(t, method, id, nil, body)
			if r.code != http.StatusNotFound {
				t.Errorf("%s of %s: status %d, want 404: %s", method, id, r.code, r.body)
			}
			out = append(out, fmt.Sprintf("%s %d %s", method, r.code, strings.TrimSpace(r.body)))
		}
		return out
	}
	remembered := func() (n, order, capacity int) {
		table.mu.Lock()
		defer table.mu.Unlock()
		return len(table.ended), len(table.endedOrder), cap(table.endedOrder)
	}
	unknown := refusal(uuid.NewString())

	var ids []string
	for range sessions {
		id := hs.initialize(t)
		if r := hs.mustRaw(t, http.MethodDelete, id, nil, ""); r.code != http.StatusOK {
			t.Fatalf("DELETE: %d %s", r.code, r.body)
		}
		ids = append(ids, id)
		if n, order, capacity := remembered(); n > maxEnded || order != n || capacity > 4*maxEnded {
			t.Fatalf("after %d sessions ended: %d ids remembered (%d in order, room for %d), want at most %d",
				len(ids), n, order, capacity, maxEnded)
		}
		clock.Add(int64(time.Second))
	}
	for i, id := range ids {
		got := refusal(id)
		switch forgotten := i < len(ids)-maxEnded; {
		case forgotten && !slices.Equal(got, unknown):
			t.Errorf("forgotten id %d: %q, want as unknown: %q", i, got, unknown)
		case !forgotten && slices.Equal(got, unknown):
			t.Errorf("recently ended id %d is refused as unknown: %q", i, got)
		}
	}
	// An hour after they ended, none is remembered.
	clock.Add(int64(time.Hour))
	for _, id := range ids[len(ids)-maxEnded:] {
		if got := refusal(id); !slices.Equal(got, unknown) {
			t.Errorf("id ended over an hour ago: %q, want as unknown: %q", got, unknown)
		}
	}
	if n, _, _ := remembered(); n != 0 {
		t.Errorf("%d ids remembered an hour after they ended", n)
	}
	// The server still serves.
	if id := hs.initialize(t); hs.mustRaw(t, http.MethodDelete, id, nil, "").code != http.StatusOK {
		t.Error("DELETE of a new session failed")
	}
}

// A flood of requests naming sessions that do not exist is refused and
// logged request by request, and leaves nothing behind: no entry in the
// session table, and log lines of bounded length however long the ids.
func TestHTTPRefusalFloodKeepsNothing(t *testing.T) {
	const requests = 300
	hs, table := startHTTPInProcess(t, nil)
	live := hs.initialize(t)
	long := strings.Repeat("x", 32<<10)
	for i := range requests {
		id := fmt.Sprintf("%s-%d", uuid.NewString(), i)
		if i%2 == 1 {
			id += long
		}
		method := []string{http.MethodPost, http.MethodGet, http.MethodDelete}[i%3]
		body := ""
		if method == http.MethodPost {
			body = httpToolsCall(i, "true", nil)
		}
		if r := hs.mustRaw(t, method, id, nil, body); r.code != http.StatusNotFound {
			t.Fatalf("%s of an unknown id: status %d, want 404: %s", method, r.code, r.body)
		}
	}
	warnings := httpWarnings(hs.stderr.String(), "MCP session id refused")
	if len(warnings) != requests {
		t.Errorf("%d warnings of refused ids, want %d", len(warnings), requests)
	}
	for _, l := range warnings {
		if len(l) > 300 {
			t.Fatalf("a warning of %d bytes: %.300s...", len(l), l)
		}
	}
	table.mu.Lock()
	nLive, nEnded := len(table.live), len(table.ended)
	table.mu.Unlock()
	if nLive != 1 || nEnded != 0 {
		t.Errorf("after the flood the table holds %d live and %d ended ids, want 1 and 0", nLive, nEnded)
	}
	if r := hs.mustRaw(t, http.MethodDelete, live, nil, ""); r.code != http.StatusOK {
		t.Errorf("DELETE of the live session after the flood: %d %s", r.code, r.body)
	}
}

// --max-sessions bounds the live sessions: an initialize beyond them is
// refused with a JSON-RPC error saying what to do, and ending a session
// makes room at once.
func TestHTTPMaxSessions(t *testing.T) {
	project := newProject(t)
	hs := startHTTP(t, project, serverEnv(), "--max-sessions", "3")
	if !strings.Contains(hs.stderr.String(), "max_sessions=3") {
		t.Errorf("starting line does not give the bound: %s", hs.stderr)
	}
	var sessions []*httpTestSession
	for i := range 3 {
		s := hs.connect(t, "")
		if res, raw := s.exec(map[string]any{"command": fmt.Sprintf("echo %d > $HOME/n; echo $HOME", i)}); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != s.jail() {
			t.Fatalf("session %d: %+v %s", i, res, text(raw))
		}
		sessions = append(sessions, s)
	}

	r := hs.mustRaw(t, http.MethodPost, "", nil, httpInitialize(7))
	if r.code != http.StatusServiceUnavailable || r.header.Get("Mcp-Session-Id") != "" {
		t.Errorf("4th initialize: status %d, session %q, want 503 and none: %s", r.code, r.header.Get("Mcp-Session-Id"), r.body)
	}
	var msg struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int    `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.body), &msg); err != nil || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("4th initialize: not a JSON-RPC answer (%v, %s): %s", err, r.header.Get("Content-Type"), r.body)
	}
	if msg.JSONRPC != "2.0" || msg.ID != 7 || msg.Error.Code != codeTooManySessions {
		t.Errorf("4th initialize: %+v, want the error %d for id 7", msg, codeTooManySessions)
	}
	if m := msg.Error.Message; strings.Contains(m, "\n") || !strings.Contains(m, "3 live MCP sessions") || !strings.Contains(m, "DELETE") || !strings.Contains(m, "raise --max-sessions") {
		t.Errorf("4th initialize: message %q, want one line saying 3 sessions are live, to end one or to raise --max-sessions", m)
	}
	if !httpWarned(hs, "MCP session refused: too many", "remote=127.0.0.1:", "max_sessions=3") {
		t.Errorf("the refusal is not logged: %s", hs.stderr)
	}
	// mcp-go's client reports the server's reason.
	if c, _, err := hs.dial(t.Context(), "", ""); err == nil {
		c.Close()
		t.Error("the mcp-go client got a 4th session")
	} else if !strings.Contains(err.Error(), "raise --max-sessions") {
		t.Errorf("the mcp-go client's error: %v, want the server's message", err)
	}

	// Ending a session makes room at once; the others keep serving.
	if r := hs.mustRaw(t, http.MethodDelete, sessions[0].id, nil, ""); r.code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", r.code, r.body)
	}
	s := hs.connect(t, "")
	if res, raw := s.exec(map[string]any{"command": "echo $HOME"}); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != s.jail() {
		t.Errorf("session after a DELETE: %+v %s", res, text(raw))
	}
	for i, s := range sessions[1:] {
		if res, raw := s.exec(map[string]any{"command": "cat $HOME/n"}); res.ExitCode != 0 || res.Stdout != fmt.Sprintf("%d\n", i+1) {
			t.Errorf("session %d: %+v %s", i+1, res, text(raw))
		}
	}
	if r := hs.mustRaw(t, http.MethodPost, "", nil, httpInitialize(8)); r.code != http.StatusServiceUnavailable {
		t.Errorf("initialize with 3 sessions live again: status %d, want 503", r.code)
	}

	// The variable sets the bound as well.
	hs = startHTTP(t, newProject(t), serverEnv("JAIL_MCP_MAX_SESSIONS=1"))
	hs.initialize(t)
	if r := hs.mustRaw(t, http.MethodPost, "", nil, httpInitialize(9)); r.code != http.StatusServiceUnavailable || !strings.Contains(r.body, "maximum of 1 live") {
		t.Errorf("JAIL_MCP_MAX_SESSIONS=1: 2nd initialize: status %d, want 503: %s", r.code, r.body)
	}
}

// However many initializes arrive at once, no more sessions than
// --max-sessions are minted, and refused ones leave no room taken.
func TestHTTPMaxSessionsConcurrent(t *testing.T) {
	const maxSessions, initializes, rounds = 4, 10, 3
	hs := startHTTP(t, newProject(t), serverEnv(), "--max-sessions", fmt.Sprint(maxSessions))
	for round := range rounds {
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			ids     []string
			refused int
		)
		start := make(chan struct{})
		for i := range initializes {
			wg.Go(func() {
				<-start
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				defer cancel()
				r, err := hs.raw(ctx, http.MethodPost, "", nil, httpInitialize(i))
				mu.Lock()
				defer mu.Unlock()
				switch id := r.header.Get("Mcp-Session-Id"); {
				case err != nil:
					t.Errorf("round %d initialize %d: %v", round, i, err)
				case r.code == http.StatusOK && id != "":
					ids = append(ids, id)
				case r.code == http.StatusServiceUnavailable && id == "":
					refused++
				default:
					t.Errorf("round %d initialize %d: status %d, session %q: %s", round, i, r.code, id, r.body)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(ids) != maxSessions || refused != initializes-maxSessions {
			t.Fatalf("round %d: %d of %d concurrent initializes got a session and %d were refused, want %d and %d",
				round, len(ids), initializes, refused, maxSessions, initializes-maxSessions)
		}
		// The sessions minted work; ending them all makes room for the
		// next round.
		for _, id := range ids {
			if r := hs.mustRaw(t, http.MethodPost, id, nil, httpRPC(2, "tools/list", nil, nil)); r.code != http.StatusOK {
				t.Errorf("round %d: tools/list in session %s: %d %s", round, id, r.code, r.body)
			}
			if r := hs.mustRaw(t, http.MethodDelete, id, nil, ""); r.code != http.StatusOK {
				t.Errorf("round %d: DELETE of session %s: %d %s", round, id, r.code, r.body)
			}
		}
	}
	s := hs.connect(t, "")
	if res, raw := s.exec(map[string]any{"command": "echo $HOME"}); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != s.jail() {
		t.Errorf("after the rounds: %+v %s", res, text(raw))
	}
}

// The slots bound the live sessions exactly in any interleaving of
// initialize requests: each takes a slot, mcp-go reads it a while, then
// mints its session or refuses it, and the slot is given back.
func TestHTTPSessionSlots(t *testing.T) {
	const maxSessions, requests = 5, 40
	h := newHTTPSessions(nil, slog.New(slog.DiscardHandler), maxSessions)
	var (
		wg              sync.WaitGroup
		minted, refused atomic.Int64
		mostLive        atomic.Int64
		start           = make(chan struct{})
	)
	for i := range requests {
		wg.Go(func() {
			<-start
			s := h.take()
			if s == nil {
				refused.Add(1)
				return
			}
			defer h.giveBack(s)
			time.Sleep(time.Millisecond)
			if i%4 == 0 {
				return // refused by mcp-go before it mints
			}
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r = r.WithContext(context.WithValue(r.Context(), slotKey{}, s))
			id := h.ResolveSessionIdManager(r).Generate()
			if ended, err := h.Validate(id); err != nil || ended {
				t.Errorf("minted id %s: ended %t, %v", id, ended, err)
			}
			minted.Add(1)
			h.mu.Lock()
			n := int64(len(h.live))
			h.mu.Unlock()
			for m := mostLive.Load(); n > m && !mostLive.CompareAndSwap(m, n); m = mostLive.Load() {
			}
		})
	}
	close(start)
	wg.Wait()
	h.mu.Lock()
	live, starting := len(h.live), h.starting
	h.mu.Unlock()
	if mostLive.Load() > maxSessions || live > maxSessions || int64(live) != minted.Load() || starting != 0 {
		t.Errorf("%d live (at most %d at once), %d minted, %d slots held, want at most %d live and no slot held",
			live, mostLive.Load(), minted.Load(), starting, maxSessions)
	}
	if refused.Load() == 0 {
		t.Errorf("none of %d requests at once was refused", requests)
	}

	// An id minted without a slot, or with a slot used already, is never
	// live: refused on first use rather than over the bound. (When the
	// requests above filled every slot, one session ends first.)
	if live == maxSessions {
		h.mu.Lock()
		var id string
		for id = range h.live {
			break
		}
		h.mu.Unlock()
		if _, err := h.Terminate(id); err != nil {
			t.Fatalf("end session %s: %v", id, err)
		}
		live--
	}
	s := h.take()
	if s == nil {
		t.Fatalf("no slot with %d of %d sessions live", live, maxSessions)
	}
	first := s.Generate()
	for _, id := range []string{s.Generate(), h.Generate(), h.ResolveSessionIdManager(nil).Generate()} {
		if _, err := h.Validate(id); err == nil {
			t.Errorf("id %s minted without a slot is live", id)
		}
	}
	h.giveBack(s)
	if _, err := h.Validate(first); err != nil {
		t.Errorf("the slot's session is not live: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.live) != live+1 || h.starting != 0 {
		t.Errorf("%d live and %d slots held, want %d and none", len(h.live), h.starting, live+1)
	}
}
