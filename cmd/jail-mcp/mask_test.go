//go:build linux

package main

import (
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// provider is a local HTTPS server standing for the providers masked
// credentials go to: it answers every name of providerNames with a
// certificate of its own authority (which the server under test trusts
// upstream through testkit.TestRoots, and the jail does not), accepts
// only the real secrets, and records what it was sent.
type provider struct {
	port  string
	caPEM []byte
	tls   *tls.Config // its listeners': listen opens another port

	mu       sync.Mutex
	accepted map[string]bool // the real secrets, and those its token endpoint gave
	seen     []seenRequest
	issued   []string // the real tokens its token endpoint gave
}

type seenRequest struct {
	Host, Path, Query, Body string
	Header                  http.Header
}

// providerNames are the names the provider answers, each resolved to it
// by the server's test resolver: the registry's hosts of claude, a host
// an env: credential is bound to, one bound to nothing, and one of
// nothing at all resolved to loopback.
var providerNames = []string{"api.anthropic.com", "console.anthropic.com", "platform.claude.com", "api.openai.com", "cloudcode-pa.googleapis.com", "oauth2.googleapis.com", "www.googleapis.com", "api.provider.test", "other.test", "evil.test"}

func newProvider(t *testing.T, secrets ...string) *provider {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "jail-mcp test providers"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "providers"}, DNSNames: providerNames,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	p := &provider{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), accepted: map[string]bool{}}
	for _, s := range secrets {
		p.accepted[s] = true
	}
	p.tls = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der, caDER}, PrivateKey: key}},
		NextProtos:   []string{"h2", "http/1.1"},
	}
	p.port = p.listen(t)
	return p
}

// listen serves the provider on a port of its own, and returns it: its
// first (p.port), or another too.
func (p *provider) listen(t *testing.T) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", p.tls)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: p}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

// maskFlag is --mask for the provider's port: claude (its hosts the
// tests reach named on that port) and PROVIDER_TOKEN, bound to
// api.provider.test there.
func (p *provider) maskFlag() string {
	on := ":" + p.port
	return "claude@api.anthropic.com" + on + ",console.anthropic.com" + on + ",platform.claude.com" + on + ",env:PROVIDER_TOKEN@api.provider.test" + on
}

// hosts is the server's TestHosts value for the provider's names.
func (p *provider) hosts() string {
	var out []string
	for _, n := range providerNames {
		out = append(out, n+"=127.0.0.1")
	}
	return strings.Join(out, ",")
}

// url is https://HOST:PORT/PATH of the provider.
func (p *provider) url(host, path string) string { return "https://" + host + ":" + p.port + path }

