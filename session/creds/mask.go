package creds

import (
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/session/egress"
)

// Masking (--mask, issue 31): the credentials of a masked CLI and the
// masked variables reach the jail as placeholders of the same shape; the
// real values stay in the server (read from the host's files when a
// request needs them), and the session's proxy puts them in on TLS
// requests to the hosts each is bound to, which it terminates with the
// server's authority. The jail trusts that authority through a bundle of
// the system's roots and it (CABundleRel), and the proxy variables point at
// the proxy whenever the network is on.

// Env is what a call's environment takes of the credentials' variables
// (credEnv, KEY=VALUE) and of the host's (host, left as it is): masked
// variables as placeholders, whether a CLI's or passed (--pass-env).
func (j *Jail) Env(credEnv []string, host map[string]string) ([]string, map[string]string) {
	return j.mask.env(credEnv), j.mask.hostEnv(host)
}

// Call gives the environment of a call whose network is on what the
// session's masking needs: in a session that masks credentials, the
// bundle of roots that holds the authority of its proxies, and proxied
// true: the call must go through one of them. Else env as it is.
func (j *Jail) Call(env []string) (out []string, proxied bool, err error) {
	return j.mask.call(env)
}

// Masks is the table of the session's placeholders its proxies
// substitute; nil when nothing is masked.
func (j *Jail) Masks() *egress.Masks { return j.mask.masks() }

// MaskInfo describes the session's masking: no credentials when nothing
// is masked.
func (j *Jail) MaskInfo() MaskInfo { return j.mask.info() }

// masker is what a session masks beyond its CLIs' files, chosen when it
// opens: nothing (noMask), or its masked variables, the bundle of roots
// its calls trust and the table of placeholders its proxies substitute
// (sessionMask).
type masker interface {
	env(vars []string) []string
	hostEnv(host map[string]string) map[string]string
	call(env []string) ([]string, bool, error)
	masks() *egress.Masks
	info() MaskInfo
}

// noMask is the masking of a session that masks nothing.
type noMask struct{}

func (noMask) env(vars []string) []string                       { return vars }
func (noMask) hostEnv(host map[string]string) map[string]string { return host }
func (noMask) call(env []string) ([]string, bool, error)        { return env, false, nil }
func (noMask) masks() *egress.Masks                             { return nil }
func (noMask) info() MaskInfo                                   { return MaskInfo{Credentials: []MaskedCredential{}} }

// masking is what a manager with masked credentials holds: the
// authority its proxies terminate TLS with, and the bundle the jails
// trust.
type masking struct {
	ca     *egress.CA
	bundle []byte // the system's roots and ca, PEM
}

// newMasking makes the authority of a server that masks credentials.
func newMasking() (*masking, error) {
	ca, err := egress.NewCA(time.Now())
	if err != nil {
		return nil, fmt.Errorf("make the proxy's authority: %w", err)
	}
	return &masking{ca: ca, bundle: ca.Bundle(systemRoots())}, nil
}

// rootFiles are where the systems keep their bundle of roots (as Go's
// crypto/x509 looks for it).
var rootFiles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
	"/usr/local/etc/openssl/cert.pem",
}

// systemRoots is the host's bundle of roots, PEM, or nothing.
func systemRoots() []byte {
	for _, f := range rootFiles {
		if b, err := os.ReadFile(f); err == nil && len(b) > 0 {
			return b
		}
	}
	return nil
}

// caVars are the variables through which the runtimes take a bundle of
// roots; each points at the jail's bundle (the system's roots and the
// proxy's authority).
var caVars = []string{
	"SSL_CERT_FILE",       // OpenSSL, Go, Python's ssl, Ruby, Deno's rustls with system roots
	"NODE_EXTRA_CA_CERTS", // Node
	"REQUESTS_CA_BUNDLE",  // Python requests
	"CURL_CA_BUNDLE",      // curl, pycurl
	"GIT_SSL_CAINFO",      // git over HTTPS
	"PIP_CERT",            // pip
	"AWS_CA_BUNDLE",       // the AWS SDKs and CLI
	"DENO_CERT",           // Deno
	"CARGO_HTTP_CAINFO",   // cargo
	"NPM_CONFIG_CAFILE",   // npm
	"BUNDLE_SSL_CA_CERT",  // bundler
	"HEX_CACERTS_PATH",    // Elixir's hex
}

// CABundleRel is where the jail's bundle of roots is, in the jail.
const CABundleRel = ".jail-mcp/ca-bundle.pem"

// sessionMask is a session's masked credentials: the table of its
// placeholders its proxies substitute.
type sessionMask struct {
	j     *Jail
	m     *masking   // the manager's authority and bundle
	cfg   MaskConfig // what is masked
	table *egress.Masks

	mu  sync.Mutex
	phs map[string]string // what a placeholder stands for (its key: a file's field, a variable) → it
	// files are the host credential files as last read (hostFile).
	files map[string]hostFile
}

