//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// approveScript is a client of the official TypeScript SDK that starts
// the real server over stdio (SERVER with SERVER_ARGS, in PROJECT, with
// SERVER_ENV) and runs jail_apply as the cases in CASES say: each a
// session, a client that answers the server's elicitation with an
// action (or declares none), a file made in the view and applied. It
// prints what each case saw: the elicitations, the apply's result and
// jail_status's apply.
const approveScript = `
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const env = JSON.parse(process.env.SERVER_ENV);
const out = {};
for (const c of JSON.parse(process.env.CASES)) {
  const caps = c.action ? { capabilities: { elicitation: {} } } : {};
  const client = new Client({ name: 'jail-mcp-approve-test', version: '1' }, caps);
  const seen = [];
  if (c.action) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      seen.push(req.params);
      return c.action === 'accept' ? { action: 'accept', content: {} } : { action: c.action };
    });
  }
  const transport = c.url
    ? new StreamableHTTPClientTransport(new URL(c.url))
    : new StdioClientTransport({ command: process.env.SERVER, args: [...JSON.parse(process.env.SERVER_ARGS), '--session', c.name, ...(c.args || [])], env, cwd: process.env.PROJECT, stderr: 'inherit' });
  await client.connect(transport);
  const file = c.name + '.txt';
  await client.callTool({ name: 'jailed_exec', arguments: { command: 'printf "one\\ntwo\\n" > ' + file } });
  const call = async (args) => {
    const r = await client.callTool({ name: 'jail_apply', arguments: args }, undefined, { timeout: 120000 });
    return { isError: r.isError === true, text: r.content.map((x) => x.text).join(''), ...r.structuredContent };
  };
  const status = (await client.callTool({ name: 'jail_status', arguments: {} })).structuredContent;
  const dry = await call({ paths: [file], dry_run: true });
  const apply = await call({ paths: [file] });
  const diff = (await client.callTool({ name: 'jail_diff', arguments: {} })).structuredContent;
  out[c.name] = { seen, status: { apply: status.apply, apply_reason: status.apply_reason }, dry, apply, listed: diff.changes.map((x) => x.path) };
  await client.close();
}
console.log(JSON.stringify(out));
`

// approveCase is one case of approveScript: its session, the client's
// answer ("" declares no elicitation), the server's extra arguments, or
// the URL of an HTTP server to use instead.
type approveCase struct {
	Name   string   `json:"name"`
	Action string   `json:"action,omitempty"`
	Args   []string `json:"args,omitempty"`
	URL    string   `json:"url,omitempty"`
}

// approveSeen is what approveScript saw in a case.
type approveSeen struct {
	Seen []struct {
		Message         string         `json:"message"`
		RequestedSchema map[string]any `json:"requestedSchema"`
	} `json:"seen"`
	Status struct {
		Apply       string `json:"apply"`
		ApplyReason string `json:"apply_reason"`
	} `json:"status"`
	Dry, Apply struct {
		IsError  bool   `json:"isError"`
		Text     string `json:"text"`
		Approval string `json:"approval"`
		Applied  []struct {
			Path string `json:"path"`
		} `json:"applied"`
	}
	Listed []string `json:"listed"`
}

