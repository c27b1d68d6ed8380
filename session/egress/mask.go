package egress

import (
	"crypto/x509"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jail-mcp/jail-mcp/auth"
)

// Secret is one masked credential value (issue 31): the jail holds its
// Placeholder, and only the proxy, on a TLS connection it terminates for
// one of Hosts, puts the real value in its place.
type Secret struct {
	// Name says what it is, for logs, refusals and jail_status:
	// "claude .claude/.credentials.json claudeAiOauth.accessToken",
	// "env:GH_TOKEN".
	Name string
	// Placeholder stands in for the value in the jail: the same shape.
	Placeholder string
	// Hosts are where the value may be sent: lower-case exact names,
	// each on port 443, or "name:port" on that port only (issue 44: a
	// host's other ports may be another service's).
	Hosts []string
	// TokenPaths are the URL paths on Hosts whose request bodies get the
	// value too (token endpoints: "/v1/oauth/token"); elsewhere only
	// the authentication headers do. Their answers' tokens are minted
	// placeholders (issues).
	TokenPaths []string
	// Value is the real value, read when needed (a host file's current
	// token). An error: the request is not sent.
	Value func() (string, error)
	// NoRefresh marks a refresh token of a provider that rotates them:
	// a request that carries it is answered by the proxy, never sent, so
	// that the jail never invalidates the operator's own login.
	NoRefresh bool
}

// issues reports whether path is a token endpoint of s, whose answer's
// tokens the proxy mints placeholders for: one of its TokenPaths, or,
// for a secret with none (a variable bound to hosts the operator named,
// whose token endpoints nobody listed), a path named as a token
// endpoint is (auth.TokenEndpoint), so that a token such a credential
// obtains does not reach the jail as it is.
func (s *Secret) issues(path string) bool {
	if len(s.TokenPaths) == 0 {
		return auth.TokenEndpoint(path)
	}
	return slices.Contains(s.TokenPaths, path)
}

// Masks is one session's table of placeholders; safe for concurrent use.
// A proxy given Masks (Options.Masks) terminates TLS for their hosts with
// CA and checks upstream certificates against Roots.
type Masks struct {
	CA    *CA
	Roots *x509.CertPool // nil: the system's

	mu     sync.RWMutex
	byPH   map[string]*Secret
	hosts  map[string]bool
	list   []*Secret // byPH's secrets, made anew by Set: what a request scans
	minted int       // secrets added by mint
}

// NewMasks is an empty table for ca, checking upstreams against roots
// (nil: the system's).
func NewMasks(ca *CA, roots *x509.CertPool) *Masks {
	if roots == nil {
		roots = UpstreamRoots // a test's, or nil: the system's
	}
	return &Masks{CA: ca, Roots: roots, byPH: map[string]*Secret{}, hosts: map[string]bool{}}
}

// Set adds s, or replaces the secret of the same placeholder.
func (m *Masks) Set(s Secret) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.set(s)
}

// maxMinted bounds the secrets the proxy mints in a session (mint): each
// request reads every secret's value and scans its answer for each, and
// a token endpoint that hands out token after token (or echoes what the
// jail sends it) would otherwise grow the table, and each request's work,
// without end.
const maxMinted = 256

// maxMintedLen bounds a token the proxy mints a placeholder for (16 KiB,
// TokenShaped's bound): with maxMinted, what minting holds in a session.
const maxMintedLen = 16 << 10

// errTooManyTokens: the session has minted maxMinted secrets.
var errTooManyTokens = errors.New("too many tokens")

// mint adds s, a secret the proxy minted for a token a host handed out,
// unless the table holds maxMinted such (errTooManyTokens). None is
// dropped to make room: the table is also what answers are scrubbed of,
// and a value dropped from it would reach the jail as it is in a later
// answer that carries it (a host that lists or echoes the tokens it
// issued, an error that quotes one). Past the bound the proxy passes on
// no new token, neither as it is nor as a placeholder.
func (m *Masks) mint(s Secret) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.minted >= maxMinted {
		return errTooManyTokens
	}
	m.minted++
	m.set(s)
	return nil
}

// set is Set, under the lock.
func (m *Masks) set(s Secret) {
	s.Hosts = slices.Clone(s.Hosts)
	for i, h := range s.Hosts {
		name, port := binding(h)
		s.Hosts[i] = bindingString(name, port)
		m.hosts[name+":"+strconv.Itoa(port)] = true
	}
	m.byPH[s.Placeholder] = &s
	m.list = make([]*Secret, 0, len(m.byPH))
	for _, sec := range m.byPH {
		m.list = append(m.list, sec)
	}
}

// table is every secret of the table, as the proxy scans a request or an
// answer for them: a slice Set never changes (it makes a new one), of
// secrets nobody changes, so that a request reads it without the lock.
func (m *Masks) table() []*Secret {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.list
}

// placeholder reports whether s is the placeholder of a secret.
func (m *Masks) placeholder(s string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.byPH[s]
	return ok
}

// Bound reports whether host, on port, is bound to a masked credential:
// the proxy terminates TLS for it.
func (m *Masks) Bound(host string, port int) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.hosts[normalHost(host)+":"+strconv.Itoa(port)]
}

// defaultPort is where a host named without a port is bound: HTTPS's.
const defaultPort = 443

// binding reads an entry of Secret.Hosts: a name, on defaultPort, or
// name:port. A port that does not read binds nothing (port 0).
func binding(h string) (string, int) {
	name, port := h, defaultPort
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		name, port = h[:i], 0
		if n, err := strconv.Atoi(h[i+1:]); err == nil && n > 0 && n < 65536 {
			port = n
		}
	}
	return normalHost(name), port
}

// bindingString is the entry of Secret.Hosts for name on port.
func bindingString(name string, port int) string {
	if port == defaultPort {
		return name
	}
	return name + ":" + strconv.Itoa(port)
}

// Secrets lists the table, sorted by Name then Placeholder.
func (m *Masks) Secrets() []Secret {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]Secret, 0, len(m.byPH))
	for _, s := range m.byPH {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Secret) int {
		return strings.Compare(a.Name+"\x00"+a.Placeholder, b.Name+"\x00"+b.Placeholder)
	})
	return out
}