func newSessionMask(j *Jail, m *masking) *sessionMask {
	return &sessionMask{j: j, m: m, cfg: j.h.cfg.Mask, table: egress.NewMasks(m.ca, nil), phs: map[string]string{}, files: map[string]hostFile{}}
}

// placeholder is the session's placeholder of value, what key names (a
// file's field or a variable), bound as sec says: the one it has already
// while it has the value's shape (a value that changed keeps its
// placeholder; the real one is read when a request needs it), else a new
// one.
func (sm *sessionMask) placeholder(key, value string, sec egress.Secret) (string, error) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if ph, ok := sm.phs[key]; ok && sameShape(ph, value) {
		return ph, nil
	}
	ph, err := auth.Placeholder(value)
	if err != nil {
		return "", fmt.Errorf("%s: %w", sec.Name, err)
	}
	sec.Placeholder = ph
	sm.table.Set(sec)
	sm.phs[key] = ph
	return ph, nil
}

// sameShape reports whether placeholder ph can stand for value: the same
// length and, where ph has no letter or digit, the same byte.
func sameShape(ph, value string) bool {
	if len(ph) != len(value) {
		return false
	}
	for i := range len(ph) {
		if alnum(ph[i]) != alnum(value[i]) || !alnum(ph[i]) && ph[i] != value[i] {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// env replaces in vars (KEY=VALUE) the value of each masked variable by
// its placeholder. A value that has no placeholder (too short to stand
// in for) is left out: the real one never reaches the jail.
func (sm *sessionMask) env(vars []string) []string {
	out := make([]string, 0, len(vars))
	for _, kv := range vars {
		k, v, _ := strings.Cut(kv, "=")
		if ph, ok := sm.maskVar(k, v); ok {
			out = append(out, k+"="+ph)
		}
	}
	return out
}

// hostEnv is env of the host's part of a call's environment, which it
// leaves as it is (a copy is changed).
func (sm *sessionMask) hostEnv(host map[string]string) map[string]string {
	out := host
	cloned := false
	for k := range sm.cfg.Env {
		v, set := host[k]
		if !set {
			continue
		}
		if !cloned {
			out, cloned = maps.Clone(host), true
		}
		if ph, ok := sm.maskVar(k, v); ok {
			out[k] = ph
		} else {
			delete(out, k)
		}
	}
	return out
}

// maskVar is what the jail gets of variable k set to v: its placeholder
// when k is masked, v when not; ok is false when k is masked and v has no
// placeholder (too short to stand in for): the real value never reaches
// the jail, the variable is left out.
func (sm *sessionMask) maskVar(k, v string) (string, bool) {
	h, masked := sm.cfg.Env[k]
	if !masked || v == "" {
		return v, true
	}
	ph, err := sm.placeholder("env\x00"+k, v, egress.Secret{
		Name: "env:" + k, Hosts: h.Hosts, TokenPaths: h.TokenPaths,
		Value: func() (string, error) { return v, nil },
	})
	if err != nil {
		sm.j.log.Warn("a masked variable is left out of the jail", "session", sm.j.name, "variable", k, "err", err)
		return "", false
	}
	return ph, true
}

// call gives a call whose network is on the bundle of roots, which holds
// the authority of the session's proxies: the call goes through one.
func (sm *sessionMask) call(env []string) ([]string, bool, error) {
	if err := sm.writeBundle(); err != nil {
		return env, true, fmt.Errorf("write the jail's bundle of roots: %w", err)
	}
	bundle := filepath.Join(sm.j.path, CABundleRel)
	env = slices.DeleteFunc(env, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(caVars, k)
	})
	for _, k := range caVars {
		env = append(env, k+"="+bundle)
	}
	return env, true, nil
}

// writeBundle writes the bundle of roots the jail trusts, unless it is
// there already.
func (sm *sessionMask) writeBundle() error {
	j, b := sm.j, sm.m.bundle
	if fi, err := j.root.Lstat(CABundleRel); err == nil && fi.Mode().IsRegular() && fi.Size() == int64(len(b)) {
		return nil
	}
	if err := j.ensureDirs(path.Dir(CABundleRel)); err != nil {
		return err
	}
	return j.writeInPlace(CABundleRel, b)
}

// masks is the table of the session's placeholders.
func (sm *sessionMask) masks() *egress.Masks { return sm.table }

// info describes the session's masking for jail_status.
func (sm *sessionMask) info() MaskInfo {
	return MaskInfo{
		Credentials:  sm.cfg.Credentials(),
		CA:           sm.m.ca.Fingerprint(),
		Bundle:       filepath.Join(sm.j.path, CABundleRel),
		Placeholders: len(sm.table.Secrets()),
	}
}
