package egress

import "crypto/x509"

// UpstreamRoots, when set, are the roots a terminating proxy checks a
// bound host's certificate against instead of the system's: tests of the
// whole server put their own here (their providers are local servers).
var UpstreamRoots *x509.CertPool
