package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/cli"
	"github.com/jail-mcp/jail-mcp/tools"
)

// The test binary doubles as the real server: with this variable set it
// runs main's logic instead of the tests, so the tests drive the real
// program over real stdio.
const asServer = "JAIL_MCP_TEST_AS_SERVER"

// testHome is the HOME of every server under test: empty unless a test
// gives it fake credentials, so the tester's own never show up.
var testHome string

func TestMain(m *testing.M) {
	if os.Getenv(asServer) == "1" {
		environ := []string{}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, asServer+"=") {
				environ = append(environ, kv)
			}
		}
		os.Exit(cli.ExitCode(cli.Main(context.Background(), os.Args[1:], environ, os.Stdin, os.Stdout, os.Stderr), os.Stderr))
	}
	dir, err := os.MkdirTemp("", "jail-mcp-home-")
	if err != nil {
		panic(err)
	}
	testHome = dir
	noBwrapPath, err = pathWithout("bwrap", os.Getenv("PATH"))
	if err != nil {
		panic(err)
	}
	code := m.Run()
	for _, f := range afterTests {
		f()
	}
	os.RemoveAll(dir)
	os.RemoveAll(noBwrapPath)
	os.Exit(code)
}

// afterTests are run once every test of the package has run.
var afterTests []func()

// noBwrapPath is a directory of links to every program in the test's PATH
// but bwrap: a PATH where bubblewrap is absent and all else is found.
var noBwrapPath string

// pathWithout makes a directory holding a symlink to each program found
// in path, the first of each name as a shell would find it, except name.
func pathWithout(name, path string) (string, error) {
	dir, err := os.MkdirTemp("", "jail-mcp-path-")
	if err != nil {
		return "", err
	}
	for _, d := range filepath.SplitList(path) {
		entries, err := os.ReadDir(d)
		if err != nil || !filepath.IsAbs(d) {
			continue
		}
		for _, e := range entries {
			if e.Name() == name {
				continue
			}
			link := filepath.Join(dir, e.Name())
			if _, err := os.Lstat(link); err == nil {
				continue
			}
			if err := os.Symlink(filepath.Join(d, e.Name()), link); err != nil {
				return "", err
			}
		}
	}
	return dir, nil
}

// testBackend is one confining backend the confinement suites run
// against, one test for both: each such test runs once per backend as a
// subtest named after it.
type testBackend struct {
	name string   // the backend jail_status must report
	env  []string // added to the server's environment
	args []string // added to the server's arguments
}

// testBackends are bubblewrap, chosen explicitly, and Landlock, chosen by
// auto with bubblewrap absent from PATH: what a host without bubblewrap
// gets by default.
func testBackends() []testBackend {
	return []testBackend{
		{name: "bwrap", args: []string{"--backend", "bwrap"}},
		{name: "landlock", env: []string{"PATH=" + noBwrapPath}},
	}
}

// forEachBackend runs f as a subtest per backend.
func forEachBackend(t *testing.T, f func(t *testing.T, b testBackend)) {
	for _, b := range testBackends() {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

// start starts a server on b: env and args are the test's own, b's added.
func (b testBackend) start(t testing.TB, project string, env []string, args ...string) *testServer {
	t.Helper()
	return b.startWith(t, project, env, nil, args...)
}

// startWith is start with setup adjusting the server's command.
func (b testBackend) startWith(t testing.TB, project string, env []string, setup func(*exec.Cmd), args ...string) *testServer {
	t.Helper()
	ts := startServerCmd(t, project, append(slices.Clone(env), b.env...), setup, append(slices.Clone(b.args), args...)...)
	if st := ts.status(); st.Backend != b.name || !st.Confined {
		// The landlock arm needs Linux 6.12+ (Landlock ABI 6): it fails,
		// never skips, where the kernel is older.
		t.Fatalf("server runs backend %q (confined %t), want %q confined: %s (fix: %s)", st.Backend, st.Confined, b.name, st.Reason, st.Hint)
	}
	return ts
}

// end ends what ts serves, how: "reset" (jail_reset of its session),
// "EOF" (the client closes stdin), "SIGTERM" or "SIGKILL" (of the server).
func (ts *testServer) end(how string) {
	ts.t.Helper()
	switch strings.ToUpper(how) {
	case "RESET":
		if res, err := ts.call(ts.t.Context(), "jail_reset", nil); err != nil || res.IsError {
			ts.t.Fatalf("reset: %v %s", err, text(res))
		}
	case "EOF":
		ts.c.Close()
	case "SIGTERM":
		ts.cmd.Process.Signal(syscall.SIGTERM)
	case "SIGKILL":
		ts.cmd.Process.Kill()
	default:
		ts.t.Fatalf("end %q: want reset, EOF, SIGTERM or SIGKILL", how)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serverEnv is the environment the server under test starts with: the
// test's own, without JAIL_MCP_* settings, plus extra.
func serverEnv(extra ...string) []string {
	env := []string{asServer + "=1"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JAIL_MCP_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+testHome)
	return append(env, extra...)
}

// testServer is the real server, started as a subprocess and driven by the
// mcp-go client over its stdin and stdout.
type testServer struct {
	t       testing.TB
	c       *client.Client
	cmd     *exec.Cmd
	stderr  *syncBuffer
	project string

	mu            sync.Mutex
	notifications []timedNote
}

type timedNote struct {
	at time.Time
	n  mcp.JSONRPCNotification
}

// newProject is a fresh project directory, canonical.
func newProject(t testing.TB) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func startServer(t testing.TB, project string, env []string, args ...string) *testServer {
	t.Helper()
	return startServerCmd(t, project, env, nil, args...)
}

// startServerCmd is startServer with setup, when not nil, adjusting the
// server's command before it starts (its stderr defaults to ts.stderr).
func startServerCmd(t testing.TB, project string, env []string, setup func(*exec.Cmd), args ...string) *testServer {
	t.Helper()
	ts := &testServer{t: t, stderr: &syncBuffer{}, project: project}
	args = append([]string{"serve", "--project", project}, args...)
	tr := transport.NewStdioWithOptions(os.Args[0], env, args,
		transport.WithCommandFunc(func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
			cmd := exec.Command(command, args...)
			cmd.Env = env
			cmd.Dir = project
			cmd.Stderr = ts.stderr
			if setup != nil {
				setup(cmd)
			}
			ts.cmd = cmd
			return cmd, nil
		}))
	ts.c = client.NewClient(tr)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := ts.c.Start(ctx); err != nil {
		t.Fatalf("start server: %v", err)
	}
	ts.c.OnNotification(func(n mcp.JSONRPCNotification) {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		ts.notifications = append(ts.notifications, timedNote{time.Now(), n})
	})
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "jail-mcp-test", Version: "1"}
	if _, err := ts.c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize: %v; server stderr:\n%s", err, ts.stderr.String())
	}
	t.Cleanup(func() { ts.c.Close() })
	return ts
}

func (ts *testServer) call(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	return callTool(ctx, ts.c, tool, args)
}

// callTool calls tool with args through c.
func callTool(ctx context.Context, c *client.Client, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	return c.CallTool(ctx, req)
}

// exec runs jailed_exec and decodes its structured result; a refusal (no
// structured content) comes back with a zero ExecResult and its text.
func (ts *testServer) exec(args map[string]any) (tools.ExecResult, *mcp.CallToolResult) {
	ts.t.Helper()
	ctx, cancel := context.WithTimeout(ts.t.Context(), 2*time.Minute)
	defer cancel()
	res, err := ts.call(ctx, "jailed_exec", args)
	if err != nil {
		ts.t.Fatalf("jailed_exec %v: %v; server stderr:\n%s", args, err, ts.stderr.String())
	}
	var out tools.ExecResult
	decodeStructured(ts.t, res, &out)
	return out, res
}

func (ts *testServer) status() tools.StatusResult {
	ts.t.Helper()
	res, err := ts.call(ts.t.Context(), "jail_status", nil)
	if err != nil {
		ts.t.Fatalf("jail_status: %v", err)
	}
	var out tools.StatusResult
	decodeStructured(ts.t, res, &out)
	return out
}

func decodeStructured(t testing.TB, res *mcp.CallToolResult, v any) {
	t.Helper()
	if res.StructuredContent == nil {
		return
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// processesWith lists the pids whose command line contains marker.
func processesWith(marker string) []string {
	var pids []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), marker) {
			pids = append(pids, filepath.Base(d))
		}
	}
	return pids
}

// waitFor polls cond every 20 ms until it holds or d has passed.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func oneLineText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	s := text(res)
	if strings.Contains(strings.TrimSuffix(s, "\n"), "\n") || s == "" {
		t.Errorf("want one line, got %q", s)
	}
	return s
}

var _ = fmt.Sprint

// hostDir is a fresh directory of the host in plain view of every
// backend's jail: not under the directories bubblewrap shadows (/tmp,
// /var/tmp, /run), where an attack aimed at it would fail for the wrong
// reason. It is under the tester's cache directory.
func hostDir(t *testing.T) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("no cache directory for the suite's host directories: %v", err)
	}
	base = filepath.Join(base, "jail-mcp-test")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(base, "host-")
	if err != nil {
		t.Fatal(err)
	}
	// World-searchable like /tmp's, so that an unprivileged jail reaches
	// what a root test put there.
	os.Chmod(dir, 0o755)
	dir, err = filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeAllForce(dir) })
	return dir
}

// removeAllForce removes dir even where an attack left directories
// without rights.
func removeAllForce(dir string) {
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	os.RemoveAll(dir)
}
