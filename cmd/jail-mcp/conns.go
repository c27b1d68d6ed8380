package main

import (
	"container/list"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimiter bounds the open connections of the HTTP server, in total
// (max) and per remote address (perAddr), so that no client, a jailed
// command with network on among them, can take the descriptors every
// session needs: a server at its descriptor limit accepts nothing more,
// and its sessions' calls fail where they open a pipe.
//
// A limit that blocks in Accept, as golang.org/x/net/netutil's
// LimitListener does, would leave a new client in the kernel's queue
// behind every connection the flood keeps open. This listener accepts
// every connection, and when one is over a bound it closes another to
// make room, the one that costs least to lose, in this order:
//
//  1. idle, unauthenticated: kept alive after a 401, /healthz or the
//     like (the flood of issue 27: 22,000 of them);
//  2. new: nothing read yet (a client's first request, or a bare connect);
//  3. unauthenticated, with a request in flight;
//  4. idle, authenticated (its client opens another when it needs one).
//
// each oldest first. A connection that carried a request past the bearer
// token (or, without a token, to /mcp) and has one in flight (a tool call,
// a GET stream) is never closed for room: when nothing else is left the
// new connection is refused instead (HTTP 503, closed). So sessions keep
// being served, and new ones can start, while unauthenticated connections
// are shed. A new client's connection is at risk only while it is new, and
// only from connections that are new too: it goes when that many newer
// ones came before its first request was read.
type connLimiter struct {
	net.Listener
	max, perAddr int
	log          *slog.Logger
	obs          connObserver // nil: none

	mu      sync.Mutex
	classes [nClasses]list.List // open connections by class, oldest first
	addrs   map[string]*addrConns
	open    int
	// shed and refused count since the last warning; warned is when.
	shed, refused int
	warned        time.Time
}

// connObserver is told of every connection shed or refused (metrics).
type connObserver interface {
	ConnShed(class string)
	ConnRefused()
}

// connClass orders connections by what closing one costs.
type connClass int

const (
	classIdle        connClass = iota // idle, unauthenticated
	classNew                          // nothing read yet
	classActive                       // unauthenticated, request in flight
	classTrustedIdle                  // idle, authenticated
	classKept                         // authenticated, request in flight: never shed
	nClasses
)

var classNames = [nClasses]string{"idle", "new", "active", "authenticated_idle", "authenticated_active"}

// addrConns are one remote address's open connections.
type addrConns struct {
	n       int
	classes [nClasses]list.List
}

// limitedConn is one accepted connection. Its fields are guarded by the
// limiter's mu.
type limitedConn struct {
	net.Conn
	l                       *connLimiter
	addr                    string
	served, active, trusted bool
	class                   connClass
	el, addrEl              *list.Element // nil once closed or shed
	closeOnce               sync.Once
}

func newConnLimiter(ln net.Listener, max, perAddr int, obs connObserver, log *slog.Logger) *connLimiter {
	return &connLimiter{Listener: ln, max: max, perAddr: perAddr, obs: obs, log: log, addrs: map[string]*addrConns{}}
}

// Accept returns the next connection within the bounds, after closing
// what had to go to make room for it; a connection no room can be made
// for is answered 503 and closed here.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// admit makes room for c, or refuses it (nil).
func (l *connLimiter) admit(c net.Conn) *limitedConn {
	addr := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	lc := &limitedConn{Conn: c, l: l, addr: addr, class: classNew}
	var victims []*limitedConn
	l.mu.Lock()
	a := l.addrs[addr]
	ok := true
	if a != nil && a.n >= l.perAddr {
		v := oldest(&a.classes)
		ok = v != nil
		if ok {
			l.removeLocked(v)
			victims = append(victims, v)
		}
	}
	if ok && l.open >= l.max {
		v := oldest(&l.classes)
		ok = v != nil
		if ok {
			l.removeLocked(v)
			victims = append(victims, v)
		}
	}
	// (When c is refused, what was taken for room stays closed: the bound
	// it made room under still holds.)
	l.shed += len(victims)
	if ok {
		if a = l.addrs[addr]; a == nil {
			a = &addrConns{}
			l.addrs[addr] = a
		}
		a.n++
		l.open++
		lc.el = l.classes[lc.class].PushBack(lc)
		lc.addrEl = a.classes[lc.class].PushBack(lc)
	} else {
		l.refused++
	}
	warn := l.warnLocked()
	l.mu.Unlock()
	for _, v := range victims {
		v.closeOnce.Do(func() { v.Conn.Close() })
		if l.obs != nil {
			l.obs.ConnShed(classNames[v.class])
		}
	}
	if warn != nil {
		l.log.Warn("HTTP connections shed: too many open", warn...)
	}
	if !ok {
		if l.obs != nil {
			l.obs.ConnRefused()
		}
		// A fresh socket's send buffer is empty: this write does not wait.
		c.SetWriteDeadline(time.Now().Add(time.Second))
		c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: 44\r\n\r\ntoo many open connections: try again later\r\n"))
		c.Close()
		return nil
	}
	return lc
}

// warnLocked returns the attributes of a warning about the connections
// shed and refused since the last one, at most one every ten seconds: a
// flood must not become a flood of log lines.
func (l *connLimiter) warnLocked() []any {
	if l.shed+l.refused == 0 || time.Since(l.warned) < 10*time.Second {
		return nil
	}
	attrs := []any{"shed", l.shed, "refused", l.refused, "open", l.open, "max_conns", l.max, "max_conns_per_addr", l.perAddr}
	l.shed, l.refused, l.warned = 0, 0, time.Now()
	return attrs
}

// oldest is the oldest connection of the first class that may be shed.
func oldest(classes *[nClasses]list.List) *limitedConn {
	for c := range classKept {
		if e := classes[c].Front(); e != nil {
			return e.Value.(*limitedConn)
		}
	}
	return nil
}

// removeLocked takes lc out of the bounds' count; l.mu is held.
func (l *connLimiter) removeLocked(lc *limitedConn) {
	if lc.el == nil {
		return
	}
	a := l.addrs[lc.addr]
	l.classes[lc.class].Remove(lc.el)
	a.classes[lc.class].Remove(lc.addrEl)
	lc.el, lc.addrEl = nil, nil
	l.open--
	if a.n--; a.n == 0 {
		delete(l.addrs, lc.addr)
	}
}

// updateLocked moves lc to the class its state says; l.mu is held.
func (l *connLimiter) updateLocked(lc *limitedConn) {
	if lc.el == nil {
		return
	}
	class := classNew
	switch {
	case lc.trusted && lc.active:
		class = classKept
	case lc.trusted:
		class = classTrustedIdle
	case lc.active:
		class = classActive
	case lc.served:
		class = classIdle
	}
	if class == lc.class {
		return
	}
	a := l.addrs[lc.addr]
	l.classes[lc.class].Remove(lc.el)
	a.classes[lc.class].Remove(lc.addrEl)
	lc.class = class
	lc.el = l.classes[class].PushBack(lc)
	lc.addrEl = a.classes[class].PushBack(lc)
}

// connState is the http.Server's ConnState hook: it follows each
// connection from new to active (a request read) to idle and back.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateActive:
		lc.active = true
	case http.StateIdle:
		lc.active, lc.served = false, true
	case http.StateHijacked:
		// Out of the server's hands (nothing here hijacks): kept.
		lc.active, lc.trusted = true, true
	case http.StateClosed:
		l.removeLocked(lc)
		return
	}
	l.updateLocked(lc)
}

// Close closes the connection and takes it out of the count.
func (lc *limitedConn) Close() error {
	lc.l.mu.Lock()
	lc.l.removeLocked(lc)
	lc.l.mu.Unlock()
	var err error
	lc.closeOnce.Do(func() { err = lc.Conn.Close() })
	return err
}

// count is how many connections are open.
func (l *connLimiter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// connKey is the request context's key of its connection.
type connKey struct{}

// connContext is the http.Server's ConnContext hook: each request's
// context holds its connection, for trustConn.
func connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// trustConn marks the connection of r as authenticated: r passed the
// bearer token, and the connection is shed only when nothing else is.
func trustConn(r *http.Request) {
	if lc, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
		lc.l.trust(lc)
	}
}

// trust marks lc as authenticated.
func (l *connLimiter) trust(lc *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lc.trusted = true
	l.updateLocked(lc)
}