// credential is the secret a request authenticates with: Bearer,
// x-api-key, x-goog-api-key, or the password of Basic.
func credential(r *http.Request) string {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return v
	}
	if _, pw, ok := r.BasicAuth(); ok {
		return pw
	}
	return r.Header.Get("X-Api-Key") + r.Header.Get("X-Goog-Api-Key")
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	p.mu.Lock()
	p.seen = append(p.seen, seenRequest{Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery, Body: string(body), Header: r.Header.Clone()})
	ok := p.accepted[credential(r)]
	p.mu.Unlock()
	switch r.URL.Path {
	case "/check":
		if !ok {
			// What it got, reflected: a masking proxy must not let the
			// real value back in either.
			http.Error(w, "unauthenticated: got "+credential(r), http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "authenticated as %s\n", r.Proto)
	case "/echo":
		// Every request header reflected, gzip-encoded when asked.
		var b bytes.Buffer
		r.Header.Write(&b)
		if r.URL.Query().Get("gzip") != "" {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			zw.Write(b.Bytes())
			zw.Close()
			return
		}
		w.Write(b.Bytes())
	case "/malformed":
		// An answer that does not read, quoting the credential it got
		// (issue 44): the proxy's own answer must not pass it on.
		conn, bw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nAuthorization %s\r\n\r\n", r.Header.Get("Authorization"))
		bw.Flush()
	case "/tokeninfo", "/oauth2/v2/userinfo":
		// Google's, which Gemini CLI asks before it uses a cached login.
		if !ok {
			http.Error(w, `{"error":"invalid_token"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"expires_in":3599,"scope":"https://www.googleapis.com/auth/cloud-platform","email":"operator@example.com","id":"1"}`)
	case "/v1/oauth/token", "/oauth/token":
		// A token endpoint: a refresh with a real refresh token, or a
		// code, gives new real tokens.
		form, _ := url.ParseQuery(string(body))
		var js map[string]string
		json.Unmarshal(body, &js)
		rt := form.Get("refresh_token") + js["refresh_token"]
		if !p.accepted[rt] && form.Get("code")+js["code"] == "" {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		access, refresh := "sk-ant-oat01-"+randToken(95)+"AA", "sk-ant-ort01-"+randToken(95)+"AA"
		p.mu.Lock()
		p.accepted[access] = true
		p.accepted[refresh] = true
		p.issued = append(p.issued, access, refresh)
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": access, "refresh_token": refresh, "expires_in": 28800, "token_type": "Bearer"})
	default:
		// A model call, say: refused as a provider refuses a bad key.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"the test provider answers no model call"}}`)
	}
}

// sawPath lists what the provider was sent on path.
func (p *provider) sawPath(path string) []seenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []seenRequest
	for _, s := range p.seen {
		if s.Path == path {
			out = append(out, s)
		}
	}
	return out
}

func (p *provider) issuedTokens() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.issued)
}

// randToken is n characters of a token's alphabet.
func randToken(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)[:n]
}

// goClient builds a Go program into dir that GETs its first argument with
// the token of $TOKEN as a bearer, through the proxy of the environment
// and trusting SSL_CERT_FILE, as every Go client does, and prints the
// answer.
func goClient(t *testing.T, dir string) string {
	t.Helper()
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "go.mod"), []byte("module client\n\ngo 1.22\n"), 0o644)
	os.WriteFile(filepath.Join(src, "main.go"), []byte(`package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	req, _ := http.NewRequest("GET", os.Args[1], nil)
	req.Header.Set("Authorization", "Bearer "+os.Getenv("TOKEN"))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	b, _ := io.ReadAll(res.Body)
	fmt.Print(string(b))
}
`), 0o644)
	bin := filepath.Join(dir, "goclient")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the Go client: %v\n%s", err, out)
	}
	return bin
}

// nodeClient GETs process.argv[1] with the bearer of $TOKEN over a CONNECT
// tunnel through $HTTPS_PROXY (Node 20's fetch reads no proxy variable),
// trusting NODE_EXTRA_CA_CERTS as Node does.
const nodeClient = `
const http = require("http"), tls = require("tls");
const u = new URL(process.argv[1]), p = new URL(process.env.HTTPS_PROXY);
http.request({host: p.hostname, port: p.port, method: "CONNECT", path: u.host}).on("connect", (res, socket) => {
	const s = tls.connect({socket, servername: u.hostname}, () => {
		s.write("GET " + u.pathname + " HTTP/1.1\r\nHost: " + u.host + "\r\nAuthorization: Bearer " + process.env.TOKEN + "\r\nConnection: close\r\n\r\n");
	});
	s.on("data", d => process.stdout.write(d));
	s.on("error", e => { console.error(e.message); process.exit(1); });
}).end();
`

// pyClient GETs sys.argv[1] with the bearer of $TOKEN through the proxy of
// the environment, trusting SSL_CERT_FILE (urllib and ssl's defaults).
const pyClient = `
import os, sys, urllib.request
req = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + os.environ["TOKEN"]})
try:
    print(urllib.request.urlopen(req).read().decode(), end="")
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
`

// maskHome is a HOME with Claude Code's credentials holding real-shaped
// secrets.
type maskHome struct {
	home            string
	access, refresh string // claude's
	token           string // PROVIDER_TOKEN's
}

