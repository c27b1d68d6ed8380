// Package egress is the network policy of a jail whose network is an
// allowlist, and the proxy that holds every connection of its commands to
// it: HTTP (plain requests and CONNECT) and SOCKS5 on one port, each
// destination checked by host name, names resolved by the proxy.
package egress

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/jail-mcp/jail-mcp/auth"
)

// Rule is one destination of an allowlist: a host name, a domain's
// subdomains ("*.example.com"), or an IP address; any port, or one.
type Rule struct {
	Host     string // lower case, without the "*." of a wildcard
	Wildcard bool   // Host's subdomains, not Host itself
	Port     int    // 0: any port
}

// String is the rule as written in an allowlist.
func (r Rule) String() string {
	h := r.Host
	if r.Wildcard {
		h = "*." + h
	}
	if ip := net.ParseIP(r.Host); ip != nil && ip.To4() == nil {
		h = "[" + h + "]"
	}
	if r.Port != 0 {
		return h + ":" + strconv.Itoa(r.Port)
	}
	return h
}

// matches reports whether r allows host (lower case) on port.
func (r Rule) matches(host string, port int) bool {
	if r.Port != 0 && r.Port != port {
		return false
	}
	if r.Wildcard {
		return strings.HasSuffix(host, "."+r.Host)
	}
	return host == r.Host
}

// Policy is an allowlist: a connection goes through when a rule allows its
// host and port. No rule allows nothing.
type Policy struct {
	Rules []Rule
	// Open allows every destination, internal addresses too: the proxy
	// of a network that is on, there for masked credentials only (a
	// command can go around it, with placeholders only).
	Open bool
}

// Prefix introduces an allowlist as a value of --network.
const Prefix = "allow:"

// Parse reads an allowlist: rules separated by commas, each HOST,
// *.DOMAIN or an IP address, with :PORT or not (an IPv6 address with a
// port in brackets: [::1]:8080).
func Parse(list string) (Policy, error) {
	var p Policy
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		r, err := parseRule(f)
		if err != nil {
			return Policy{}, fmt.Errorf("%q: %w", f, err)
		}
		if !slices.Contains(p.Rules, r) {
			p.Rules = append(p.Rules, r)
		}
	}
	if len(p.Rules) == 0 {
		return Policy{}, errors.New("an empty allowlist: give hosts, or --network off")
	}
	return p, nil
}

func parseRule(s string) (Rule, error) {
	var r Rule
	host := s
	if h, port, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return r, errors.New("want a port from 1 to 65535")
		}
		host, r.Port = h, n
	} else if strings.Count(s, ":") == 1 {
		return r, errors.New("want HOST:PORT with a port from 1 to 65535")
	}
	if ip := net.ParseIP(host); ip != nil {
		r.Host = ip.String()
		return r, nil
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		r.Wildcard, host = true, rest
	}
	if !auth.DNSName(host) {
		return r, errors.New("want a host name, *.DOMAIN, or an IP address")
	}
	if r.Wildcard && !strings.Contains(host, ".") && host != "localhost" {
		return r, errors.New("want a host name: a wildcard wants a domain of two labels or more (*.example.com)")
	}
	r.Host = host
	return r, nil
}

// String is the allowlist as --network takes it, without the prefix.
func (p Policy) String() string {
	if p.Open {
		return "*"
	}
	s := make([]string, len(p.Rules))
	for i, r := range p.Rules {
		s[i] = r.String()
	}
	return strings.Join(s, ",")
}

// Allows reports whether a rule allows host on port, and whether that
// rule names host itself (not by a wildcard): only such a rule lets a name
// reach the addresses the proxy refuses otherwise (loopback, private,
// link-local, the host's own).
func (p Policy) Allows(host string, port int) (allowed, explicit bool) {
	if p.Open {
		return true, true
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil {
		host = ip.String()
	}
	for _, r := range p.Rules {
		if r.matches(host, port) {
			allowed = true
			if !r.Wildcard {
				return true, true
			}
		}
	}
	return allowed, false
}

// Narrow is the allowlist of a call that asks for fewer destinations:
// every rule of sub must be within one of p's (a subdomain of a wildcard,
// a port of an any-port rule).
func (p Policy) Narrow(sub Policy) (Policy, error) {
	for _, r := range sub.Rules {
		if !p.covers(r) {
			return Policy{}, fmt.Errorf("%s is not in the operator's allowlist (%s): a call can narrow it, never widen it", r, p)
		}
	}
	return sub, nil
}

// covers reports whether a rule of p allows everything r does.
func (p Policy) covers(r Rule) bool {
	for _, q := range p.Rules {
		if q.Port != 0 && q.Port != r.Port {
			continue
		}
		switch {
		case q.Wildcard == r.Wildcard && q.Host == r.Host:
			return true
		case q.Wildcard && strings.HasSuffix(r.Host, "."+q.Host):
			return true
		}
	}
	return false
}
