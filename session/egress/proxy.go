package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/elazarl/goproxy"
)

// Refusal is a connection the proxy refused: where it was to go, by which
// protocol, and why.
type Refusal struct {
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Protocol string `json:"protocol"` // http, connect or socks5
	Reason   string `json:"reason"`
}

// RefusedError is the error of a refused connection.
type RefusedError struct{ Refusal }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("jail-mcp refused %s: %s", net.JoinHostPort(e.Host, strconv.Itoa(e.Port)), e.Reason)
}

// Resolver resolves host names; *net.Resolver is one.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// SystemResolver resolves names for a proxy whose Options name none: the
// system's resolver (tests of the whole server put their own here).
var SystemResolver Resolver = net.DefaultResolver

// Options tune a Proxy.
type Options struct {
	// Resolver resolves the names commands ask for; nil: the system's.
	Resolver Resolver
	// Refused, when set, is called with every refusal.
	Refused func(Refusal)
	// Log receives a line per refusal; nil: none.
	Log *slog.Logger
	// DialTimeout bounds each connection's dial; 0: 30 s.
	DialTimeout time.Duration
	// Own lists the host's own addresses, which a name must not reach
	// unless listed by name; nil: the addresses of its interfaces.
	Own func() []net.IP
}

// Proxy holds the connections of a jail's commands to a Policy: it serves
// HTTP forward proxying (plain requests and CONNECT) and SOCKS5 (CONNECT)
// on one listener, telling them apart by their first byte.
type Proxy struct {
	policy Policy
	opts   Options
	http   *goproxy.ProxyHttpServer

	// HTTP connections, once told from SOCKS5 ones, go to srv through
	// httpConns; srv runs from the first until Close.
	srvOnce   sync.Once
	srv       *http.Server
	httpConns *chanListener
}

// New is a proxy for policy.
func New(policy Policy, opts Options) *Proxy {
	if opts.Resolver == nil {
		opts.Resolver = SystemResolver
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 30 * time.Second
	}
	if opts.Own == nil {
		opts.Own = interfaceAddrs
	}
	p := &Proxy{policy: policy, opts: opts}
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = discardLogger{}
	// Requests go to their destination directly, never to a proxy of the
	// server's environment, and over connections this proxy checked.
	gp.Tr = &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return p.dialAddr(ctx, "http", addr)
		},
		MaxIdleConns:          64,
		ReadBufferSize:        256 << 10,
		WriteBufferSize:       64 << 10,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0,
	}
	gp.NonproxyHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "jail-mcp egress proxy: send proxy requests (an absolute URL, or CONNECT)", http.StatusBadRequest)
	})
	gp.OnResponse().DoFunc(func(resp *http.Response, ctx *goproxy.ProxyCtx) *http.Response {
		var refused *RefusedError
		if resp == nil && errors.As(ctx.Error, &refused) {
			return goproxy.NewResponse(ctx.Req, goproxy.ContentTypeText, http.StatusForbidden, refused.Error()+"\n")
		}
		return resp
	})
	p.http = gp
	p.httpConns = newChanListener(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	p.srv = &http.Server{Handler: gp, ReadHeaderTimeout: 30 * time.Second}
	return p
}

// writeRefusal answers a CONNECT that could not be made: 403 for a
// refusal, 502 for a destination that did not answer.
func writeRefusal(w io.Writer, err error) {
	code, text := http.StatusBadGateway, "Bad Gateway"
	var refused *RefusedError
	if errors.As(err, &refused) {
		code, text = http.StatusForbidden, "Forbidden"
	}
	msg := err.Error() + "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", code, text, len(msg), msg)
}

// Serve serves the connections of ln until it is closed.
func (p *Proxy) Serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go p.serve(c, 30*time.Second)
	}
}

// ServeConn serves one connection a session agent forwards; the agent
// keeps a few ready before they are used, so its first bytes may be long
// in coming.
func (p *Proxy) ServeConn(c net.Conn) { p.serve(c, 0) }

// serve serves c, whose first byte must come within wait (0: no bound).
func (p *Proxy) serve(c net.Conn, wait time.Duration) {
	p.srvOnce.Do(func() { go p.srv.Serve(p.httpConns) })
	p.route(c, wait)
}

// Close ends the proxy: the connections it serves, and any it is given.
func (p *Proxy) Close() {
	p.srvOnce.Do(func() {})
	p.httpConns.Close()
	p.srv.Close()
}

// route hands a connection to SOCKS5 or to HTTP by its first byte.
func (p *Proxy) route(c net.Conn, wait time.Duration) {
	br := bufio.NewReader(c)
	if wait > 0 {
		c.SetReadDeadline(time.Now().Add(wait))
	}
	first, err := br.Peek(1)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		c.Close()
		return
	}
	bc := &bufferedConn{Conn: c, r: br}
	if first[0] == socksVersion {
		p.serveSOCKS(bc)
		return
	}
	if method, _ := br.Peek(len("CONNECT ")); string(method) == "CONNECT " {
		p.serveConnect(bc)
		return
	}
	if !p.httpConns.deliver(bc) {
		c.Close()
	}
}

