package egress

import "crypto/x509"

// UpstreamRoots, when set, are the roots a terminating proxy checks a
// bound host's certificate against instead of the system's: tests of the
// whole server put their own here (their providers are local servers).
var UpstreamRoots *x509.CertPool

// TestPorts, when set, sends a connection to a port (its key) to another
// (its value) once the proxy has checked it: tests of the whole server
// stand for providers on 443 with local servers on ports of their own.
var TestPorts map[int]int
