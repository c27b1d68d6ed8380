package egress

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"
)

// TestCALeaf: a leaf verifies against a pool holding the authority, for
// its host only; addresses and wildcards get none; the key is not in PEM.
func TestCALeaf(t *testing.T) {
	now := time.Now()
	ca, err := NewCA(now)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.PEM()) {
		t.Fatal("the authority's PEM does not parse")
	}
	leaf, err := ca.Leaf("API.Example.com.", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "api.example.com", Roots: pool, CurrentTime: now}); err != nil {
		t.Errorf("leaf does not verify for its host: %v", err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "evil.example.com", Roots: pool, CurrentTime: now}); err == nil {
		t.Error("leaf verifies for another host")
	}
	if again, _ := ca.Leaf("api.example.com", now); again != leaf {
		t.Error("a second leaf was made for the same host")
	}
	for _, bad := range []string{"", "127.0.0.1", "::1", "*.example.com", "a b"} {
		if _, err := ca.Leaf(bad, now); err == nil {
			t.Errorf("a leaf for %q", bad)
		}
	}
	if len(ca.Fingerprint()) != 64 {
		t.Errorf("fingerprint %q", ca.Fingerprint())
	}
	// A real handshake over a pipe, as a jailed client would make it.
	cs, ss := net.Pipe()
	defer cs.Close()
	go func() {
		s := tls.Server(ss, &tls.Config{Certificates: []tls.Certificate{*leaf}})
		s.Handshake()
		s.Close()
	}()
	c := tls.Client(cs, &tls.Config{ServerName: "api.example.com", RootCAs: pool})
	if err := c.Handshake(); err != nil {
		t.Errorf("handshake: %v", err)
	}
}
