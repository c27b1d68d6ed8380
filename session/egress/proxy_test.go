package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/proxy"
)

// fakeResolver resolves the test's names, and nothing else: the tests use
// loopback servers only.
type fakeResolver map[string][]string

func (r fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	ips, ok := r[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []net.IPAddr
	for _, s := range ips {
		out = append(out, net.IPAddr{IP: net.ParseIP(s)})
	}
	return out, nil
}

// fixture is a proxy on loopback for an allowlist, with an HTTP server on
// loopback that says who it is, and the refusals the proxy made.
type fixture struct {
	proxyAddr string
	port      string // the HTTP server's
	mu        sync.Mutex
	refusals  []Refusal
}

func newFixture(t *testing.T, allow string) *fixture {
	t.Helper()
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(srv, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.Host)
	}))
	t.Cleanup(func() { srv.Close() })
	fx := &fixture{port: fmt.Sprint(srv.Addr().(*net.TCPAddr).Port)}
	pol, err := Parse(strings.ReplaceAll(allow, "PORT", fx.port))
	if err != nil {
		t.Fatal(err)
	}
	p := New(pol, Options{
		Resolver: fakeResolver{
			"allowed.test":        {"127.0.0.1"},
			"loop.wild.test":      {"127.0.0.1"},
			"meta.wild.test":      {"169.254.169.254"},
			"mixed.wild.test":     {"10.1.2.3", "127.0.0.1"},
			"private.wild.test":   {"192.168.1.1"},
			"other.test":          {"127.0.0.1"},
			"listed-loop.test":    {"127.0.0.1"},
			"ipv6-loop.wild.test": {"::1"},
		},
		Refused: func(r Refusal) {
			fx.mu.Lock()
			defer fx.mu.Unlock()
			fx.refusals = append(fx.refusals, r)
		},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(ln)
	t.Cleanup(func() { ln.Close() })
	fx.proxyAddr = ln.Addr().String()
	return fx
}

func (fx *fixture) lastRefusal() Refusal {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	if len(fx.refusals) == 0 {
		return Refusal{}
	}
	return fx.refusals[len(fx.refusals)-1]
}

// get fetches url through the proxy as an HTTP proxy client does.
func (fx *fixture) get(t *testing.T, target string) (int, string) {
	t.Helper()
	pu, _ := url.Parse("http://" + fx.proxyAddr)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	resp, err := c.Get(target)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// connect opens a CONNECT tunnel to hostport and, when it is made, asks
// the HTTP server behind it for / over it.
func (fx *fixture) connect(t *testing.T, hostport string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", fx.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostport, hostport)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", hostport, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", hostport)
	inner, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("through the tunnel: %v", err)
	}
	b, _ := io.ReadAll(inner.Body)
	return resp.StatusCode, string(b)
}

// socks asks for / of hostport through SOCKS5.
func (fx *fixture) socks(t *testing.T, hostport string) (string, error) {
	t.Helper()
	d, err := proxy.SOCKS5("tcp", fx.proxyAddr, nil, proxy.Direct)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Dial("tcp", hostport)
	if err != nil {
		return "", err
	}
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", hostport)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	b, _ := io.ReadAll(resp.Body)
	return string(b), nil
}

// TestProxyProtocols: plain HTTP, CONNECT and SOCKS5 each reach an allowed
// host and are refused elsewhere, with the refusal recorded.
func TestProxyProtocols(t *testing.T) {
	fx := newFixture(t, "allowed.test,listed-loop.test:PORT,*.wild.test")
	ok := "allowed.test:" + fx.port
	other := "other.test:" + fx.port

	if code, body := fx.get(t, "http://"+ok+"/"); code != 200 || body != "hello "+ok {
		t.Errorf("plain HTTP to an allowed host: %d %q", code, body)
	}
	if code, body := fx.get(t, "http://"+other+"/"); code != 403 || !strings.Contains(body, "not in the allowlist") {
		t.Errorf("plain HTTP to another host: %d %q, want 403", code, body)
	}
	if r := fx.lastRefusal(); r.Host != "other.test" || r.Protocol != "http" || r.Reason != "not in the allowlist" {
		t.Errorf("refusal %+v", r)
	}

	if code, body := fx.connect(t, ok); code != 200 || body != "hello "+ok {
		t.Errorf("CONNECT to an allowed host: %d %q", code, body)
	}
	if code, body := fx.connect(t, other); code != 403 || !strings.Contains(body, "not in the allowlist") {
		t.Errorf("CONNECT to another host: %d %q, want 403", code, body)
	}
	if r := fx.lastRefusal(); r.Host != "other.test" || r.Protocol != "connect" {
		t.Errorf("refusal %+v", r)
	}

	if body, err := fx.socks(t, ok); err != nil || body != "hello "+ok {
		t.Errorf("SOCKS5 to an allowed host: %q %v", body, err)
	}
	if _, err := fx.socks(t, other); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("SOCKS5 to another host: %v, want not allowed", err)
	}
	if r := fx.lastRefusal(); r.Host != "other.test" || r.Protocol != "socks5" {
		t.Errorf("refusal %+v", r)
	}
	if _, err := fx.socks(t, "127.0.0.1:"+fx.port); err == nil {
		t.Error("SOCKS5 to an address not listed reached it")
	}
}

