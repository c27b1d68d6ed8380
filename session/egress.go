package session

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jail-mcp/jail-mcp/session/egress"
)

// agentEgress is the proxy of a session agent whose network is an
// allowlist: the listener the backend gave it, and the refusals it made,
// the last keptRefusals of them.
type agentEgress struct {
	proxy *egress.Proxy
	ln    net.Listener // set by serve, before the agent's first call
	port  int          // ln's, in the sandbox

	mu    sync.Mutex
	total int              // refusals made
	kept  []egress.Refusal // the last of them
}

// keptRefusals bounds what an agent's proxy keeps of its refusals (a
// command that tries a thousand hosts is told of the last ones).
const keptRefusals = 64

// egressMark is a point in an agent's refusals.
type egressMark int

// newEgress is the proxy of allow, logging each refusal for the session;
// it serves once the backend gives it its listener.
func (s *Session) newEgress(allow egress.Policy) *agentEgress {
	e := &agentEgress{}
	opts := egress.Options{Refused: e.add, Log: s.m.log.With("session", s.Name)}
	opts.Masks = s.creds.Masks() // nil when nothing is masked
	e.proxy = egress.New(allow, opts)
	return e
}

// maskCall gives a call whose network is on, in a session that masks
// credentials, the bundle of roots and, unless an allowlist's proxy holds
// it already (eg), the proxy of the session's open network: it returns
// the proxy the call goes through (eg, in a session that masks nothing).
func (s *Session) maskCall(env []string, eg *agentEgress) ([]string, *agentEgress, error) {
	env, proxied, err := s.creds.Call(env)
	if err != nil {
		return env, eg, err
	}
	if proxied && eg == nil {
		if eg, err = s.openEgress(); err != nil {
			return env, nil, err
		}
	}
	return env, eg, nil
}

// openEgress is the session's proxy for calls whose network is on: every
// destination allowed, TLS to the masked credentials' hosts terminated,
// on the host's loopback. A command that goes around it sends
// placeholders only.
func (s *Session) openEgress() (*agentEgress, error) {
	s.openMu.Lock()
	defer s.openMu.Unlock()
	if s.open != nil {
		return s.open, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the masking proxy: %w", err)
	}
	e := s.newEgress(egress.Policy{Open: true})
	e.serve(ln)
	s.open = e
	return e, nil
}

// closeOpen ends the session's open proxy, at its end.
func (s *Session) closeOpen() {
	s.openMu.Lock()
	defer s.openMu.Unlock()
	if s.open != nil {
		s.open.close()
		s.open = nil
	}
}

// serve serves the proxy on ln (jail.Egress.Serve).
func (e *agentEgress) serve(ln net.Listener) {
	e.ln, e.port = ln, ln.Addr().(*net.TCPAddr).Port
	go e.proxy.Serve(ln)
}

func (e *agentEgress) add(r egress.Refusal) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.total++
	e.kept = append(e.kept, r)
	if len(e.kept) > keptRefusals {
		e.kept = slices.Delete(e.kept, 0, len(e.kept)-keptRefusals)
	}
}

func (e *agentEgress) mark() egressMark {
	e.mu.Lock()
	defer e.mu.Unlock()
	return egressMark(e.total)
}

// since lists the refusals made since m that are still kept.
func (e *agentEgress) since(m egressMark) []egress.Refusal {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.total - int(m) // made since m
	n = min(n, len(e.kept))
	return slices.Clone(e.kept[len(e.kept)-n:])
}

func (e *agentEgress) close() {
	if e.ln != nil {
		e.ln.Close()
	}
	e.proxy.Close()
}

// proxyVars are the variables clients read for a proxy, lower and upper
// case; NO_PROXY is dropped: nothing goes around the proxy.
var proxyVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy"}

// proxyEnv is env with the proxy variables pointing at the proxy on port
// (HTTP for HTTP and HTTPS, SOCKS5 with names resolved by the proxy for
// the rest) instead of any it had.
func proxyEnv(env []string, port int) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(proxyVars, k)
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		out = append(out, k+"=http://"+addr)
	}
	for _, k := range []string{"ALL_PROXY", "all_proxy"} {
		out = append(out, k+"=socks5h://"+addr)
	}
	// Node reads the variables only when asked to (22.21 and later).
	return append(out, "NODE_USE_ENV_PROXY=1")
}
