//go:build linux

package main

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/tools"
)

// egressWeb is an HTTP server on the host's loopback that says which host
// was asked for; the tests reach it by names only their resolver knows.
func egressWeb(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.Host)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

const egressHosts = "allowed.test=127.0.0.1,other.test=127.0.0.1,loop.wild.test=127.0.0.1,meta.wild.test=169.254.169.254,private.wild.test=10.9.8.7"

// TestEgressAllowlist: with --network allow:..., on both backends, curl,
// Python and Node reach an allowed host through the proxy over plain HTTP,
// CONNECT and SOCKS5 and are refused elsewhere, each refusal in the
// call's result; a name that resolves to loopback or cloud metadata is
// refused; a program that ignores the proxy gets no connection, and no
// UDP datagram out.
func TestEgressAllowlist(t *testing.T) {
	testkit.ForEachBackend(t, testEgressAllowlist)
}

func testEgressAllowlist(t *testing.T, b testkit.Backend) {
	port := egressWeb(t)
	ts := b.Start(t, testkit.NewProject(t), testkit.ServerEnv(testkit.TestHosts+"="+egressHosts),
		"--network", "allow:allowed.test,*.wild.test", "--auth", "none")
	st := ts.Status()
	// Landlock cannot tell hosts apart on the proxy's port; bwrap's own
	// network namespace leaves nothing to declare.
	if !slices.Equal(st.Allow, []string{"allowed.test", "*.wild.test"}) || (len(st.Gaps) > 0) != (b.Name == "landlock") || !st.Network {
		t.Fatalf("status: allow %q gaps %q network %t", st.Allow, st.Gaps, st.Network)
	}
	ok, other := "allowed.test:"+port, "other.test:"+port
	hello := "hello " + ok
	for _, tc := range []struct {
		name, command string
		want          string // in stdout
		refused       string // host:port/protocol the result must list, or ""
	}{
		{"curl http", "curl -sS http://" + ok + "/", hello, ""},
		{"curl http refused", "curl -sS -o /dev/null -w '%{http_code}' http://" + other + "/", "403", other + "/http"},
		{"curl connect", "curl -sS -p http://" + ok + "/", hello, ""},
		{"curl connect refused", "curl -sS -p http://" + other + "/ 2>&1; true", "403", other + "/connect"},
		{"curl socks5", `curl -sS --proxy "$ALL_PROXY" http://` + ok + "/", hello, ""},
		{"curl socks5 refused", `curl -sS --proxy "$ALL_PROXY" http://` + other + "/ 2>&1; true", "", other + "/socks5"},
		{"name to loopback", "curl -sS http://loop.wild.test:" + port + "/", "loopback", "loop.wild.test:" + port + "/http"},
		{"name to cloud metadata", "curl -sS http://meta.wild.test/latest/meta-data/", "link-local", "meta.wild.test:80/http"},
		{"name to a private address", "curl -sS -p http://private.wild.test:" + port + "/ 2>&1; true", "403", "private.wild.test:" + port + "/connect"},
		{"python", `python3 -c 'import urllib.request; print(urllib.request.urlopen("http://` + ok + `/").read().decode())'`, hello, ""},
		{"node", `node -e 'const u = new URL(process.env.HTTP_PROXY); require("http").get({host: u.hostname, port: u.port, path: "http://` + ok + `/", headers: {host: "` + ok + `"}}, r => r.on("data", d => process.stdout.write(d)))'`, hello, ""},
		{"proxy variables", `echo "$HTTP_PROXY $HTTPS_PROXY $ALL_PROXY $http_proxy no_proxy=${NO_PROXY-unset}"`, "no_proxy=unset", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, raw := ts.Exec(map[string]any{"command": tc.command, "env": map[string]any{"NO_PROXY": "*"}})
			if !strings.Contains(res.Stdout, tc.want) {
				t.Errorf("stdout %q, want %q; stderr %q", res.Stdout, tc.want, res.Stderr)
			}
			got := refusals(res)
			if tc.refused == "" && len(got) > 0 || tc.refused != "" && !slices.Contains(got, tc.refused) {
				t.Errorf("refusals %q, want %q", got, tc.refused)
			}
			if tc.refused != "" && !strings.Contains(testkit.ResultText(raw), "network: refused "+strings.SplitN(tc.refused, "/", 2)[0]) {
				t.Errorf("text does not name the refusal: %s", testkit.ResultText(raw))
			}
		})
	}
	// What ignores the proxy reaches nothing: TCP to the server itself,
	// by address, and UDP at all.
	for _, tc := range []struct{ name, command string }{
		{"curl without the proxy", "curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:" + port + "/"},
		{"python direct", `python3 -c 'import socket; socket.create_connection(("127.0.0.1", ` + port + `), 5)'`},
		{"python udp", `python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("192.0.2.1", 53))'`},
		{"python to another host", `python3 -c 'import socket; socket.create_connection(("192.0.2.1", 80), 3)'`},
		{"node direct", `node -e 'require("net").connect(` + port + `, "127.0.0.1").on("connect", () => process.exit(0)).on("error", e => { console.error(e.message); process.exit(1) })'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := ts.Exec(map[string]any{"command": tc.command})
			if res.ExitCode == 0 {
				t.Errorf("connected: %+v", res)
			}
		})
	}
}

// refusals are a result's refusals as host:port/protocol.
func refusals(res tools.ExecResult) []string {
	var out []string
	for _, r := range res.Refusals {
		out = append(out, net.JoinHostPort(r.Host, fmt.Sprint(r.Port))+"/"+r.Protocol)
	}
	return out
}

// TestEgressNarrowing: a call narrows the operator's network to a subset
// of it, or turns it off, never widens it.
func TestEgressNarrowing(t *testing.T) {
	testkit.ForEachBackend(t, testEgressNarrowing)
}

func testEgressNarrowing(t *testing.T, b testkit.Backend) {
	port := egressWeb(t)
	ts := b.Start(t, testkit.NewProject(t), testkit.ServerEnv(testkit.TestHosts+"="+egressHosts),
		"--network", "allow:allowed.test,other.test:"+port, "--auth", "none")
	curl := "curl -sS -o /dev/null -w '%{http_code}' http://"
	for _, tc := range []struct {
		name  string
		args  map[string]any
		want  string // in stdout, or in the refusal
		error bool
	}{
		{"a subset", map[string]any{"command": curl + "other.test:" + port + "/", "allow": []string{"allowed.test"}}, "403", false},
		{"the subset's host", map[string]any{"command": curl + "allowed.test:" + port + "/", "allow": []string{"allowed.test"}}, "200", false},
		{"wider", map[string]any{"command": "true", "allow": []string{"example.com"}}, "not in the operator's allowlist", true},
		{"another port", map[string]any{"command": "true", "allow": []string{"other.test:1"}}, "not in the operator's allowlist", true},
		{"off", map[string]any{"command": curl + "allowed.test:" + port + "/ --max-time 5", "network": false}, "000", false},
		{"off and a list", map[string]any{"command": "true", "network": false, "allow": []string{"allowed.test"}}, "network is off", true},
		{"a bad rule", map[string]any{"command": "true", "allow": []string{"a b"}}, "want a host name", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, raw := ts.Exec(tc.args)
			if tc.error {
				if !raw.IsError || !strings.Contains(testkit.OneLineText(t, raw), tc.want) {
					t.Errorf("want a refusal with %q: %s", tc.want, testkit.ResultText(raw))
				}
				return
			}
			if !strings.Contains(res.Stdout, tc.want) {
				t.Errorf("stdout %q, want %q; stderr %q", res.Stdout, tc.want, res.Stderr)
			}
		})
	}
	// Network on narrows to a list too; network off does not widen.
	on := b.Start(t, testkit.NewProject(t), testkit.ServerEnv(testkit.TestHosts+"="+egressHosts), "--auth", "none")
	if res, _ := on.Exec(map[string]any{"command": curl + "other.test:" + port + "/", "allow": []string{"allowed.test"}}); res.Stdout != "403" {
		t.Errorf("network on, narrowed: %q %q", res.Stdout, res.Stderr)
	}
	off := b.Start(t, testkit.NewProject(t), testkit.ServerEnv(), "--network", "off", "--auth", "none")
	if _, raw := off.Exec(map[string]any{"command": "true", "allow": []string{"allowed.test"}}); !raw.IsError {
		t.Errorf("network off widened by a list: %s", testkit.ResultText(raw))
	}
}

// TestEgressFailsClosed: where nothing can hold an allowlist (no backend
// confines, and the operator chose --fallback warn), every call that has
// one is refused, saying why; nothing runs with the whole network.
func TestEgressFailsClosed(t *testing.T) {
	ts := testkit.StartServer(t, testkit.NewProject(t), testkit.ServerEnv("PATH="+testkit.NoBwrapPath),
		"--backend", "bwrap", "--fallback", "warn", "--network", "allow:allowed.test", "--auth", "none")
	if st := ts.Status(); st.Confined || !st.Available {
		t.Fatalf("want an unconfined server: %+v", st)
	}
	if st := ts.Status(); len(st.Gaps) == 0 || !strings.Contains(st.Gaps[0], "refused") {
		t.Errorf("gaps %q", st.Gaps)
	}
	_, raw := ts.Exec(map[string]any{"command": "echo ran"})
	if !raw.IsError || !strings.Contains(testkit.OneLineText(t, raw), "allowlist") {
		t.Errorf("want a refusal: %s", testkit.ResultText(raw))
	}
	if _, raw := ts.Exec(map[string]any{"command": "echo ran", "network": false}); raw.IsError {
		t.Errorf("network off still runs: %s", testkit.ResultText(raw))
	}
}

// TestEgressDoctor: doctor says how each backend holds an allowlist and
// what it cannot exclude.
func TestEgressDoctor(t *testing.T) {
	for _, tc := range []struct{ backend, how, gap string }{
		{"bwrap", "network namespace", ""},
		{"landlock", "TCP connects to the proxy's port only", "any host on the port number"},
	} {
		res := runInProcess(t, []string{"doctor", "--json", "--backend", tc.backend}, cfgEnv())
		var r struct {
			Allowlist     string   `json:"allowlist"`
			AllowlistGaps []string `json:"allowlist_gaps"`
		}
		if err := json.Unmarshal([]byte(res.stdout), &r); err != nil {
			t.Fatalf("doctor --json: %v\n%s", err, res.stdout)
		}
		if !strings.Contains(r.Allowlist, tc.how) || (tc.gap == "") != (len(r.AllowlistGaps) == 0) || tc.gap != "" && !strings.Contains(r.AllowlistGaps[0], tc.gap) {
			t.Errorf("%s: allowlist %q gaps %q", tc.backend, r.Allowlist, r.AllowlistGaps)
		}
	}
}

// TestEgressGitHTTPS: git clones over HTTPS from a smart-HTTP server it
// reaches only through the allowlist's proxy (CONNECT), on both backends,
// and is refused a host the list does not name.
func TestEgressGitHTTPS(t *testing.T) {
	backend := filepath.Join(gitExecPath(t), "git-http-backend")
	root := t.TempDir()
	work := filepath.Join(root, "work")
	for _, args := range [][]string{
		{"init", "-q", "--bare", filepath.Join(root, "repo.git")},
		{"init", "-q", work},
		{"-C", work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "over the proxy"},
		{"-C", work, "push", "-q", filepath.Join(root, "repo.git"), "HEAD:refs/heads/main"},
		{"--git-dir", filepath.Join(root, "repo.git"), "symbolic-ref", "HEAD", "refs/heads/main"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	// httptest's certificate names example.com, which the test resolver
	// points at the server.
	srv := httptest.NewTLSServer(&cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}})
	t.Cleanup(srv.Close)
	port := fmt.Sprint(srv.Listener.Addr().(*net.TCPAddr).Port)
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		ca := filepath.Join(project, "ca.pem")
		if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
			t.Fatal(err)
		}
		ts := b.Start(t, project, testkit.ServerEnv(testkit.TestHosts+"=example.com=127.0.0.1,other.test=127.0.0.1"),
			"--network", "allow:example.com", "--auth", "none")
		env := map[string]any{"GIT_SSL_CAINFO": ca}
		// ls-remote writes nothing: it runs under landlock as root too,
		// where chmod is denied and a clone cannot write its config.
		res, raw := ts.Exec(map[string]any{"command": "git ls-remote https://example.com:" + port + "/repo.git", "env": env})
		if raw.IsError || !strings.Contains(res.Stdout, "refs/heads/main") {
			t.Errorf("ls-remote: %+v %s", res, testkit.ResultText(raw))
		}
		if b.Name == "bwrap" || os.Geteuid() != 0 {
			res, raw = ts.Exec(map[string]any{"command": "cd && git clone -q https://example.com:" + port + "/repo.git r && git -C r log --format=%s", "env": env})
			if raw.IsError || res.Stdout != "over the proxy\n" {
				t.Errorf("clone: %+v %s", res, testkit.ResultText(raw))
			}
		}
		res, raw = ts.Exec(map[string]any{"command": "git ls-remote https://other.test:" + port + "/repo.git", "env": env})
		if !raw.IsError || !slices.Contains(refusals(res), "other.test:"+port+"/connect") {
			t.Errorf("clone from a host not allowed: %+v %s", res, testkit.ResultText(raw))
		}
	})
}

// gitExecPath is where git keeps its helper programs.
func gitExecPath(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
