//go:build unix

package testkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/jail-mcp/jail-mcp/tools"
)

// Balancer is HAProxy run with the project's deploy/haproxy.cfg, in front
// of servers on loopback.
type Balancer struct {
	URL    string // http://127.0.0.1:PORT/mcp
	Log    *SyncBuffer
	Config string // the configuration it runs
}

// HAProxy is the haproxy binary: on PATH, or where Debian puts it
// (/usr/sbin, not on a normal user's PATH).
func HAProxy(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/haproxy"); err == nil {
		return "/usr/sbin/haproxy"
	}
	t.Fatal("haproxy is not installed: apt-get install haproxy (.ci/run installs it)")
	return ""
}

// deployConfig is deploy/haproxy.cfg of this checkout.
func deployConfig(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "deploy", "haproxy.cfg")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// StartBalancer runs HAProxy with deploy/haproxy.cfg as shipped, but for
// where it listens (a free loopback port) and its servers (servers,
// host:port each, in place of the server-template line), until the test
// ends. It returns once HAProxy answers.
func StartBalancer(t testing.TB, servers []string) *Balancer {
	t.Helper()
	bin := HAProxy(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var lines []string
	replaced := 0
	for _, line := range strings.Split(deployConfig(t), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "bind "):
			line = fmt.Sprintf("    bind 127.0.0.1:%d", port)
			replaced++
		case strings.HasPrefix(trimmed, "server-template "):
			for i, s := range servers {
				lines = append(lines, fmt.Sprintf("    server s%d %s check", i, s))
			}
			replaced++
			continue
		}
		lines = append(lines, line)
	}
	if replaced != 2 {
		t.Fatalf("deploy/haproxy.cfg: want one bind and one server-template line, found %d of them", replaced)
	}
	cfg := strings.Join(lines, "\n")
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &Balancer{URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), Log: &SyncBuffer{}, Config: cfg}
	cmd := exec.Command(bin, "-db", "-f", path)
	cmd.Stdout, cmd.Stderr = b.Log, b.Log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	// Up when /healthz answers through it (the servers run already).
	healthz := strings.TrimSuffix(b.URL, "/mcp") + "/healthz"
	up := false
	WaitFor(30*time.Second, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		resp, err := http.Get(healthz)
		if err == nil {
			resp.Body.Close()
			up = resp.StatusCode == 200
		}
		return up
	})
	if !up {
		t.Fatalf("HAProxy does not answer /healthz; its log:\n%s", b.Log)
	}
	return b
}

// StartBalanced starts n servers over HTTP, each with a project of its
// own and the token (in its environment), and HAProxy in front of them.
func StartBalanced(t testing.TB, n int, token string, env []string, args ...string) ([]*HTTPServer, *Balancer) {
	t.Helper()
	var servers []*HTTPServer
	var addrs []string
	for range n {
		hs := StartHTTP(t, NewProject(t), append(slices.Clone(env), "JAIL_MCP_TOKEN="+token), args...)
		servers = append(servers, hs)
		addrs = append(addrs, strings.TrimPrefix(strings.TrimSuffix(hs.URL, "/mcp"), "http://"))
	}
	return servers, StartBalancer(t, addrs)
}

// Server is the balancer as an HTTPServer of the tests: its URL, and the
// servers' token.
func (b *Balancer) Server(t testing.TB, token string) *HTTPServer {
	return &HTTPServer{T: t, URL: b.URL, Token: token, Stderr: b.Log, exited: make(chan struct{})}
}

// ExecVia runs jailed_exec through c, from any goroutine: its structured
// result, or why there is none (the call's error, or its refusal's text).
func ExecVia(ctx context.Context, c *client.Client, args map[string]any) (tools.ExecResult, error) {
	var out tools.ExecResult
	res, err := CallTool(ctx, c, "jailed_exec", args)
	if err != nil {
		return out, err
	}
	if res.StructuredContent == nil {
		return out, errors.New(ResultText(res))
	}
	return out, decodeStructured(res, &out)
}