func newMaskHome(t *testing.T) *maskHome {
	h := &maskHome{
		home:    testkit.HostDir(t),
		access:  "sk-ant-oat01-" + randToken(95) + "AA",
		refresh: "sk-ant-ort01-" + randToken(95) + "AA",
		token:   "ghp_" + randToken(36),
	}
	os.MkdirAll(filepath.Join(h.home, ".claude"), 0o700)
	creds := fmt.Sprintf(`{"claudeAiOauth":{"accessToken":%q,"refreshToken":%q,"expiresAt":4102444800000,"scopes":["user:inference","user:profile"],"subscriptionType":"max"}}`+"\n", h.access, h.refresh)
	if err := os.WriteFile(filepath.Join(h.home, ".claude/.credentials.json"), []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(h.home, ".claude.json"), []byte(`{"numStartups":1,"hasCompletedOnboarding":true}`+"\n"), 0o600)
	return h
}

// secrets are every real value a command must never read.
func (h *maskHome) secrets() []string { return []string{h.access, h.refresh, h.token} }

// TestMask: with --mask, on both backends and with the network on or an
// allowlist, the jail holds placeholders of the real secrets' shape, and
// curl, Python, Node and Go clients authenticate with them to the hosts
// the credentials are bound to, through the proxy; elsewhere a
// placeholder goes out as it is; nothing a command reads holds a real
// secret.
func TestMask(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		for _, network := range []string{"on", "allow:api.anthropic.com,console.anthropic.com,platform.claude.com,api.provider.test,other.test,evil.test"} {
			t.Run(strings.SplitN(network, ":", 2)[0], func(t *testing.T) { testMask(t, b, network) })
		}
	})
}