// TestProxyInternalAddresses: a name the allowlist admits by a wildcard
// but that resolves to loopback, link-local (cloud metadata), private or
// the host's own addresses is refused; a name listed by itself is not.
func TestProxyInternalAddresses(t *testing.T) {
	fx := newFixture(t, "allowed.test,*.wild.test")
	for _, tc := range []struct{ host, why string }{
		{"loop.wild.test", "loopback"},
		{"ipv6-loop.wild.test", "loopback"},
		{"meta.wild.test", "link-local"},
		{"private.wild.test", "private"},
		{"mixed.wild.test", "private"},
	} {
		hp := tc.host + ":" + fx.port
		if code, body := fx.get(t, "http://"+hp+"/"); code != 403 || !strings.Contains(body, tc.why) {
			t.Errorf("plain HTTP to %s: %d %q, want 403 %s", hp, code, body, tc.why)
		}
		if code, _ := fx.connect(t, hp); code != 403 {
			t.Errorf("CONNECT to %s: %d, want 403", hp, code)
		}
		if _, err := fx.socks(t, hp); err == nil {
			t.Errorf("SOCKS5 to %s reached it", hp)
		}
		if r := fx.lastRefusal(); r.Host != tc.host || !strings.Contains(r.Reason, tc.why) {
			t.Errorf("refusal %+v, want %s for %s", r, tc.why, tc.host)
		}
	}
	// Listed by name, a loopback host is reached.
	if code, _ := fx.get(t, "http://allowed.test:"+fx.port+"/"); code != 200 {
		t.Errorf("allowed.test, listed: %d", code)
	}
	// A name that does not resolve is refused, and says so.
	if code, body := fx.get(t, "http://nx.wild.test:"+fx.port+"/"); code != 403 || !strings.Contains(body, "does not resolve") {
		t.Errorf("an unknown name: %d %q", code, body)
	}
}

// TestProxyPorts: a rule with a port admits that port only.
func TestProxyPorts(t *testing.T) {
	fx := newFixture(t, "listed-loop.test:1")
	if code, body := fx.get(t, "http://listed-loop.test:"+fx.port+"/"); code != 403 || !strings.Contains(body, "not in the allowlist") {
		t.Errorf("another port: %d %q", code, body)
	}
}

// TestProxyOwnAddresses: a name that resolves to one of the host's own
// addresses is refused, whatever its class, unless listed by name.
func TestProxyOwnAddresses(t *testing.T) {
	pol, err := Parse("*.wild.test,own.test")
	if err != nil {
		t.Fatal(err)
	}
	var got []Refusal
	p := New(pol, Options{
		Resolver: fakeResolver{"own.wild.test": {"203.0.113.5"}, "own.test": {"203.0.113.5"}, "mapped.wild.test": {"::ffff:127.0.0.1"}},
		Own:      func() []net.IP { return []net.IP{net.ParseIP("203.0.113.5")} },
		Refused:  func(r Refusal) { got = append(got, r) },
	})
	if _, err := p.dial(context.Background(), "connect", "own.wild.test", 443); err == nil || !strings.Contains(err.Error(), "this host's") {
		t.Errorf("own address by a wildcard: %v", err)
	}
	if _, err := p.dial(context.Background(), "connect", "mapped.wild.test", 443); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("IPv4-mapped loopback by a wildcard: %v", err)
	}
	// Listed by name, it is dialled (whatever the dial gives), not refused.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := p.dial(ctx, "connect", "own.test", 1)
	if c != nil {
		c.Close()
	}
	if errors.As(err, new(*RefusedError)) {
		t.Errorf("own address listed by name refused: %v", err)
	}
	if len(got) != 2 {
		t.Errorf("refusals %+v, want 2", got)
	}
}
