package egress

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/proxy"

	"github.com/jail-mcp/jail-mcp/auth"
)

const boundHost = "api.bound.test"

// randomText is n letters and digits, a secret's body.
func randomText(n int) string {
	const set = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = set[int(b[i])%len(set)]
	}
	return string(b)
}

// maskSecret is a secret of the fixture: its real value and placeholder.
type maskSecret struct {
	name, real, ph string
}

// maskOrigin is the TLS server behind the bound names (and blind.test):
// it knows the real values, and records what each request brought.
type maskOrigin struct {
	mu      sync.Mutex
	seen    map[string]seenRequest // by path
	hits    map[string]int
	accept  []string // Bearer tokens /auth takes
	tokens  map[string]string
	bigBody []byte
	// paths are answers a test adds, by path: what a hostile or broken
	// host does.
	paths map[string]http.HandlerFunc
}

type seenRequest struct {
	uri    string
	header http.Header
	body   string
}

func (o *maskOrigin) last(path string) (seenRequest, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen[path], o.hits[path]
}

func (o *maskOrigin) accepts(tok string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.accept = append(o.accept, tok)
}

func (o *maskOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	o.mu.Lock()
	o.seen[r.URL.Path] = seenRequest{r.RequestURI, r.Header.Clone(), string(body)}
	o.hits[r.URL.Path]++
	accept := slices.Clone(o.accept)
	h := o.paths[r.URL.Path]
	o.mu.Unlock()
	if h != nil {
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		h(w, r)
		return
	}
	switch {
	case r.URL.Path == "/auth":
		_, pass, _ := r.BasicAuth()
		for _, a := range accept {
			if r.Header.Get("Authorization") == "Bearer "+a || r.Header.Get("X-Api-Key") == a || pass == a {
				io.WriteString(w, "ok")
				return
			}
		}
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	case strings.HasPrefix(r.URL.Path, "/echo"):
		// Reflects what came: the headers, in the answer's header and
		// body, gzipped when asked (whatever Accept-Encoding says).
		var text bytes.Buffer
		r.Header.Write(&text)
		text.WriteString(r.RequestURI + "\n" + string(body))
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "text/plain")
		switch r.URL.Query().Get("enc") {
		case "gzip":
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			zw.Write(text.Bytes())
			zw.Close()
		case "br":
			w.Header().Set("Content-Encoding", "br")
			w.Write(text.Bytes())
		default:
			w.Write(text.Bytes())
		}
	case r.URL.Path == "/split":
		// A value split across two chunks (two TLS records).
		v := r.URL.Query().Get("v")
		io.WriteString(w, "before "+v[:len(v)/2])
		w.(http.Flusher).Flush()
		io.WriteString(w, v[len(v)/2:]+" after")
	case r.URL.Path == "/token":
		w.Header().Set("Content-Type", "application/json")
		// The refresh token as an encoder that escapes slashes writes it.
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"bearer","nested":{"idToken":%q},"refresh_token":"%s"}`,
			o.tokens["access"], o.tokens["id"], strings.ReplaceAll(o.tokens["refresh"], "/", `\/`))
	case r.URL.Path == "/token-form":
		// GitHub's token endpoint answers form-encoded unless asked.
		w.Header().Set("Content-Type", "application/x-www-form-urlencoded")
		fmt.Fprintf(w, "access_token=%s&scope=repo%%2Cgist&token_type=bearer", url.QueryEscape(o.tokens["form"]))
	case r.URL.Path == "/bye":
		w.Header().Set("Connection", "close")
		io.WriteString(w, "bye")
	case r.URL.Path == "/big":
		w.Header().Set("Content-Length", fmt.Sprint(len(o.bigBody)))
		w.Write(o.bigBody)
	default:
		io.WriteString(w, "hello from the origin, a short answer of about a hundred bytes, as an API's small reply")
	}
}

// maskFixture is a proxy with masked credentials bound to api.bound.test,
// the TLS origin behind that name and blind.test, a plain HTTP origin as
// plain.test, and the proxy's refusals.
type maskFixture struct {
	proxyAddr string
	port      string // the TLS origin's
	plainPort string
	masks     *Masks
	upCA      *CA
	origin    *maskOrigin
	srv       *httptest.Server
	secrets   map[string]maskSecret // bearer, key, git, token, refresh, other

	mu       sync.Mutex
	log      bytes.Buffer // the proxy's log, under mu
	refusals []Refusal
	changed  chan struct{} // closed at each refusal
}

func newMaskFixture(tb testing.TB, roots func(upCA *CA) *x509.CertPool) *maskFixture {
	tb.Helper()
	now := time.Now()
	upCA, err := NewCA(now)
	if err != nil {
		tb.Fatal(err)
	}
	proxyCA, err := NewCA(now)
	if err != nil {
		tb.Fatal(err)
	}
	f := &maskFixture{upCA: upCA, changed: make(chan struct{}), secrets: map[string]maskSecret{}}
	f.origin = &maskOrigin{
		seen: map[string]seenRequest{}, hits: map[string]int{},
		tokens: map[string]string{
			"access":  "sk-ant-oat01-" + randomText(48),
			"refresh": "1//0g" + randomText(40),
			"id":      "eyJ" + randomText(30) + "." + randomText(40) + "." + randomText(20),
			"form":    "gho_" + randomText(36),
		},
		bigBody: bytes.Repeat([]byte("0123456789abcdef"), 1<<19), // 8 MiB
		paths:   map[string]http.HandlerFunc{},
	}
	srv := httptest.NewUnstartedServer(f.origin)
	// The proxy dials the origin for a CONNECT before the client's TLS
	// is known to succeed: a refused one leaves a handshake unbegun.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return upCA.Leaf(h.ServerName, time.Now())
	}}
	srv.StartTLS()
	tb.Cleanup(srv.Close)
	f.srv = srv
	f.port = fmt.Sprint(srv.Listener.Addr().(*net.TCPAddr).Port)
	plain := httptest.NewServer(f.origin)
	tb.Cleanup(plain.Close)
	f.plainPort = fmt.Sprint(plain.Listener.Addr().(*net.TCPAddr).Port)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(upCA.PEM())
	if roots != nil {
		pool = roots(upCA)
	}
	f.masks = NewMasks(proxyCA, pool)
	for _, s := range []struct {
		key, name, prefix string
		hosts, paths      []string
		noRefresh         bool
	}{
		{"bearer", "env:API_TOKEN", "sk-ant-oat01-", []string{boundHost}, []string{"/token", "/token-form"}, false},
		{"key", "env:API_KEY", "sk-ant-api03-", []string{boundHost}, nil, false},
		{"git", "env:GH_TOKEN", "ghp_", []string{boundHost, "github.bound.test"}, nil, false},
		{"refresh", "claude refreshToken", "sk-ant-ort01-", []string{boundHost}, []string{"/token"}, true},
		{"other", "env:OTHER_TOKEN", "glpat-", []string{"other.bound.test"}, nil, false},
	} {
		real := s.prefix + randomText(40)
		ph, err := auth.Placeholder(real)
		if err != nil {
			tb.Fatal(err)
		}
		f.secrets[s.key] = maskSecret{s.name, real, ph}
		hosts := make([]string, len(s.hosts))
		for i, h := range s.hosts {
			hosts[i] = h + ":" + f.port // the origin's port, named
		}
		f.masks.Set(Secret{Name: s.name, Placeholder: ph, Hosts: hosts, TokenPaths: s.paths, NoRefresh: s.noRefresh,
			Value: func() (string, error) { return real, nil }})
		f.origin.accepts(real)
	}
	f.masks.Set(Secret{Name: "env:BROKEN", Placeholder: "sk-broken-" + randomText(20), Hosts: []string{boundHost + ":" + f.port},
		Value: func() (string, error) { return "", errors.New("the host file is gone") }})

	pol, err := Parse("api.bound.test,other.bound.test,blind.test,plain.test")
	if err != nil {
		tb.Fatal(err)
	}
	p := New(pol, Options{
		Resolver: fakeResolver{boundHost: {"127.0.0.1"}, "other.bound.test": {"127.0.0.1"}, "blind.test": {"127.0.0.1"}, "plain.test": {"127.0.0.1"}},
		Masks:    f.masks,
		Log:      slog.New(slog.NewTextHandler(lockedWriter{&f.mu, &f.log}, nil)),
		Refused: func(r Refusal) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.refusals = append(f.refusals, r)
			close(f.changed)
			f.changed = make(chan struct{})
		},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go p.Serve(ln)
	tb.Cleanup(func() { ln.Close(); p.Close() })
	f.proxyAddr = ln.Addr().String()
	return f
}

// waitRefusal waits for a refusal whose reason holds sub (the proxy may
// count one after the client has seen its end).
func (f *maskFixture) waitRefusal(t *testing.T, sub string) Refusal {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		f.mu.Lock()
		for _, r := range f.refusals {
			if strings.Contains(r.Reason, sub) {
				f.mu.Unlock()
				return r
			}
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Errorf("no refusal %q among %+v", sub, f.refusals)
			return Refusal{}
		}
	}
}

// refused reports whether a refusal whose reason holds sub was counted.
func (f *maskFixture) refused(sub string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.ContainsFunc(f.refusals, func(r Refusal) bool { return strings.Contains(r.Reason, sub) })
}

// jailRoots is what a jailed client trusts: the proxy's authority and the
// origin's (standing for the system's roots).
func (f *maskFixture) jailRoots() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(f.masks.CA.PEM())
	pool.AppendCertsFromPEM(f.upCA.PEM())
	return pool
}

// client is an HTTP client that goes through the proxy as a jailed one
// does, and counts its connections to the proxy.
func (f *maskFixture) client(dials *atomic.Int32) *http.Client {
	pu, _ := url.Parse("http://" + f.proxyAddr)
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{
		Proxy:              http.ProxyURL(pu),
		TLSClientConfig:    &tls.Config{RootCAs: f.jailRoots()},
		DisableCompression: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials != nil {
				dials.Add(1)
			}
			return d.DialContext(ctx, network, addr)
		},
	}}
}

func (f *maskFixture) url(host, path string) string {
	return "https://" + host + ":" + f.port + path
}

// do sends a request and reads the answer whole.
func do(t testing.TB, c *http.Client, method, target string, header http.Header, body string) (*http.Response, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	return send(t, c, method, target, header, r)
}

// send sends a request with body (nil for none) and reads the answer
// whole.
func send(t testing.TB, c *http.Client, method, target string, header http.Header, body io.Reader) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: the body: %v", method, target, err)
	}
	return resp, string(b)
}

// tlsThrough opens a CONNECT to host on the origin's port and starts TLS
// in it under the name sni, offering protos.
func (f *maskFixture) tlsThrough(t *testing.T, host, sni string, protos []string) (*tls.Conn, error) {
	t.Helper()
	c, err := net.Dial("tcp", f.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\n\r\n", host, f.port, host, f.port)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 || br.Buffered() != 0 {
		t.Fatalf("CONNECT %s: %v %v", host, resp, err)
	}
	tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: f.jailRoots(), NextProtos: protos, InsecureSkipVerify: sni == ""})
	return tc, tc.Handshake()
}

// TestMaskedAuthHeaders: the origin takes only real values; the client
// authenticates with placeholders, as a Bearer token, an API key and
// Basic auth (git's way), and two requests on one kept connection are
// both given them.
func TestMaskedAuthHeaders(t *testing.T) {
	f := newMaskFixture(t, nil)
	var dials atomic.Int32
	c := f.client(&dials)
	s := f.secrets
	for _, h := range []http.Header{
		{"Authorization": {"Bearer " + s["bearer"].ph}},
		{"X-Api-Key": {s["key"].ph}},
		{"Authorization": {"Basic " + base64Std("x-access-token:"+s["git"].ph)}},
		{"Authorization": {"Bearer " + s["bearer"].ph}},
	} {
		if resp, body := do(t, c, "GET", f.url(boundHost, "/auth"), h, ""); resp.StatusCode != 200 || body != "ok" {
			t.Errorf("with %v: %d %q", h, resp.StatusCode, body)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d connections to the proxy for 4 requests, want 1 kept", n)
	}
	seen, _ := f.origin.last("/auth")
	if got := seen.header.Get("Authorization"); got != "Bearer "+s["bearer"].real {
		t.Errorf("the last request's Authorization at the origin: %q", got)
	}
	if got := seen.header.Get("Accept-Encoding"); got != "identity" {
		t.Errorf("Accept-Encoding at the origin: %q, want identity", got)
	}
	// Without a placeholder the origin says no: the proxy adds nothing.
	if resp, _ := do(t, c, "GET", f.url(boundHost, "/auth"), nil, ""); resp.StatusCode != 401 {
		t.Errorf("without credentials: %d, want 401", resp.StatusCode)
	}
	// SOCKS5 by name is terminated too.
	d, err := proxy.SOCKS5("tcp", f.proxyAddr, nil, proxy.Direct)
	if err != nil {
		t.Fatal(err)
	}
	sc := &http.Client{Transport: &http.Transport{
		Dial:            d.Dial,
		TLSClientConfig: &tls.Config{RootCAs: f.jailRoots()},
	}}
	if resp, body := do(t, sc, "GET", f.url(boundHost, "/auth"), http.Header{"X-Api-Key": {s["key"].ph}}, ""); resp.StatusCode != 200 || body != "ok" {
		t.Errorf("through SOCKS5: %d %q", resp.StatusCode, body)
	}
	if f.refused("") {
		t.Errorf("refusals: %+v", f.refusals)
	}
}

func base64Std(s string) string {
	return base64.StdEncoding.EncodeToString([]byte(s))
}

// TestMaskedBodies: a token endpoint's body, form or JSON, is given the
// value of a secret with that token path, not of one without; another
// path's body, and the URL, keep placeholders.
func TestMaskedBodies(t *testing.T) {
	f := newMaskFixture(t, nil)
	c := f.client(nil)
	bearer, key := f.secrets["bearer"], f.secrets["key"]
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	js := http.Header{"Content-Type": {"application/json; charset=utf-8"}}

	do(t, c, "POST", f.url(boundHost, "/token"), form, "grant_type=x&token="+bearer.ph+"&key="+key.ph)
	if seen, _ := f.origin.last("/token"); seen.body != "grant_type=x&token="+bearer.real+"&key="+key.ph {
		t.Errorf("form to the token path: %q", seen.body)
	}
	do(t, c, "POST", f.url(boundHost, "/token"), js, `{"token":"`+bearer.ph+`","key":"`+key.ph+`"}`)
	if seen, _ := f.origin.last("/token"); seen.body != `{"token":"`+bearer.real+`","key":"`+key.ph+`"}` {
		t.Errorf("JSON to the token path: %q", seen.body)
	}
	do(t, c, "POST", f.url(boundHost, "/echo"), form, "token="+bearer.ph)
	if seen, _ := f.origin.last("/echo"); seen.body != "token="+bearer.ph {
		t.Errorf("form to another path: %q, want the placeholder", seen.body)
	}
	do(t, c, "GET", f.url(boundHost, "/echo/"+bearer.ph+"?q="+bearer.ph), http.Header{"X-Other": {bearer.ph}}, "")
	seen, _ := f.origin.last("/echo/" + bearer.ph)
	if want := "/echo/" + bearer.ph + "?q=" + bearer.ph; seen.uri != want || seen.header.Get("X-Other") != bearer.ph {
		t.Errorf("URL and another header at the origin: %q %q, want placeholders", seen.uri, seen.header.Get("X-Other"))
	}
	// A large body elsewhere streams through whole.
	large := strings.Repeat("0123456789abcdef", 1<<17) // 2 MiB
	do(t, c, "PUT", f.url(boundHost, "/echo"), nil, large)
	if seen, _ := f.origin.last("/echo"); seen.body != large {
		t.Errorf("a large body: %d bytes at the origin, want %d", len(seen.body), len(large))
	}
	// A client that waits for 100 Continue gets it: from the host for a
	// body that streams, from the proxy for a token endpoint's.
	for _, path := range []string{"/echo", "/token"} {
		tc, err := f.tlsThrough(t, boundHost, boundHost, nil)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(tc, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", path, boundHost, len("t="+bearer.ph))
		br := bufio.NewReader(tc)
		if line, _ := br.ReadString('\n'); !strings.HasPrefix(line, "HTTP/1.1 100") {
			t.Fatalf("%s: %q before the body, want 100 Continue", path, line)
		}
		br.ReadString('\n')
		io.WriteString(tc, "t="+bearer.ph)
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
			t.Errorf("%s after 100 Continue: %v %v", path, resp, err)
		}
	}
	if seen, _ := f.origin.last("/token"); seen.body != "t="+bearer.real {
		t.Errorf("the token body after 100 Continue: %q", seen.body)
	}
	// A body too large to read for a token path is answered here.
	if resp, _ := do(t, c, "POST", f.url(boundHost, "/token"), form, strings.Repeat("a", maxMaskedBody+1)); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a large body to the token path: %d, want 413", resp.StatusCode)
	}
	// A value that cannot be read: nothing goes on.
	i := slices.IndexFunc(f.masks.Secrets(), func(s Secret) bool { return s.Name == "env:BROKEN" })
	if resp, _ := do(t, c, "GET", f.url(boundHost, "/auth"), http.Header{"Authorization": {"Bearer " + f.masks.Secrets()[i].Placeholder}}, ""); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("an unreadable value: %d, want 502", resp.StatusCode)
	}
}

// TestMaskedRefusals: a name other than the CONNECT's, in TLS or in a
// request (domain fronting), HTTP/2, a refresh token the host must not
// get, another host's placeholder, and an origin whose certificate does
// not verify are each refused and counted.
func TestMaskedRefusals(t *testing.T) {
	f := newMaskFixture(t, nil)

	if _, err := f.tlsThrough(t, boundHost, "evil.test", nil); err == nil {
		t.Error("TLS under another name went through")
	}
	if r := f.waitRefusal(t, "asked under the name evil.test"); r.Protocol != "https" || r.Host != boundHost {
		t.Errorf("refusal %+v", r)
	}
	if _, err := f.tlsThrough(t, boundHost, "", nil); err == nil {
		t.Error("TLS without a name went through")
	}
	f.waitRefusal(t, "asked without a name")

	tc, err := f.tlsThrough(t, boundHost, boundHost, []string{"h2", "http/1.1"})
	if err != nil {
		t.Fatal(err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Errorf("ALPN with h2 offered: %q, want http/1.1", p)
	}
	// One request for the host, then one for another: the second is
	// refused as the first was not.
	br := bufio.NewReader(tc)
	fmt.Fprintf(tc, "GET /auth HTTP/1.1\r\nHost: %s\r\nX-Api-Key: %s\r\n\r\n", boundHost, f.secrets["key"].ph)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the first request: %v %v", resp, err)
	} else {
		io.Copy(io.Discard, resp.Body)
	}
	fmt.Fprintf(tc, "GET /auth HTTP/1.1\r\nHost: evil.test\r\nX-Api-Key: %s\r\n\r\n", f.secrets["key"].ph)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a request for another host: %v %v, want 421", resp, err)
	}
	f.waitRefusal(t, `a request for "evil.test"`)
	tc, _ = f.tlsThrough(t, boundHost, boundHost, nil)
	fmt.Fprintf(tc, "GET https://evil.test/auth HTTP/1.1\r\nHost: %s\r\n\r\n", boundHost)
	if resp, err := http.ReadResponse(bufio.NewReader(tc), nil); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("an absolute URL for another host: %v %v, want 421", resp, err)
	}
	if _, n := f.origin.last("/auth"); n != 1 {
		t.Errorf("the origin saw %d requests, want the first only", n)
	}

	if _, err := f.tlsThrough(t, boundHost, boundHost, []string{"h2"}); err == nil {
		t.Error("TLS for h2 only went through")
	}
	f.waitRefusal(t, "asked for h2 only")
	tc, _ = f.tlsThrough(t, boundHost, boundHost, nil)
	io.WriteString(tc, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	if b, _ := io.ReadAll(tc); len(b) != 0 {
		t.Errorf("after the HTTP/2 preface: %q, want the end", b)
	}
	f.waitRefusal(t, "HTTP/2.0 on the TLS connection")

	c := f.client(nil)
	refresh := f.secrets["refresh"]
	resp, body := do(t, c, "POST", f.url(boundHost, "/token"), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, "grant_type=refresh_token&refresh_token="+refresh.ph)
	var e struct{ Error string }
	if resp.StatusCode != http.StatusForbidden || json.Unmarshal([]byte(body), &e) != nil || !strings.HasPrefix(e.Error, "jail-mcp: ") || !strings.Contains(e.Error, "refresh") {
		t.Errorf("a refresh token: %d %q, want 403 and a JSON error", resp.StatusCode, body)
	}
	if _, n := f.origin.last("/token"); n != 0 {
		t.Errorf("the origin saw %d requests to /token", n)
	}
	f.waitRefusal(t, "claude refreshToken sent to api.bound.test")

	other := f.secrets["other"]
	do(t, c, "GET", f.url(boundHost, "/echo"), http.Header{"Authorization": {"Bearer " + other.ph}}, "")
	if seen, _ := f.origin.last("/echo"); seen.header.Get("Authorization") != "Bearer "+other.ph {
		t.Errorf("another host's placeholder at the origin: %q", seen.header.Get("Authorization"))
	}
	if r := f.waitRefusal(t, "the placeholder of env:OTHER_TOKEN"); strings.Contains(r.Reason, other.real) {
		t.Errorf("a refusal names the value: %+v", r)
	}

	// An origin the roots do not vouch for.
	g := newMaskFixture(t, func(*CA) *x509.CertPool { return x509.NewCertPool() })
	if resp, _ := do(t, g.client(nil), "GET", g.url(boundHost, "/auth"), http.Header{"X-Api-Key": {g.secrets["key"].ph}}, ""); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("an untrusted origin: %d, want 502", resp.StatusCode)
	}
	g.waitRefusal(t, "the certificate of api.bound.test does not verify")
	if _, n := g.origin.last("/auth"); n != 0 {
		t.Errorf("the untrusted origin saw %d requests", n)
	}
}

// TestMaskedUnbound: a host no secret is bound to stays a blind tunnel
// (its own certificate, the placeholder as sent), and a placeholder in a
// plain HTTP request goes on as it is, counted.
func TestMaskedUnbound(t *testing.T) {
	f := newMaskFixture(t, nil)
	c := f.client(nil)
	ph := f.secrets["bearer"].ph
	resp, _ := do(t, c, "GET", f.url("blind.test", "/echo"), http.Header{"Authorization": {"Bearer " + ph}}, "")
	upPool := x509.NewCertPool()
	upPool.AppendCertsFromPEM(f.upCA.PEM())
	if _, err := resp.TLS.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: "blind.test", Roots: upPool}); err != nil {
		t.Errorf("blind.test's certificate is not the origin's: %v", err)
	}
	if seen, _ := f.origin.last("/echo"); seen.header.Get("Authorization") != "Bearer "+ph {
		t.Errorf("through the tunnel: %q, want the placeholder", seen.header.Get("Authorization"))
	}
	if f.refused("") {
		t.Errorf("refusals for a tunnel: %+v", f.refusals)
	}

	plain := "http://plain.test:" + f.plainPort
	do(t, c, "GET", plain+"/echo?t="+ph, http.Header{"Authorization": {"Bearer " + ph}}, "")
	if seen, _ := f.origin.last("/echo"); seen.header.Get("Authorization") != "Bearer "+ph || seen.uri != "/echo?t="+ph {
		t.Errorf("plain HTTP: %q %q, want the placeholder", seen.header.Get("Authorization"), seen.uri)
	}
	if r := f.waitRefusal(t, "the placeholder of env:API_TOKEN sent over plain HTTP"); r.Protocol != "http" || r.Host != "plain.test" {
		t.Errorf("refusal %+v", r)
	}
}

// TestMaskedAnswers: what the origin reflects comes back as placeholders,
// in headers and body, gzipped or split across records; an encoding the
// proxy cannot read is refused; new tokens in a JSON answer get
// placeholders of their own, which then work.
func TestMaskedAnswers(t *testing.T) {
	f := newMaskFixture(t, nil)
	c := f.client(nil)
	bearer := f.secrets["bearer"]
	for _, enc := range []string{"", "gzip"} {
		resp, body := do(t, c, "GET", f.url(boundHost, "/echo?enc="+enc), http.Header{"Authorization": {"Bearer " + bearer.ph}}, "")
		if resp.StatusCode != 200 || strings.Contains(body, bearer.real) || !strings.Contains(body, "Bearer "+bearer.ph) {
			t.Errorf("an echo (%q): %d %q, want the placeholder, never the value", enc, resp.StatusCode, body)
		}
		if got := resp.Header.Get("X-Echo-Authorization"); got != "Bearer "+bearer.ph {
			t.Errorf("an echoed header (%q): %q", enc, got)
		}
		if resp.Header.Get("Content-Encoding") != "" {
			t.Errorf("an echo (%q) still encoded", enc)
		}
	}
	if resp, _ := do(t, c, "GET", f.url(boundHost, "/echo?enc=br"), http.Header{"Authorization": {"Bearer " + bearer.ph}}, ""); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("an answer in br: %d, want 502", resp.StatusCode)
	}
	for _, s := range f.secrets {
		if _, body := do(t, c, "GET", f.url(boundHost, "/split?v="+url.QueryEscape(s.real)), nil, ""); body != "before "+s.ph+" after" {
			t.Errorf("a value split across reads: %q, want %q", body, "before "+s.ph+" after")
		}
	}

	if resp, body := do(t, c, "GET", f.url(boundHost, "/big"), nil, ""); body != string(f.origin.bigBody) || resp.ContentLength != int64(len(body)) {
		t.Errorf("a large answer: %d bytes (length %d), not the %d sent", len(body), resp.ContentLength, len(f.origin.bigBody))
	}

	resp, body := do(t, c, "POST", f.url(boundHost, "/token"), http.Header{"Content-Type": {"application/json"}}, `{"token":"`+bearer.ph+`"}`)
	var got struct {
		Access  string `json:"access_token"`
		Refresh string `json:"refresh_token"`
		Nested  struct {
			ID string `json:"idToken"`
		}
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || resp.ContentLength != int64(len(body)) {
		t.Fatalf("the token answer: %q (length %d): %v", body, resp.ContentLength, err)
	}
	toks := f.origin.tokens
	for _, real := range toks {
		if strings.Contains(body, real) || strings.Contains(body, strings.ReplaceAll(real, "/", `\/`)) {
			t.Errorf("the token answer holds a real token: %q", body)
		}
	}
	for name, pair := range map[string][2]string{"access_token": {got.Access, toks["access"]}, "refresh_token": {got.Refresh, toks["refresh"]}, "idToken": {got.Nested.ID, toks["id"]}} {
		if len(pair[0]) != len(pair[1]) || pair[0] == pair[1] {
			t.Errorf("%s: %q for %q", name, pair[0], pair[1])
		}
	}
	var minted []Secret
	for _, s := range f.masks.Secrets() {
		if strings.HasPrefix(s.Name, boundHost+" response ") {
			minted = append(minted, s)
		}
	}
	if len(minted) != 3 {
		t.Fatalf("minted %+v, want 3", minted)
	}
	if _, body := do(t, c, "POST", f.url(boundHost, "/token-form"), nil, ""); strings.Contains(body, toks["form"]) || !strings.Contains(body, "&scope=repo%2Cgist&token_type=bearer") {
		t.Errorf("a form-encoded token answer: %q", body)
	} else if q, err := url.ParseQuery(body); err != nil || len(q.Get("access_token")) != len(toks["form"]) || !strings.HasPrefix(q.Get("access_token"), "gho_") {
		t.Errorf("a form-encoded token answer's placeholder: %q", body)
	}
	for _, s := range minted {
		if bh := boundHost + ":" + f.port; !slices.Equal(s.Hosts, []string{bh, "github.bound.test:" + f.port}) && !slices.Equal(s.Hosts, []string{bh}) {
			t.Errorf("%s bound to %v", s.Name, s.Hosts)
		}
		if s.NoRefresh != (s.Name == boundHost+" response refresh_token") {
			t.Errorf("%s: NoRefresh %v", s.Name, s.NoRefresh)
		}
	}
	f.origin.accepts(toks["access"])
	if resp, body := do(t, c, "GET", f.url(boundHost, "/auth"), http.Header{"Authorization": {"Bearer " + got.Access}}, ""); resp.StatusCode != 200 {
		t.Errorf("the new access token's placeholder: %d %q", resp.StatusCode, body)
	}
	if resp, _ := do(t, c, "POST", f.url(boundHost, "/token"), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, "refresh_token="+url.QueryEscape(got.Refresh)); resp.StatusCode != http.StatusForbidden {
		t.Errorf("the new refresh token's placeholder: %d, want 403", resp.StatusCode)
	}
}

// TestMaskedRedial: when the host ends its connection, by its answer or
// while the client's is kept, the next request goes on a new one.
func TestMaskedRedial(t *testing.T) {
	f := newMaskFixture(t, nil)
	var dials atomic.Int32
	c := f.client(&dials)
	h := http.Header{"X-Api-Key": {f.secrets["key"].ph}}
	for _, step := range []string{"/bye", "/auth", "close", "/auth", "/auth"} {
		if step == "close" {
			f.srv.CloseClientConnections()
			continue
		}
		if resp, body := do(t, c, "GET", f.url(boundHost, step), h, ""); resp.StatusCode != 200 {
			t.Errorf("%s: %d %q", step, resp.StatusCode, body)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d connections to the proxy, want 1 kept throughout", n)
	}
}

// TestScrubberSplits: a value is replaced wherever reads split it, and
// text that only begins one is passed on whole.
func TestScrubberSplits(t *testing.T) {
	var s scrubber
	s.reset()
	s.add("sk-secret-0123456789", "sk-xxxxxx-9876543210")
	s.add("ghp_abcdefgh", "ghp_zyxwvuts")
	in := "a sk-secret-0123456789 b ghp_abcdefghsk-secret-0123456789 sk-secret-01 ghp_"
	want := "a sk-xxxxxx-9876543210 b ghp_zyxwvutssk-xxxxxx-9876543210 sk-secret-01 ghp_"
	for i := 0; i <= len(in); i++ {
		for j := i; j <= len(in); j++ {
			var out bytes.Buffer
			var held []byte
			for k, part := range []string{in[:i], in[i:j], in[j:]} {
				data := append(held, part...)
				h, _ := s.write(&out, data, k == 2)
				held = append([]byte(nil), data[len(data)-h:]...)
			}
			if out.String() != want {
				t.Fatalf("split at %d, %d: %q", i, j, out.String())
			}
		}
	}
}

// BenchmarkMaskedRequest compares, in one run, a request through the
// terminating proxy with one through a blind tunnel: small GETs on a kept
// connection (the added latency) and an 8 MiB download (the throughput).
func BenchmarkMaskedRequest(b *testing.B) {
	f := newMaskFixture(b, nil)
	masked, blind := f.client(nil), f.client(nil)
	h := http.Header{"Authorization": {"Bearer " + f.secrets["bearer"].ph}}
	get := func(c *http.Client, target string) {
		req, _ := http.NewRequest("GET", target, nil)
		req.Header = h
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || n != resp.ContentLength {
			b.Fatalf("%s: %d, %d bytes: %v", target, resp.StatusCode, n, err)
		}
	}
	run := func(b *testing.B, path string, report func(b *testing.B, n int, m, bl time.Duration)) {
		mu, bu := f.url(boundHost, path), f.url("blind.test", path)
		get(masked, mu)
		get(blind, bu)
		var m, bl time.Duration
		n := 0
		for b.Loop() {
			t0 := time.Now()
			get(masked, mu)
			t1 := time.Now()
			get(blind, bu)
			m, bl = m+t1.Sub(t0), bl+time.Since(t1)
			n++
		}
		report(b, n, m, bl)
	}
	b.Run("small", func(b *testing.B) {
		run(b, "/small", func(b *testing.B, n int, m, bl time.Duration) {
			b.ReportMetric(float64(m.Nanoseconds())/float64(n), "masked-ns/req")
			b.ReportMetric(float64(bl.Nanoseconds())/float64(n), "blind-ns/req")
			b.ReportMetric(float64((m-bl).Nanoseconds())/float64(n), "added-ns/req")
			b.ReportMetric(float64(m)/float64(bl), "masked/blind")
		})
	})
	// An API's JSON answer to a request that carried a credential: read
	// whole and looked through for tokens it hands out (HandedToken).
	api := `{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","content":[{"type":"text","text":"` +
		strings.Repeat("Hello, world. ", 100) + `"}],"usage":{"input_tokens":12,"output_tokens":345}}`
	f.origin.serveJSON("/small.json", func(*http.Request) string { return api })
	b.Run("small-json", func(b *testing.B) {
		run(b, "/small.json", func(b *testing.B, n int, m, bl time.Duration) {
			b.ReportMetric(float64((m-bl).Nanoseconds())/float64(n), "added-ns/req")
			b.ReportMetric(float64(m)/float64(bl), "masked/blind")
		})
	})
	b.Run("8MiB", func(b *testing.B) {
		size := float64(len(f.origin.bigBody))
		run(b, "/big", func(b *testing.B, n int, m, bl time.Duration) {
			mm, bb := size*float64(n)/m.Seconds()/1e6, size*float64(n)/bl.Seconds()/1e6
			b.ReportMetric(mm, "masked-MB/s")
			b.ReportMetric(bb, "blind-MB/s")
			b.ReportMetric(mm/bb, "throughput-ratio")
		})
	})
}