// serveConnect answers a CONNECT: the destination is checked and dialled
// as dial does, then the tunnel relays it (not goproxy's: relay lets the
// kernel move the bytes).
func (p *Proxy) serveConnect(c *bufferedConn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	req, err := http.ReadRequest(c.r)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		return
	}
	if req.Body != nil {
		req.Body.Close()
	}
	if _, _, err := net.SplitHostPort(req.Host); err != nil {
		writeRefusal(c, p.refuse("connect", req.Host, 0, "CONNECT wants HOST:PORT"))
		return
	}
	target, err := p.dialAddr(req.Context(), "connect", req.Host)
	if err != nil {
		writeRefusal(c, err)
		return
	}
	defer target.Close()
	if _, err := fmt.Fprintf(c, "HTTP/%d.%d 200 Connection established\r\n\r\n", req.ProtoMajor, req.ProtoMinor); err != nil {
		return
	}
	relay(c, target)
}

// dialAddr dials addr (host:port) for protocol after the checks of dial.
func (p *Proxy) dialAddr(ctx context.Context, protocol, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return nil, err
	}
	return p.dial(ctx, protocol, host, n)
}

// dial connects to host on port when the policy allows it: by name, then
// by every address the name resolves to (the proxy resolves it: a command
// never needs DNS). An address that is loopback, private, link-local,
// unspecified, multicast or one of the host's own is reached only by a
// rule that names the host itself.
func (p *Proxy) dial(ctx context.Context, protocol, host string, port int) (net.Conn, error) {
	host = strings.Trim(host, "[]")
	allowed, explicit := p.policy.Allows(host, port)
	if !allowed {
		return nil, p.refuse(protocol, host, port, "not in the allowlist")
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		addrs, err := p.opts.Resolver.LookupIPAddr(ctx, host)
		if err != nil || len(addrs) == 0 {
			return nil, p.refuse(protocol, host, port, fmt.Sprintf("does not resolve (%v)", err))
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	var usable []net.IP
	var blocked []string
	for _, ip := range ips {
		if why := p.internal(ip); why != "" && !explicit {
			blocked = append(blocked, ip.String()+" ("+why+")")
			continue
		}
		usable = append(usable, ip)
	}
	if len(usable) == 0 {
		return nil, p.refuse(protocol, host, port, "resolves to "+strings.Join(blocked, ", ")+", reached only when the allowlist names the host itself")
	}
	d := net.Dialer{Timeout: p.opts.DialTimeout}
	var last error
	for _, ip := range usable {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip.String(), strconv.Itoa(port)))
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

// internal says why ip is not an address of the internet, or "".
func (p *Proxy) internal(ip net.IP) string {
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsPrivate():
		return "private"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsMulticast() || ip.IsInterfaceLocalMulticast():
		return "multicast"
	case ip.To4() != nil && ip.To4()[0] == 0:
		return "this network"
	case ip.To4() != nil && ip.To4()[0] == 100 && ip.To4()[1]&0xc0 == 64:
		return "shared address space"
	}
	for _, own := range p.opts.Own() {
		if own.Equal(ip) {
			return "this host's"
		}
	}
	return ""
}

// refuse records a refusal and returns its error.
func (p *Proxy) refuse(protocol, host string, port int, reason string) error {
	r := Refusal{Host: host, Port: port, Protocol: protocol, Reason: reason}
	if p.opts.Log != nil {
		p.opts.Log.Warn("egress refused", "host", host, "port", port, "protocol", protocol, "reason", reason)
	}
	if p.opts.Refused != nil {
		p.opts.Refused(r)
	}
	return &RefusedError{r}
}

// interfaceAddrs are the addresses of the host's interfaces.
func interfaceAddrs() []net.IP {
	addrs, _ := net.InterfaceAddrs()
	var out []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			out = append(out, n.IP)
		}
	}
	return out
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// bufferedConn is a connection whose first bytes were read ahead.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

// Read reads what was read ahead, then the connection itself.
func (c *bufferedConn) Read(p []byte) (int, error) {
	if c.r.Buffered() > 0 {
		return c.r.Read(p)
	}
	return c.Conn.Read(p)
}

// ReadFrom passes a plain GET's body (net/http writes it so) on to the
// connection's own.
func (c *bufferedConn) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(c.Conn, r)
}

// NetConn is the connection read ahead from: tunnels relay between the
// sockets themselves (relay).
func (c *bufferedConn) NetConn() net.Conn { return c.Conn }

// chanListener is a net.Listener of the connections handed to it.
type chanListener struct {
	addr  net.Addr
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) deliver(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }
