package session

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jail-mcp/jail-mcp/session/egress"
)

// agentEgress is the proxy of a session agent whose network is an
// allowlist: its listener, and the refusals it made, the last keptRefusals
// of them.
type agentEgress struct {
	proxy *egress.Proxy
	ln    net.Listener
	port  int
	live  chan struct{} // a token per connection an agent forwards, live

	mu    sync.Mutex
	total int              // refusals made
	kept  []egress.Refusal // the last of them
}

// keptRefusals bounds what an agent's proxy keeps of its refusals (a
// command that tries a thousand hosts is told of the last ones).
const keptRefusals = 64

// maxForwarded bounds the connections an agent forwards to its proxy at
// once (its spares among them): a command cannot make the server hold
// more than that for it.
const maxForwarded = 512

// egressMark is a point in an agent's refusals.
type egressMark int

// startEgress starts the proxy of allow on a loopback port, logging each
// refusal for session name.
func (s *Session) startEgress(allow egress.Policy) (*agentEgress, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &agentEgress{ln: ln, port: ln.Addr().(*net.TCPAddr).Port, live: make(chan struct{}, maxForwarded)}
	e.proxy = egress.New(allow, egress.Options{Refused: e.add, Log: s.m.log.With("session", s.Name)})
	go e.proxy.Serve(ln)
	return e, nil
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
	e.ln.Close()
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
