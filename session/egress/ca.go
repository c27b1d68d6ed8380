package egress

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"sync"
	"time"
)

// CA is the authority the proxy terminates TLS with, for the hosts a
// masked credential is bound to only (issue 31): made at the server's
// start, its key in this process's memory only, never written anywhere.
// The jail trusts it through a bundle of the system's roots and its
// certificate (Bundle).
type CA struct {
	cert *x509.Certificate
	der  []byte
	key  crypto.Signer

	mu     sync.Mutex
	leaves map[string]*tls.Certificate // by host name, lower case
}

// caLife is how long the authority and its leaves hold: longer than any
// server runs between restarts is not needed, a week covers a long run.
const caLife = 7 * 24 * time.Hour

// NewCA makes an authority for a server started now.
func NewCA(now time.Time) (*CA, error) {
	key, serial, err := newKey()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "jail-mcp proxy " + serial.Text(16)[:12], Organization: []string{"jail-mcp"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLife),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, der: der, key: key, leaves: map[string]*tls.Certificate{}}, nil
}

// newKey is a P-256 key and a random serial number for a certificate of
// it.
func newKey() (*ecdsa.PrivateKey, *big.Int, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := serialNumber()
	return key, serial, err
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}

// PEM is the authority's certificate (never its key), PEM-encoded.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der})
}

// Fingerprint is the SHA-256 of the authority's certificate, hex, as
// jail_status and doctor show it.
func (ca *CA) Fingerprint() string {
	sum := sha256.Sum256(ca.der)
	return hex.EncodeToString(sum[:])
}

// Bundle is what the jail trusts: the system's roots (systemRoots, the
// PEM of the host's bundle) and the authority.
func (ca *CA) Bundle(systemRoots []byte) []byte {
	out := append([]byte{}, systemRoots...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, ca.PEM()...)
}

// Leaf is a certificate for host signed by the authority, made once per
// host. Only a host name (no address, no wildcard) is given one: the
// proxy terminates TLS for the hosts masked credentials are bound to,
// which are names.
func (ca *CA) Leaf(host string, now time.Time) (*tls.Certificate, error) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" || net.ParseIP(host) != nil || strings.ContainsAny(host, "*/ ") {
		return nil, fmt.Errorf("no certificate for %q: a host name only", host)
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[host]; ok && now.Before(c.Leaf.NotAfter) {
		return c, nil
	}
	key, serial, err := newKey()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     ca.cert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der, ca.der}, PrivateKey: key, Leaf: leaf}
	ca.leaves[host] = c
	return c, nil
}

// errNotBound is the answer to a TLS client that names a host the
// authority must not speak for.
var errNotBound = errors.New("not a bound host")
