package egress

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// origin is a loopback HTTP server with the answers a plain request
// through the proxy must pass on whole: an echo of what it got, chunked,
// large, bodiless, and to the end of the connection.
type origin struct {
	port  string
	big   []byte
	other atomic.Int32 // requests that came for other.test

	hugeSent atomic.Int64 // bytes of /hugeheader's header sent
}

func newOrigin(t *testing.T) *origin {
	t.Helper()
	o := &origin{big: bytes.Repeat([]byte("0123456789abcdef"), 1<<19)} // 8 MiB
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s host=%s ua=%q proxy-auth=%q hop=%q conn=%q body=%s",
			r.Method, r.URL.RequestURI(), r.Host, r.Header.Values("User-Agent"), r.Header.Get("Proxy-Authorization"),
			r.Header.Get("X-Hop"), r.Header.Get("Connection"), body)
	})
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		for _, s := range []string{"a", "b", "c"} {
			io.WriteString(w, s)
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(o.big)))
		if r.Method != http.MethodHead {
			w.Write(o.big)
		}
	})
	mux.HandleFunc("/nocontent", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/hugeheader", func(w http.ResponseWriter, r *http.Request) {
		c, rw, _ := w.(http.Hijacker).Hijack()
		defer c.Close()
		rw.WriteString("HTTP/1.1 200 OK\r\nX-Long: ")
		line := bytes.Repeat([]byte("a"), 64<<10)
		for o.hugeSent.Load() < 64<<20 {
			if _, err := rw.Write(line); err != nil {
				return
			}
			o.hugeSent.Add(int64(len(line)))
		}
	})
	mux.HandleFunc("/close", func(w http.ResponseWriter, r *http.Request) {
		c, rw, _ := w.(http.Hijacker).Hijack()
		rw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end")
		rw.Flush()
		c.Close()
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Host, "other.test") {
			o.other.Add(1)
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { ln.Close() })
	o.port = fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	return o
}

// raw sends text to the proxy and reads what comes back until it closes.
func raw(t *testing.T, proxyAddr, text string) string {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, text)
	b, _ := io.ReadAll(c)
	return string(b)
}

