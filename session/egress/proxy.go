package egress

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
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
	// MaxConns bounds the connections Serve serves at once; 0: 512.
	MaxConns int
	// Masks, when set, are the session's masked credentials: CONNECTs to
	// their hosts are terminated and their placeholders replaced (mitm.go).
	Masks *Masks
}

// Proxy holds the connections of a jail's commands to a Policy: it serves
// HTTP forward proxying (plain requests and CONNECT) and SOCKS5 (CONNECT)
// on one listener, telling them apart by their first byte.
type Proxy struct {
	policy Policy
	opts   Options

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // served now
	closed bool

	// For connections to bound hosts (mitm.go): the key of the session
	// tickets given to commands, and the tickets the hosts give the proxy,
	// so that a command's or the proxy's next connection resumes.
	ticketKey [32]byte
	sessions  tls.ClientSessionCache
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
	if opts.MaxConns == 0 {
		opts.MaxConns = 512
	}
	p := &Proxy{policy: policy, opts: opts, conns: map[net.Conn]struct{}{}, sessions: tls.NewLRUClientSessionCache(64)}
	rand.Read(p.ticketKey[:])
	return p
}

// requestTimeout bounds the wait for a connection's request: its first
// byte, an HTTP request's header, a SOCKS5 greeting and request.
const requestTimeout = 30 * time.Second

// maxHeader bounds an HTTP header, a request's and an answer's (net/http's
// server's default).
const maxHeader = http.DefaultMaxHeaderBytes

// Serve serves the connections of ln until it is closed, at most
// Options.MaxConns at once (more wait in ln's backlog).
func (p *Proxy) Serve(ln net.Listener) error {
	slots := make(chan struct{}, p.opts.MaxConns)
	for {
		slots <- struct{}{}
		c, err := ln.Accept()
		if err != nil {
			<-slots
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of descriptors, say: wait a moment, as net/http does.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		go func() {
			defer func() { <-slots }()
			p.serve(c)
		}()
	}
}

// Close ends the proxy and every connection it serves.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
}

// track counts c among the connections served, or says the proxy is
// closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// serve serves c: SOCKS5 or HTTP by its first byte; for HTTP, CONNECT or
// a plain request by the request.
func (p *Proxy) serve(c net.Conn) {
	defer c.Close()
	if !p.track(c) {
		return
	}
	defer p.untrack(c)
	// A request's header is bounded in size as in time: a command must
	// not make the server hold what it likes.
	head := &io.LimitedReader{R: c, N: maxHeader}
	br := bufio.NewReader(head)
	c.SetReadDeadline(time.Now().Add(requestTimeout))
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	bc := &bufferedConn{Conn: c, r: br}
	if first[0] == socksVersion {
		p.serveSOCKS(bc)
		return
	}
	req, err := http.ReadRequest(br)
	c.SetReadDeadline(time.Time{})
	head.N = math.MaxInt64 // the body is the destination's to bound
	if err != nil {
		writeAnswer(c, http.StatusBadRequest, "jail-mcp egress proxy: not an HTTP request")
		return
	}
	if req.Method == http.MethodConnect {
		p.serveConnect(bc, req)
		return
	}
	p.forward(bc, req)
}

// serveConnect answers a CONNECT: the destination is checked and dialled
// as dial does, then the tunnel relays it, or, for a host a masked
// credential is bound to, the proxy ends its TLS (serveMasked).
func (p *Proxy) serveConnect(c *bufferedConn, req *http.Request) {
	req.Body.Close()
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
	host, port, _ := net.SplitHostPort(req.Host)
	if n, _ := strconv.Atoi(port); p.terminates(host, n) {
		p.serveMasked(c, target, host, n, "connect")
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
		to := port
		if p, ok := TestPorts[port]; ok {
			to = p
		}
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip.String(), strconv.Itoa(to)))
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
