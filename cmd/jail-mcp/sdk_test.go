//go:build unix

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// The official TypeScript SDK, installed from the npm registry at an
// exact version so that CI is reproducible; bump it with a run of this
// test. Its own dependencies are resolved once per cached install.
const (
	sdkPackage = "@modelcontextprotocol/sdk"
	sdkVersion = "1.32.2"
)

// TestTypeScriptSDKClient drives the real server over streamable HTTP with
// the official TypeScript SDK's client (sdkScript): one jail per MCP
// session, sessions that end or were never minted are refused, the bearer
// token is enforced, and a call the client aborts leaves no process
// behind, not even one in a session of its own (setsid).
func TestTypeScriptSDKClient(t *testing.T) {
	t.Parallel()
	modules := installSDK(t)

	project := testkit.NewProject(t)
	url := sdkServe(t, project)
	tokenProject := testkit.NewProject(t)
	token := "sdk-test-" + sdkRandomHex(t, 16)
	// The token from a file, as a service manager or an orchestrator
	// would hand it over.
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenURL := sdkServe(t, tokenProject, "--token-file", tokenFile)

	// sleep sums its arguments: "sleep 300 <marker>" is a sleep of five
	// minutes that only this test starts.
	marker := "0.4242" + strconv.Itoa(os.Getpid())
	out, sleepers := runSDKScript(t, modules, marker,
		"SDK_URL="+url, "SDK_TOKEN_URL="+tokenURL, "SDK_TOKEN="+token, "SDK_MARKER="+marker)

	home := filepath.Join(project, ".agent-home")
	checkSDKSessions(t, &out, project, tokenProject)
	checkSDKTerminated(t, &out)
	checkSDKForged(t, &out, project)
	checkSDKToken(t, &out, tokenProject)
	checkSDKCancel(t, &out, home, marker, sleepers)
}

// runSDKScript runs sdkScript with node, the SDK's modules and env, and
// returns what it printed, and the most sleeps of marker seen running at
// once while it ran: that "none left" after the cancel is not vacuous.
func runSDKScript(t *testing.T, modules, marker string, env ...string) (sdkResults, int64) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "sdk.mjs")
	if err := os.WriteFile(script, []byte(sdkScript), 0o644); err != nil {
		t.Fatal(err)
	}
	// While the script runs, count the sleeps of the call it cancels, so
	// that "none left" below is not vacuous.
	var sleepers atomic.Int64
	sampling, stopSampling := context.WithCancel(t.Context())
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampling.Err() == nil {
			if n := int64(len(testkit.Running("sleep", "300", marker))); n > sleepers.Load() {
				sleepers.Store(n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	stopSampling()
	<-sampled
	if err != nil {
		t.Fatalf("node %s: %v\nstdout:\n%s\nstderr:\n%s", script, err, stdout.String(), stderr.String())
	}
	t.Logf("the SDK script took %v", time.Since(start).Round(time.Millisecond))
	var out sdkResults
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("decode the script's output: %v\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("results: %s", bytes.TrimSpace(stdout.Bytes()))
	return out, sleepers.Load()
}

// checkSDKSessions checks that two clients had two sessions, each in its
// own jail, and that no other jail is on disk than theirs, the cancel
// step's and the token server's.
func checkSDKSessions(t *testing.T, out *sdkResults, project, tokenProject string) {
	t.Helper()
	if out.ProtocolVersion != "2025-11-25" {
		t.Errorf("the SDK's latest protocol version is %q: check that this server still serves it", out.ProtocolVersion)
	}
	if len(out.Sessions) != 2 {
		t.Fatalf("sessions: %+v", out.Sessions)
	}
	home := filepath.Join(project, ".agent-home")
	for _, s := range out.Sessions {
		// The jail's name is the server's, not the session id.
		jail := filepath.Join(home, s.Status.Session)
		if s.Status.Session == "" || s.Status.Session == s.TransportSessionID {
			t.Errorf("client %s: jail named %q, want a name other than the session id %q", s.Name, s.Status.Session, s.TransportSessionID)
		}
		if s.TransportSessionID == "" || s.ProtocolVersion != out.ProtocolVersion || s.ServerName != "jail-mcp" {
			t.Errorf("client %s: session %q protocol %q server %q", s.Name, s.TransportSessionID, s.ProtocolVersion, s.ServerName)
		}
		// The defaults under bubblewrap: the project view on, its tools
		// listed.
		if want := []string{"jail_apply", "jail_diff", "jail_discard", "jail_job", "jail_reset", "jail_status", "jailed_exec"}; !slices.Equal(s.Tools, want) {
			t.Errorf("client %s: tools %v, want %v", s.Name, s.Tools, want)
		}
		if s.Write.ExitCode != 0 || s.Write.IsError || s.Read.ExitCode != 0 || s.Read.Stdout != s.Name {
			t.Errorf("client %s: write %+v, read back %+v", s.Name, s.Write, s.Read)
		}
		for what, got := range map[string]sdkJail{"write": {s.Write.Session, s.Write.Jail}, "read": {s.Read.Session, s.Read.Jail}, "jail_status": {s.Status.Session, s.Status.Jail}} {
			if got.Session != s.Status.Session || got.Jail != jail {
				t.Errorf("client %s: %s ran in session %q jail %q, want %q %q", s.Name, what, got.Session, got.Jail, s.Status.Session, jail)
			}
		}
		if s.Status.Project != project || !s.Status.Confined {
			t.Errorf("client %s: jail_status %+v", s.Name, s.Status)
		}
		if got, err := os.ReadFile(filepath.Join(jail, "who")); err != nil || string(got) != s.Name {
			t.Errorf("client %s: %s/who holds %q (%v), want %q", s.Name, jail, got, err, s.Name)
		}
	}
	a, b := out.Sessions[0], out.Sessions[1]
	if a.TransportSessionID == b.TransportSessionID || a.Status.Jail == b.Status.Jail {
		t.Errorf("two clients share a session or a jail: %q %q, %q %q", a.TransportSessionID, b.TransportSessionID, a.Status.Jail, b.Status.Jail)
	}
	// On disk: the jails of the two clients and of the cancel step, no
	// other (a refused request opens none).
	want := []string{".gitignore", filepath.Base(a.Status.Jail), filepath.Base(b.Status.Jail), filepath.Base(out.Cancel.Jail)}
	slices.Sort(want)
	if got := sdkDirNames(t, home); !slices.Equal(got, want) {
		t.Errorf("%s holds %v, want %v", home, got, want)
	}
	if got := sdkDirNames(t, filepath.Join(tokenProject, ".agent-home")); !slices.Equal(got, []string{".gitignore", filepath.Base(out.Token.Right.Jail)}) {
		t.Errorf("the token server's jails: %v, want only %q", got, out.Token.Right.Jail)
	}

}

// checkSDKTerminated checks that a terminated session's id is refused,
// with 404 as the spec asks (clients then start a new session), and that
// the other session lives on.
func checkSDKTerminated(t *testing.T, out *sdkResults) {
	t.Helper()
	a := out.Sessions[0]
	term := out.Terminated
	if term.ID != a.TransportSessionID || term.TransportSessionIDAfter != nil {
		t.Errorf("terminateSession: ended %q (want %q), the transport still holds %v", term.ID, a.TransportSessionID, term.TransportSessionIDAfter)
	}
	if term.ResumeCall.OK || term.ResumeCall.Code != 404 {
		t.Errorf("a client resuming the ended session: %+v, want HTTP 404", term.ResumeCall)
	}
	if term.RawPost.Status != 404 || term.RawDelete != 404 {
		t.Errorf("ended session: POST %d %q, DELETE %d, want 404", term.RawPost.Status, term.RawPost.Body, term.RawDelete)
	}
	if term.OtherStillWorks != "b" {
		t.Errorf("the other session after one ended: %q", term.OtherStillWorks)
	}

}

// checkSDKForged checks that a forged session id, a malformed one and
// none are refused, and that the forged session's command did not run.
func checkSDKForged(t *testing.T, out *sdkResults, project string) {
	t.Helper()
	f := out.Forged
	if f.Post.Status != 404 || f.Get != 404 || f.Delete != 404 || f.Garbage != 404 {
		t.Errorf("forged session id: POST %d %q, GET %d, DELETE %d, malformed POST %d, want 404", f.Post.Status, f.Post.Body, f.Get, f.Delete, f.Garbage)
	}
	if f.Missing != 400 {
		t.Errorf("POST without a session id: %d, want 400", f.Missing)
	}
	filepath.WalkDir(project, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "forged" {
			t.Errorf("the forged session's command ran: %s", p)
		}
		return nil
	})

}

// checkSDKToken checks that the bearer token is enforced.
func checkSDKToken(t *testing.T, out *sdkResults, tokenProject string) {
	t.Helper()
	tok := out.Token
	for name, r := range map[string]sdkCall{"no Authorization header": tok.None, "a wrong token": tok.Wrong} {
		if r.OK || r.Code != 401 {
			t.Errorf("client with %s: %+v, want HTTP 401", name, r)
		}
	}
	if r := tok.Right; !r.OK || r.ExitCode != 0 || filepath.Dir(r.Jail) != filepath.Join(tokenProject, ".agent-home") || filepath.Base(r.Jail) == r.SessionID || r.Home != r.Jail {
		t.Errorf("client with the token: %+v", r)
	}

}

// checkSDKCancel checks that the call the client cancelled is aborted,
// and every process it started (sleeps of marker, of which sleepers were
// seen at most) is gone.
func checkSDKCancel(t *testing.T, out *sdkResults, home, marker string, sleepers int64) {
	t.Helper()
	c := out.Cancel
	if !c.SawStarted || c.AbortedAfterMS < 500 || c.AfterStdout != "started\n" {
		t.Errorf("cancel: %+v", c)
	}
	if c.Resolved != nil || c.Rejected == nil {
		t.Errorf("the aborted call resolved: %s", c.Resolved)
	}
	if c.RunningAfter != 0 {
		t.Errorf("jail_status counts %d running commands after the cancel", c.RunningAfter)
	}
	if n := sleepers; n < 3 {
		t.Errorf("saw %d of the 3 sleeps of the cancelled command at most: the check below proves nothing", n)
	}
	if !testkit.WaitFor(5*time.Second, func() bool { return len(testkit.ProcessesWith(marker)) == 0 }) {
		t.Errorf("left running after the client cancelled: %v", testkit.ProcessesWith(marker))
	}
	if !testkit.FileExists(filepath.Join(c.Jail, "cancel-started")) || filepath.Dir(c.Jail) != home || filepath.Base(c.Jail) == c.Session {
		t.Errorf("the cancelled command did not run in its session's jail %q", c.Jail)
	}
}

// sdkResults is what sdkScript prints.
type sdkResults struct {
	ProtocolVersion string `json:"protocolVersion"`
	Sessions        []struct {
		Name               string   `json:"name"`
		TransportSessionID string   `json:"transportSessionId"`
		ProtocolVersion    string   `json:"protocolVersion"`
		ServerName         string   `json:"serverName"`
		Tools              []string `json:"tools"`
		Write              struct {
			ExitCode int    `json:"exitCode"`
			IsError  bool   `json:"isError"`
			Session  string `json:"session"`
			Jail     string `json:"jail"`
		} `json:"write"`
		Read struct {
			ExitCode int    `json:"exitCode"`
			Stdout   string `json:"stdout"`
			Session  string `json:"session"`
			Jail     string `json:"jail"`
		} `json:"read"`
		Status struct {
			Session  string `json:"session"`
			Jail     string `json:"jail"`
			Project  string `json:"project"`
			Backend  string `json:"backend"`
			Confined bool   `json:"confined"`
		} `json:"status"`
	} `json:"sessions"`
	Terminated struct {
		ID                      string          `json:"id"`
		TransportSessionIDAfter *string         `json:"transportSessionIdAfter"`
		ResumeCall              sdkCall         `json:"resumeCall"`
		RawPost                 sdkHTTPResponse `json:"rawPost"`
		RawDelete               int             `json:"rawDelete"`
		OtherStillWorks         string          `json:"otherStillWorks"`
	} `json:"terminated"`
	Forged struct {
		Post    sdkHTTPResponse `json:"post"`
		Get     int             `json:"get"`
		Delete  int             `json:"delete"`
		Garbage int             `json:"garbage"`
		Missing int             `json:"missing"`
	} `json:"forged"`
	Token struct {
		None  sdkCall `json:"none"`
		Wrong sdkCall `json:"wrong"`
		Right sdkCall `json:"right"`
	} `json:"token"`
	Cancel struct {
		Session        string          `json:"session"`
		Jail           string          `json:"jail"`
		SawStarted     bool            `json:"sawStarted"`
		AbortedAfterMS int             `json:"abortedAfterMs"`
		Resolved       json.RawMessage `json:"resolved"`
		Rejected       *sdkCall        `json:"rejected"`
		RunningAfter   int             `json:"runningAfter"`
		AfterStdout    string          `json:"afterStdout"`
	} `json:"cancel"`
}

// sdkCall is the outcome of one SDK call: on failure the error's name,
// code (the HTTP status of a StreamableHTTPError, the JSON-RPC code of an
// McpError) and message.
type sdkCall struct {
	OK        bool   `json:"ok"`
	Name      string `json:"name"`
	Code      int    `json:"code"`
	Message   string `json:"message"`
	SessionID string `json:"sessionId"`
	ExitCode  int    `json:"exitCode"`
	Home      string `json:"home"`
	Jail      string `json:"jail"`
}

type sdkHTTPResponse struct {
	Status int    `json:"status"`
	Body   string `json:"body"`
}

type sdkJail struct{ Session, Jail string }

// sdkScript is the client, an ES module run by node next to a
// node_modules holding the SDK. It reads SDK_URL (a server without a
// token), SDK_TOKEN_URL and SDK_TOKEN (a server with one) and SDK_MARKER
// (the argument of the sleeps it cancels), and prints one JSON object.
const sdkScript = `
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';

const url = new URL(process.env.SDK_URL);
const tokenURL = new URL(process.env.SDK_TOKEN_URL);
const token = process.env.SDK_TOKEN;
const marker = process.env.SDK_MARKER;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const out = { protocolVersion: LATEST_PROTOCOL_VERSION };

async function connect(u, requestInit) {
  const transport = new StreamableHTTPClientTransport(u, requestInit ? { requestInit } : undefined);
  const client = new Client({ name: 'jail-mcp-sdk-test', version: '1' });
  await client.connect(transport);
  return { client, transport };
}

async function exec(client, args, options) {
  const r = await client.callTool({ name: 'jailed_exec', arguments: args }, undefined, options);
  return { isError: r.isError === true, ...r.structuredContent };
}

async function status(client) {
  return (await client.callTool({ name: 'jail_status', arguments: {} })).structuredContent;
}

// An SDK error as data: a StreamableHTTPError carries the HTTP status in
// code, an McpError its JSON-RPC code.
function failure(e) {
  return { ok: false, name: e?.name, code: e?.code, message: String(e?.message ?? e) };
}

// A raw JSON-RPC POST, as any client sends one.
async function post(u, sessionId, body) {
  const headers = {
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': LATEST_PROTOCOL_VERSION,
  };
  if (sessionId) headers['Mcp-Session-Id'] = sessionId;
  const res = await fetch(u, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: res.status, body: await res.text() };
}

async function status404(u, method, sessionId) {
  const res = await fetch(u, { method, headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sessionId } });
  await res.body?.cancel();
  return res.status;
}

// (1) Two clients: two MCP sessions, two jails.
const a = await connect(url);
const b = await connect(url);
out.sessions = [];
for (const [name, c] of [['a', a], ['b', b]]) {
  const w = await exec(c.client, { command: 'printf %s ' + name + ' > "$HOME/who"' });
  const r = await exec(c.client, { command: 'cat "$HOME/who"' });
  const st = await status(c.client);
  out.sessions.push({
    name,
    transportSessionId: c.transport.sessionId,
    protocolVersion: c.transport.protocolVersion,
    serverName: c.client.getServerVersion()?.name,
    tools: (await c.client.listTools()).tools.map((t) => t.name).sort(),
    write: { exitCode: w.exit_code, isError: w.isError, session: w.session, jail: w.jail },
    read: { exitCode: r.exit_code, stdout: r.stdout, session: r.session, jail: r.jail },
    status: { session: st.session, jail: st.jail, project: st.project, backend: st.backend, confined: st.confined },
  });
}

// (2) Terminate a's session: its id is refused afterwards, to a client
// resuming it (the SDK skips initialize when given a session id) and to a
// raw request; b goes on.
const ended = a.transport.sessionId;
await a.transport.terminateSession();
out.terminated = { id: ended, transportSessionIdAfter: a.transport.sessionId ?? null };
{
  const transport = new StreamableHTTPClientTransport(url, { sessionId: ended });
  const client = new Client({ name: 'jail-mcp-sdk-test-resume', version: '1' });
  await client.connect(transport);
  try {
    await client.callTool({ name: 'jail_status', arguments: {} });
    out.terminated.resumeCall = { ok: true };
  } catch (e) {
    out.terminated.resumeCall = failure(e);
  }
  await client.close().catch(() => {});
}
out.terminated.rawPost = await post(url, ended, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
out.terminated.rawDelete = await status404(url, 'DELETE', ended);
out.terminated.otherStillWorks = (await exec(b.client, { command: 'cat "$HOME/who"' })).stdout;

// (3) A forged session id: well-formed, never minted by this server.
const forged = randomUUID();
out.forged = {
  post: await post(url, forged, { jsonrpc: '2.0', id: 1, method: 'tools/call',
    params: { name: 'jailed_exec', arguments: { command: 'echo forged > "$HOME/forged"' } } }),
  get: await status404(url, 'GET', forged),
  delete: await status404(url, 'DELETE', forged),
  garbage: (await post(url, '../../etc', { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} })).status,
  missing: (await post(url, undefined, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} })).status,
};

// (4) The bearer token: refused without it or with a wrong one.
out.token = {};
for (const [name, init] of [['none', undefined], ['wrong', { headers: { Authorization: 'Bearer not-' + token } }]]) {
  try {
    const c = await connect(tokenURL, init);
    out.token[name] = { ok: true, sessionId: c.transport.sessionId };
    await c.client.close();
  } catch (e) {
    out.token[name] = failure(e);
  }
}
{
  const c = await connect(tokenURL, { headers: { Authorization: 'Bearer ' + token } });
  const r = await exec(c.client, { command: 'echo "$HOME"' });
  out.token.right = { ok: true, sessionId: c.transport.sessionId, exitCode: r.exit_code, home: r.stdout.trim(), jail: r.jail };
  await c.transport.terminateSession();
  await c.client.close();
}

// (5) Cancel: the client aborts a call whose command left processes in
// sessions of their own (setsid); the server must kill them all.
{
  const c = await connect(url);
  const st = await status(c.client);
  const started = join(st.jail, 'cancel-started');
  const ac = new AbortController();
  const t0 = Date.now();
  const s = 'sleep 300 ' + marker;
  const call = exec(c.client, {
    command: 'setsid -f ' + s + '; setsid ' + s + ' & ' + s + ' & echo started > "$HOME/cancel-started"; wait',
  }, { signal: ac.signal, timeout: 600000 });
  call.catch(() => {});
  // Abort once the command is under way, and not before 500 ms.
  while (!existsSync(started) && Date.now() - t0 < 10000) await sleep(20);
  const sawStarted = existsSync(started);
  await sleep(Math.max(0, 500 - (Date.now() - t0)));
  const abortedAfterMs = Date.now() - t0;
  ac.abort('the test cancels');
  let outcome;
  try {
    outcome = { resolved: await call };
  } catch (e) {
    outcome = { rejected: failure(e) };
  }
  let running = -1;
  for (let i = 0; i < 250; i++) {
    running = (await status(c.client)).running;
    if (running === 0) break;
    await sleep(20);
  }
  const after = await exec(c.client, { command: 'cat "$HOME/cancel-started"' });
  out.cancel = { session: c.transport.sessionId, jail: st.jail, sawStarted, abortedAfterMs,
    ...outcome, runningAfter: running, afterStdout: after.stdout };
  await c.transport.terminateSession();
  await c.client.close();
}

await b.transport.terminateSession();
await a.client.close();
await b.client.close();
process.stdout.write(JSON.stringify(out) + '\n');
`

// installSDK returns a node_modules holding sdkPackage@sdkVersion: a cached
// install under $TMPDIR, per user and version, made on the first run and
// reused after; npm's cache is the one cli_test.go uses. node and npm
// must be installed: without them the test fails, it never skips.
func installSDK(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (%v): this test runs the official TypeScript MCP SDK; install Node.js 18 or later with npm", tool, err)
		}
	}
	base := filepath.Join(os.TempDir(), fmt.Sprintf("jail-mcp-ts-sdk-%d", os.Getuid()))
	if err := os.MkdirAll(base, 0o700); err != nil {
		t.Fatal(err)
	}
	// The cache runs as code: in a shared TMPDIR it must be this user's.
	if fi, err := os.Lstat(base); err != nil {
		t.Fatal(err)
	} else if st, ok := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o022 != 0 {
		t.Fatalf("%s is not a directory of this user's, writable only by it: remove it", base)
	}
	prefix := filepath.Join(base, sdkVersion)
	modules := filepath.Join(prefix, "node_modules")
	if sdkInstalled(modules) {
		return modules
	}
	os.RemoveAll(prefix) // a partial or damaged install
	tmp, err := os.MkdirTemp(base, sdkVersion+".partial-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	npmInstall(t, tmp, sdkPackage+"@"+sdkVersion)
	// A concurrent run may have won the race: either install will do.
	if err := os.Rename(tmp, prefix); err != nil && !sdkInstalled(modules) {
		t.Fatal(err)
	}
	if !sdkInstalled(modules) {
		t.Fatalf("npm installed %s@%s, but %s does not hold it", sdkPackage, sdkVersion, modules)
	}
	return modules
}

// sdkInstalled tells whether modules holds sdkPackage at sdkVersion with
// the client files the script imports.
func sdkInstalled(modules string) bool {
	dir := filepath.Join(modules, filepath.FromSlash(sdkPackage))
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return false
	}
	var pkg struct{ Version string }
	if json.Unmarshal(b, &pkg) != nil || pkg.Version != sdkVersion {
		return false
	}
	for _, f := range []string{"client/index.js", "client/streamableHttp.js", "types.js"} {
		if !testkit.FileExists(filepath.Join(dir, "dist", "esm", f)) {
			return false
		}
	}
	return true
}

// sdkServe starts the real server (startHTTP) and returns its URL; when
// the test ends the server must stop within 10 s of SIGTERM.
func sdkServe(t *testing.T, project string, args ...string) string {
	t.Helper()
	hs := testkit.StartHTTP(t, project, testkit.ServerEnv(), args...)
	t.Cleanup(func() { // runs before startHTTP's own stop
		hs.Cmd.Process.Signal(syscall.SIGTERM)
		if ok, _ := hs.WaitExit(10 * time.Second); !ok {
			t.Errorf("the server did not stop within 10 s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("server %v stderr:\n%s", args, hs.Stderr.String())
		}
	})
	return hs.URL
}

// sdkDirNames lists the names in dir, sorted.
func sdkDirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func sdkRandomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