func testMask(t *testing.T, b testkit.Backend, network string) {
	h := newMaskHome(t)
	prov := newProvider(t, h.secrets()...)
	project := testkit.NewProject(t)
	caFile := filepath.Join(project, "provider-ca.pem")
	os.WriteFile(caFile, prov.caPEM, 0o644)
	goBin := goClient(t, project)
	env := testkit.ServerEnv(testkit.TestHosts+"="+prov.hosts(), testkit.TestRoots+"="+caFile,
		"HOME="+h.home, "CLAUDE_CONFIG_DIR=", "PROVIDER_TOKEN="+h.token)
	ts := b.Start(t, project, env, "--session", "m", "--auth", "claude", "--pass-env", "PROVIDER_TOKEN",
		"--mask", prov.maskFlag(), "--network", network)

	st := ts.Status()
	if len(st.Mask.Credentials) != 2 || st.Mask.CA == "" || st.Mask.Credentials[0].Name != "claude" || !slices.Contains(st.Mask.Credentials[0].Hosts, "api.anthropic.com") {
		t.Fatalf("jail_status mask: %+v", st.Mask)
	}

	// The files and variables: placeholders of the same shape.
	res, _ := ts.Exec(map[string]any{"command": `cat "$HOME/.claude/.credentials.json"; echo; echo "T=$PROVIDER_TOKEN"`})
	var creds struct {
		OAuth struct {
			AccessToken, RefreshToken string
			ExpiresAt                 int64
		} `json:"claudeAiOauth"`
	}
	first, rest, _ := strings.Cut(res.Stdout, "\n")
	if err := json.Unmarshal([]byte(first), &creds); err != nil {
		t.Fatalf("the jail's credentials do not parse: %v: %q (stderr %q)", err, res.Stdout, res.Stderr)
	}
	access, refresh := creds.OAuth.AccessToken, creds.OAuth.RefreshToken
	token := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), "T="))
	for _, c := range []struct{ name, ph, real, prefix string }{
		{"accessToken", access, h.access, "sk-ant-oat01-"},
		{"refreshToken", refresh, h.refresh, "sk-ant-ort01-"},
		{"PROVIDER_TOKEN", token, h.token, "ghp_"},
	} {
		if c.ph == c.real || len(c.ph) != len(c.real) || !strings.HasPrefix(c.ph, c.prefix) {
			t.Errorf("%s in the jail is %q: want a placeholder of the real one's shape", c.name, c.ph)
		}
	}
	if creds.OAuth.ExpiresAt != 4102444800000 {
		t.Errorf("expiresAt in the jail: %d, want the host's", creds.OAuth.ExpiresAt)
	}

	files := map[string]any{"GO": goBin, "CA": caFile}
	run := func(t *testing.T, command string, vars map[string]any) string {
		t.Helper()
		e := map[string]any{}
		for k, v := range files {
			e[k] = v
		}
		for k, v := range vars {
			e[k] = v
		}
		res, raw := ts.Exec(map[string]any{"command": command, "env": e})
		if !res.Confined {
			t.Fatalf("not confined: %s", testkit.ResultText(raw))
		}
		return res.Stdout + res.Stderr
	}
	check := prov.url("api.provider.test", "/check")
	claudeCheck := prov.url("api.anthropic.com", "/check")
	for _, c := range []struct{ name, command, url string }{
		{"curl", `curl -sS -H "Authorization: Bearer $TOKEN" "$URL"`, check},
		{"curl x-api-key", `curl -sS -H "x-api-key: $TOKEN" "$URL"`, claudeCheck},
		{"curl basic", `curl -sS -u "x-access-token:$TOKEN" "$URL"`, check},
		{"python", `python3 -c "$PY" "$URL"`, check},
		{"node", `node -e "$NODE" "$URL"`, claudeCheck},
		{"go", `"$GO" "$URL"`, check},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok := token
			if c.url == claudeCheck {
				tok = access
			}
			out := run(t, c.command, map[string]any{"TOKEN": tok, "URL": c.url, "PY": pyClient, "NODE": nodeClient})
			if !strings.Contains(out, "authenticated as HTTP/1.1") || strings.Contains(out, "unauthenticated") {
				t.Errorf("not authenticated with the placeholder: %q", out)
			}
		})
	}

	// A placeholder sent where its credential is not bound goes out as
	// itself: to a host bound to nothing (a blind tunnel, whose
	// certificate is the provider's own), and to one bound to another
	// credential.
	t.Run("unbound", func(t *testing.T) {
		out := run(t, `curl -sS --cacert "$CA" -H "Authorization: Bearer $TOKEN" "$URL"`, map[string]any{"TOKEN": token, "URL": prov.url("other.test", "/check")})
		if !strings.Contains(out, "unauthenticated: got "+token) {
			t.Errorf("the placeholder to an unbound host: %q", out)
		}
		res, _ := ts.Exec(map[string]any{"command": `curl -sS -H "Authorization: Bearer $TOKEN" "$URL"`, "env": map[string]any{"TOKEN": token, "URL": claudeCheck}})
		if !strings.Contains(res.Stdout, "unauthenticated: got "+token) {
			t.Errorf("env:PROVIDER_TOKEN's placeholder to claude's host: %q", res.Stdout+res.Stderr)
		}
		// Seen by the proxy, which terminates claude's host: a refusal
		// of the call.
		counted := false
		for _, r := range res.Refusals {
			counted = counted || r.Host == "api.anthropic.com" && strings.Contains(r.Reason, "env:PROVIDER_TOKEN")
		}
		if !counted {
			t.Errorf("the placeholder sent where it is not bound is not among the call's refusals: %+v", res.Refusals)
		}
		// Over plain HTTP, to any host: passed on, and counted.
		res, _ = ts.Exec(map[string]any{"command": `curl -sS -o /dev/null -H "Authorization: Bearer $TOKEN" "http://other.test:1/"; true`, "env": map[string]any{"TOKEN": token}})
		counted = false
		for _, r := range res.Refusals {
			counted = counted || r.Protocol == "http" && strings.Contains(r.Reason, "env:PROVIDER_TOKEN")
		}
		if !counted {
			t.Errorf("the placeholder over plain HTTP is not among the call's refusals: %+v", res.Refusals)
		}
	})

	// The bound host reflects what it was sent: the jail reads the
	// placeholder back, plain or gzip-encoded, never the secret.
	t.Run("echo", func(t *testing.T) {
		for _, q := range []string{"", "?gzip=1"} {
			out := run(t, `curl -sS --compressed -H "Authorization: Bearer $TOKEN" "$URL"`, map[string]any{"TOKEN": token, "URL": prov.url("api.provider.test", "/echo"+q)})
			if !strings.Contains(out, token) || strings.Contains(out, h.token) {
				t.Errorf("echo%s: %q", q, out)
			}
		}
	})

	// Claude's refresh token: the provider rotates them, so a refresh
	// from the jail is answered by the proxy and never reaches it.
	t.Run("refresh refused", func(t *testing.T) {
		before := len(prov.sawPath("/v1/oauth/token"))
		out := run(t, `curl -sS -w ' %{http_code}' -d "grant_type=refresh_token&refresh_token=$RT" "$URL"`, map[string]any{"RT": refresh, "URL": prov.url("console.anthropic.com", "/v1/oauth/token")})
		if !strings.HasSuffix(strings.TrimSpace(out), " 403") || len(prov.sawPath("/v1/oauth/token")) != before {
			t.Errorf("a refresh of the operator's login from the jail: %q", out)
		}
	})

	// Tokens a bound host gives reach the jail as new placeholders,
	// which then work.
	t.Run("issued", func(t *testing.T) {
		out := run(t, `curl -sS -d "grant_type=authorization_code&code=xyz" "$URL"`, map[string]any{"URL": prov.url("api.provider.test", "/oauth/token")})
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("token answer %q: %v", out, err)
		}
		issued := prov.issuedTokens()
		newAccess, _ := got["access_token"].(string)
		if len(issued) < 2 || newAccess == "" || slices.Contains(issued, newAccess) || len(newAccess) != len(issued[len(issued)-2]) {
			t.Fatalf("the jail got %q of the issued %q", out, issued)
		}
		out = run(t, `curl -sS -H "Authorization: Bearer $TOKEN" "$URL"`, map[string]any{"TOKEN": newAccess, "URL": check})
		if !strings.Contains(out, "authenticated as") || strings.Contains(out, "unauthenticated") {
			t.Errorf("the issued token's placeholder: %q", out)
		}
	})

	// No real secret anywhere a command reads: files, variables, /proc,
	// through a call, a job and a terminal job.
	if network != "on" {
		// The same files and processes as with the network on: the grep,
		// which takes minutes, runs once per backend.
		return
	}
	t.Run("grep", func(t *testing.T) {
		// Each secret reaches the grep in two halves, joined only in a
		// pipe, so that no command line or environment holds it whole.
		all := append(h.secrets(), prov.issuedTokens()...)
		vars := map[string]any{"PROJECT": project, "N": fmt.Sprint(len(all))}
		for i, s := range all {
			vars[fmt.Sprintf("A%d", i)], vars[fmt.Sprintf("B%d", i)] = s[:9], s[9:]
		}
		grep := `pats() { i=0; while [ $i -lt $N ]; do eval 'printf "%s%s\n" "$A'$i'" "$B'$i'"'; i=$((i+1)); done; }
timeout 540 grep -r -a -l -F -D skip -f <(pats) /home /root /tmp /etc /var "$HOME" "$PROJECT" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null; echo "grep-exit=$?"`
		argv := []string{"/bin/bash", "-c", grep}
		// The control: a real secret the test plants in the jail is
		// found, which proves the grep sees what it must.
		control := filepath.Join(st.Jail, ".tmp", "control")
		if err := os.WriteFile(control, []byte(h.token), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, how := range []string{"control", "call", "job", "tty"} {
			if how == "call" {
				os.Remove(control)
			}
			args := map[string]any{"argv": argv, "env": vars, "timeout_ms": 570000}
			run := how
			if how == "control" {
				run = "call"
			}
			found := runGrep(t.Context(), t, ts, run, args)
			switch {
			case how == "control" && !slices.Contains(found, control):
				t.Fatalf("the grep does not find the secret planted in %s: it proves nothing (found %q)", control, found)
			case how != "control" && len(found) > 0:
				t.Errorf("a real secret is readable through a %s in: %q", how, found)
			}
		}
	})
}