// TestApplyApproval: under --apply ask (the default), jail_apply asks the
// user through the client (the official TypeScript SDK's, over stdio and
// over HTTP) before writing: the message names the session, the project
// and each change with its lines; accept writes, decline and cancel write
// nothing and are results, not errors. A client that declares no
// elicitation gets allow's behaviour, and jail_status says so; --apply
// never refuses and names jail-mcp apply; --apply allow never asks.
func TestApplyApproval(t *testing.T) {
	modules := installSDK(t)
	project := testkit.NewProject(t)
	hs := testkit.StartHTTP(t, project, testkit.ServerEnv())
	cases := []approveCase{
		{Name: "accept", Action: "accept"},
		{Name: "decline", Action: "decline"},
		{Name: "cancel", Action: "cancel"},
		{Name: "noelicit"},
		{Name: "never", Action: "accept", Args: []string{"--apply", "never"}},
		{Name: "allow", Action: "accept", Args: []string{"--apply", "allow"}},
		{Name: "http", Action: "accept", URL: hs.URL},
	}
	got := runApproveScript(t, modules, project, cases)
	host := func(name string) bool { return testkit.FileExists(filepath.Join(project, name+".txt")) }

	a := got["accept"]
	if a.Status.Apply != "ask" || a.Dry.IsError || a.Dry.Approval != "" || len(a.Seen) != 1 {
		t.Errorf("accept: status %+v, dry run %+v, %d elicitations (want one, for the apply only)", a.Status, a.Dry, len(a.Seen))
	} else {
		msg := a.Seen[0].Message
		for _, want := range []string{"Apply 1 change of jail-mcp session accept to the project " + project, "A accept.txt (+2 -0)", "2 lines added, 0 removed", "Nothing is written unless you accept"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the elicitation's message lacks %q:\n%s", want, msg)
			}
		}
	}
	if a.Apply.IsError || a.Apply.Approval != "accepted" || len(a.Apply.Applied) != 1 || !host("accept") || len(a.Listed) != 0 {
		t.Errorf("accept: %+v; on the host: %t; still listed: %v", a.Apply, host("accept"), a.Listed)
	}
	for _, name := range []string{"decline", "cancel"} {
		c := got[name]
		want := map[string]string{"decline": "declined", "cancel": "cancelled"}[name]
		if len(c.Seen) != 1 || c.Apply.IsError || c.Apply.Approval != want || len(c.Apply.Applied) != 0 || host(name) || len(c.Listed) != 1 {
			t.Errorf("%s: %d elicitations, result %+v; on the host: %t; listed %v", name, len(c.Seen), c.Apply, host(name), c.Listed)
		}
		if !strings.Contains(c.Apply.Text, "nothing was written") {
			t.Errorf("%s's text: %s", name, c.Apply.Text)
		}
	}
	n := got["noelicit"]
	if n.Status.Apply != "allow" || !strings.Contains(n.Status.ApplyReason, "elicitation") || n.Apply.IsError || n.Apply.Approval != "" || !host("noelicit") {
		t.Errorf("a client without elicitation: %+v; on the host: %t", n, host("noelicit"))
	}
	nv := got["never"]
	if nv.Status.Apply != "never" || !nv.Apply.IsError || !strings.Contains(nv.Apply.Text, "jail-mcp apply --session never") || host("never") || len(nv.Seen) != 0 || nv.Dry.IsError {
		t.Errorf("--apply never: %+v; on the host: %t", nv, host("never"))
	}
	al := got["allow"]
	if al.Status.Apply != "allow" || al.Status.ApplyReason != "" || len(al.Seen) != 0 || al.Apply.IsError || !host("allow") {
		t.Errorf("--apply allow: %+v; on the host: %t", al, host("allow"))
	}
	h := got["http"]
	if len(h.Seen) != 1 || h.Apply.Approval != "accepted" || !host("http") {
		t.Errorf("over HTTP: %+v; on the host: %t", h, host("http"))
	}
}

// runApproveScript runs approveScript with node and the SDK's modules.
func runApproveScript(t *testing.T, modules, project string, cases []approveCase) map[string]approveSeen {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "approve.mjs")
	if err := os.WriteFile(script, []byte(approveScript), 0o644); err != nil {
		t.Fatal(err)
	}
	serverEnv := map[string]string{}
	for _, kv := range testkit.ServerEnv() {
		k, v, _ := strings.Cut(kv, "=")
		serverEnv[k] = v
	}
	envJSON, _ := json.Marshal(serverEnv)
	argsJSON, _ := json.Marshal([]string{"serve", "--project", project})
	casesJSON, _ := json.Marshal(cases)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SERVER="+os.Args[0], "SERVER_ENV="+string(envJSON), "SERVER_ARGS="+string(argsJSON), "PROJECT="+project, "CASES="+string(casesJSON))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstdout:\n%s\nstderr:\n%s", script, err, stdout.String(), stderr.String())
	}
	out := map[string]approveSeen{}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("decode the script's output: %v\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("results: %s", bytes.TrimSpace(stdout.Bytes()))
	return out
}