// TestProxyPlainRequests: a plain request goes on as it came, without
// what was for the proxy, and its answer comes back whole, whatever its
// framing; one request per connection.
func TestProxyPlainRequests(t *testing.T) {
	o := newOrigin(t)
	fx := newFixture(t, "allowed.test")
	base := "http://allowed.test:" + o.port
	pu, _ := url.Parse("http://" + fx.proxyAddr)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	do := func(method, target string, body io.Reader, header http.Header) (*http.Response, string) {
		t.Helper()
		return send(t, client, method, target, header, body)
	}

	resp, body := do("GET", base+"/echo?q=1", nil, http.Header{"Proxy-Authorization": {"Basic c2VjcmV0"}, "Connection": {"X-Hop"}, "X-Hop": {"1"}})
	if want := `GET /echo?q=1 host=allowed.test:` + o.port; !strings.HasPrefix(body, want) || !strings.Contains(body, `proxy-auth="" hop=""`) {
		t.Errorf("GET: %q, want %q and no proxy or hop headers", body, want)
	}
	if !resp.Close {
		t.Error("the answer does not end the connection")
	}
	if _, body := do("POST", base+"/echo", strings.NewReader("sized body"), nil); !strings.HasSuffix(body, "body=sized body") {
		t.Errorf("POST: %q", body)
	}
	pr, pw := io.Pipe()
	go func() { io.WriteString(pw, "chunked "); io.WriteString(pw, "body"); pw.Close() }()
	if _, body := do("PUT", base+"/echo", pr, nil); !strings.HasSuffix(body, "body=chunked body") {
		t.Errorf("PUT, chunked: %q", body)
	}
	if _, body := do("GET", base+"/chunked", nil, nil); body != "abc" {
		t.Errorf("chunked answer: %q", body)
	}
	if resp, body := do("GET", base+"/big", nil, nil); sha256.Sum256([]byte(body)) != sha256.Sum256(o.big) || resp.ContentLength != int64(len(o.big)) {
		t.Errorf("large answer: %d bytes (length %d), not the %d sent", len(body), resp.ContentLength, len(o.big))
	}
	if resp, body := do("HEAD", base+"/big", nil, nil); resp.ContentLength != int64(len(o.big)) || body != "" {
		t.Errorf("HEAD: length %d, body %q", resp.ContentLength, body)
	}
	if resp, body := do("GET", base+"/nocontent", nil, nil); resp.StatusCode != 204 || body != "" {
		t.Errorf("204: %d %q", resp.StatusCode, body)
	}
	if _, body := do("GET", base+"/close", nil, nil); body != "until the end" {
		t.Errorf("answer to the end of the connection: %q", body)
	}

	// A client that waits for 100 Continue before its body.
	c, err := net.Dial("tcp", fx.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "POST %s/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n", base)
	br := bufio.NewReader(c)
	if line, _ := br.ReadString('\n'); !strings.Contains(line, "100") {
		t.Errorf("before the body: %q, want 100 Continue", line)
	}
	io.WriteString(c, "data")
	rest, _ := io.ReadAll(br)
	c.Close()
	if !strings.Contains(string(rest), "body=data") {
		t.Errorf("after 100 Continue: %q", rest)
	}

	// No User-Agent is added; a second request on the connection (to
	// another host) goes nowhere.
	got := raw(t, fx.proxyAddr, fmt.Sprintf("GET %s/echo HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET http://other.test:%s/echo HTTP/1.1\r\nHost: other.test\r\n\r\n", base, o.port))
	if strings.Count(got, "HTTP/1.1 ") != 1 || !strings.Contains(got, "ua=[]") {
		t.Errorf("two requests on one connection: %q, want one answer, no User-Agent", got)
	}
	if n := o.other.Load(); n != 0 {
		t.Errorf("%d requests reached other.test", n)
	}

	for _, bad := range []struct{ name, text, want string }{
		{"origin form", "GET /echo HTTP/1.1\r\nHost: allowed.test:" + o.port + "\r\n\r\n", "400 Bad Request"},
		{"https in a plain request", "GET https://allowed.test:" + o.port + "/echo HTTP/1.1\r\nHost: x\r\n\r\n", "400 Bad Request"},
		{"not HTTP", "\x16\x03\x01 hello\r\n\r\n", "400 Bad Request"},
		{"a host not listed", "GET http://other.test:" + o.port + "/echo HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "403 Forbidden"},
	} {
		if got := raw(t, fx.proxyAddr, bad.text); !strings.HasPrefix(got, "HTTP/1.1 "+bad.want) {
			t.Errorf("%s: %q, want %s", bad.name, got, bad.want)
		}
	}
	if n := o.other.Load(); n != 0 {
		t.Errorf("%d requests reached other.test", n)
	}

	// Headers are bounded, a request's and an answer's.
	if resp, _ := do("GET", base+"/hugeheader", nil, nil); resp.StatusCode != http.StatusBadGateway || o.hugeSent.Load() >= 64<<20 {
		t.Errorf("an answer of an endless header: %d after %d bytes, want 502 well before", resp.StatusCode, o.hugeSent.Load())
	}
	c, err = net.Dial("tcp", fx.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET %s/echo HTTP/1.1\r\nX-Long: ", base)
	sent, line := 0, bytes.Repeat([]byte("a"), 64<<10)
	for ; sent < 64<<20; sent += len(line) {
		if _, err := c.Write(line); err != nil {
			break
		}
	}
	if sent >= 64<<20 {
		t.Errorf("the proxy read a request header of %d bytes", sent)
	}
}

// TestProxyClose: Close ends the connections the proxy serves, a tunnel's
// among them.
func TestProxyClose(t *testing.T) {
	o := newOrigin(t)
	pol, _ := Parse("allowed.test")
	p := New(pol, Options{Resolver: fakeResolver{"allowed.test": {"127.0.0.1"}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go p.Serve(ln)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT allowed.test:%s HTTP/1.1\r\n\r\n", o.port)
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	p.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(br); err != nil || len(b) != 0 {
		t.Errorf("the tunnel after Close: %q %v, want its end", b, err)
	}
}

// TestProxyMaxConns: past MaxConns, a connection waits for one to end.
func TestProxyMaxConns(t *testing.T) {
	o := newOrigin(t)
	pol, _ := Parse("allowed.test")
	p := New(pol, Options{Resolver: fakeResolver{"allowed.test": {"127.0.0.1"}}, MaxConns: 2})
	defer p.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go p.Serve(ln)
	var idle []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://allowed.test:%s/echo HTTP/1.1\r\n\r\n", o.port)
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var b [1]byte
	if n, _ := c.Read(b[:]); n != 0 {
		t.Fatal("a third connection was served while two were")
	}
	idle[0].Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, _ := io.ReadAll(c); !strings.HasPrefix(string(got), "HTTP/1.1 200") {
		t.Errorf("once one ended: %q", got)
	}
}

// TestRelayBuffers: a tunnel that waits holds no buffer, and a transfer
// through one moves its bytes whole.
func TestRelayBuffers(t *testing.T) {
	o := newOrigin(t)
	fx := newFixture(t, "allowed.test")
	var conns []net.Conn
	for range 20 {
		c, err := net.Dial("tcp", fx.proxyAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT allowed.test:%s HTTP/1.1\r\n\r\n", o.port)
		if resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		conns = append(conns, c)
	}
	// (A relay that wakes takes a buffer for the moment it reads: wait
	// for that moment to pass.)
	for deadline := time.Now().Add(5 * time.Second); len(bigInHand) != 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(bigInHand); n != 0 {
		t.Errorf("20 waiting tunnels hold %d large buffers", n)
	}
	c := conns[0]
	fmt.Fprintf(c, "GET /big HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if !bytes.Equal(b, o.big) {
		t.Errorf("through the tunnel: %d bytes, not the %d sent", len(b), len(o.big))
	}
}
