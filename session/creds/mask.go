package creds

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
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
	"github.com/jail-mcp/jail-mcp/session/view"
)

// Masking (--mask, issue 31): the credentials of a masked CLI and the
// masked variables reach the jail as placeholders of the same shape; the
// real values stay in the server (read from the host's files when a
// request needs them), and the session's proxy puts them in on TLS
// requests to the hosts each is bound to, which it terminates with the
// server's authority. The jail trusts that authority through a bundle of
// the system's roots and it (caBundle), and the proxy variables point at
// the proxy whenever the network is on.

// MaskConfig is --mask resolved against the registry, --auth and
// --pass-env: where each masked credential may be sent.
type MaskConfig struct {
	CLIs map[string]MaskHosts // a masked CLI's
	Env  map[string]MaskHosts // a masked variable's
	// vars are the secret variables of each masked CLI (CLI.SecretEnv),
	// masked with it unless --mask names them itself.
	vars map[string][]string
}

// MaskHosts is where one masked credential may go.
type MaskHosts struct {
	Hosts      []string `json:"hosts"`
	TokenPaths []string `json:"token_paths"` // paths of the token endpoints on Hosts
	Rotates    bool     `json:"rotates"`     // the provider rotates refresh tokens: a refresh is refused
}

// Empty reports whether nothing is masked.
func (c MaskConfig) Empty() bool { return len(c.CLIs) == 0 && len(c.Env) == 0 }

// ResolveMask resolves the operator's --mask for the CLIs --auth enables
// (enabled) and the variables --pass-env passes (pass): every masked CLI
// must be enabled, every masked variable passed (or a variable of an
// enabled CLI), and every variable bound to hosts, its own or its CLI's.
func ResolveMask(m auth.Mask, enabled, pass []string) (MaskConfig, error) {
	c := MaskConfig{CLIs: map[string]MaskHosts{}, Env: map[string]MaskHosts{}, vars: map[string][]string{}}
	names := slices.Collect(maps.Keys(m.CLIs))
	if m.All {
		names = append(names, enabled...)
	}
	slices.Sort(names)
	for _, n := range slices.Compact(names) {
		if !slices.Contains(enabled, n) {
			return c, fmt.Errorf("%s: its credentials are not enabled (--auth %s)", n, cmp.Or(strings.Join(enabled, ","), "none"))
		}
		cli, _ := auth.Lookup(n)
		h := hostsOf(cli, m.CLIs[n])
		c.CLIs[n] = h
		for _, v := range cli.SecretEnv {
			if _, named := m.Env[v]; !named {
				c.Env[v] = h
				c.vars[n] = append(c.vars[n], v)
			}
		}
	}
	for v, extra := range m.Env {
		owner, ok := envOwner(v)
		switch {
		case ok && slices.Contains(enabled, owner.Name):
		case view.Matches(v, pass):
		default:
			return c, fmt.Errorf("env:%s: not passed to commands (--pass-env, or a variable of a CLI --auth enables)", v)
		}
		switch {
		case ok:
			h := hostsOf(owner, extra)
			c.Env[v] = h
		case len(extra) > 0:
			c.Env[v] = MaskHosts{Hosts: slices.Clone(extra), TokenPaths: []string{}}
		default:
			return c, fmt.Errorf("env:%s: name the hosts its value may be sent to (env:%s@HOST,HOST)", v, v)
		}
	}
	return c, nil
}

// hostsOf is where a credential of cli may go: the registry's hosts and
// extra.
func hostsOf(cli auth.CLI, extra []string) MaskHosts {
	h := MaskHosts{Hosts: append([]string{}, cli.Hosts...), TokenPaths: []string{}, Rotates: cli.Rotates}
	for _, e := range extra {
		if !slices.Contains(h.Hosts, e) {
			h.Hosts = append(h.Hosts, e)
		}
	}
	for _, tp := range cli.TokenPaths {
		if i := strings.IndexByte(tp, '/'); i > 0 && !slices.Contains(h.TokenPaths, tp[i:]) {
			h.TokenPaths = append(h.TokenPaths, tp[i:])
		}
	}
	return h
}

// envOwner is the CLI whose secret variable v is.
func envOwner(v string) (auth.CLI, bool) {
	for _, c := range auth.Registry {
		if slices.Contains(c.SecretEnv, v) {
			return c, true
		}
	}
	return auth.CLI{}, false
}

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
	masks *egress.Masks

	mu  sync.Mutex
	phs map[string]string // what a placeholder stands for (maskKey) → it
	// files are the host credential files as last read (hostFile).
	files map[string]hostFile
}

func newSessionMask(ca *egress.CA) *sessionMask {
	return &sessionMask{masks: egress.NewMasks(ca, nil), phs: map[string]string{}, files: map[string]hostFile{}}
}

// placeholder is the session's placeholder of value, what key names (a
// file's field or a variable), bound as sec says: the one it has already
// while it has the value's shape (a value that changed keeps its
// placeholder; the real one is read when a request needs it), else a new
// one.
func (j *Jail) placeholder(key, value string, sec egress.Secret) (string, error) {
	sm := j.mask
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
	sm.masks.Set(sec)
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

// MaskEnv replaces in vars (KEY=VALUE) the value of each masked variable
// by its placeholder. A value that has no placeholder (too short to stand
// in for) is left out: the real one never reaches the jail.
func (j *Jail) MaskEnv(vars []string) []string {
	out := make([]string, 0, len(vars))
	for _, kv := range vars {
		k, v, _ := strings.Cut(kv, "=")
		if ph, ok := j.maskVar(k, v); ok {
			out = append(out, k+"="+ph)
		}
	}
	return out
}

// MaskHostEnv is MaskEnv of the host's part of a call's environment,
// which it leaves as it is (a copy is changed).
func (j *Jail) MaskHostEnv(host map[string]string) map[string]string {
	out := host
	cloned := false
	for k := range j.h.cfg.Mask.Env {
		v, set := host[k]
		if !set {
			continue
		}
		if !cloned {
			out, cloned = maps.Clone(host), true
		}
		if ph, ok := j.maskVar(k, v); ok {
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
func (j *Jail) maskVar(k, v string) (string, bool) {
	h, masked := j.h.cfg.Mask.Env[k]
	if !masked || v == "" {
		return v, true
	}
	ph, err := j.placeholder("env\x00"+k, v, egress.Secret{
		Name: "env:" + k, Hosts: h.Hosts, TokenPaths: h.TokenPaths,
		Value: func() (string, error) { return v, nil },
	})
	if err != nil {
		j.log.Warn("a masked variable is left out of the jail", "session", j.name, "variable", k, "err", err)
		return "", false
	}
	return ph, true
}

// maxCredentialFile bounds a credential file the server masks: what is
// larger is no credential file.
const maxCredentialFile = 1 << 20

// readCredential reads a host credential file, bounded.
func readCredential(host string) ([]byte, error) {
	f, err := os.Open(host)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCredentialFile+1))
	if err == nil && len(b) > maxCredentialFile {
		err = fmt.Errorf("%s: larger than %d bytes, not a credential file", host, maxCredentialFile)
	}
	return b, err
}

// hostFile is the content of the host credential file host, read again
// only when it changed (the proxy asks for every secret's value on every
// request, to scan the answers).
func (sm *sessionMask) hostFile(host string) ([]byte, error) {
	fi, err := os.Stat(host)
	if err != nil {
		return nil, err
	}
	sm.mu.Lock()
	c, ok := sm.files[host]
	sm.mu.Unlock()
	if ok && os.SameFile(c.fi, fi) && c.fi.ModTime().Equal(fi.ModTime()) && c.fi.Size() == fi.Size() {
		return c.b, nil
	}
	b, err := readCredential(host)
	if err != nil {
		return nil, err
	}
	sm.mu.Lock()
	sm.files[host] = hostFile{fi: fi, b: b}
	sm.mu.Unlock()
	return b, nil
}

// hostFile is a host credential file as last read.
type hostFile struct {
	fi os.FileInfo
	b  []byte
}

// maskContent is content (the host file host of cli) with each secret it
// holds replaced by the session's placeholder.
func (j *Jail) maskContent(cli, host string, content []byte) ([]byte, error) {
	h := j.h.cfg.Mask.CLIs[cli]
	name := filepath.Base(host)
	out, _, err := auth.MaskFile(name, content, func(f auth.Field) (string, error) {
		hosts := h.Hosts
		if f.Host != "" {
			hosts = []string{strings.ToLower(f.Host)}
		}
		key := f.Key
		return j.placeholder(cli+"\x00"+host+"\x00"+key, f.Value, egress.Secret{
			Name: cli + " " + j.h.homeRel(host) + " " + key, Hosts: hosts, TokenPaths: h.TokenPaths,
			NoRefresh: h.Rotates && f.Kind == "refresh",
			Value: func() (string, error) {
				b, err := j.mask.hostFile(host)
				if err != nil {
					return "", err
				}
				if v, ok := auth.FieldValue(name, b, key); ok {
					return v, nil
				}
				return "", fmt.Errorf("%s holds no %s any more", host, key)
			},
		})
	})
	return out, err
}

// maxMaskedDepth bounds the directories of a credential directory a
// masked copy follows.
const maxMaskedDepth = 4

// writeMasked writes the masked copy of the host credential file or
// directory host of cli at dst in the jail, through os.Root: a file in
// place of what is there (one a sandbox has bound is rewritten in place,
// so that it sees the host's latest), a directory with the masked copies
// of its settings files (settingsFile), its subdirectories to
// maxMaskedDepth.
func (j *Jail) writeMasked(cli, host, dst string) error {
	return j.writeMaskedAt(cli, host, dst, 0)
}

func (j *Jail) writeMaskedAt(cli, host, dst string, depth int) error {
	fi, err := os.Stat(host)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		b, err := readCredential(host)
		if err != nil {
			return err
		}
		masked, err := j.maskContent(cli, host, b)
		if err != nil {
			return err
		}
		return j.writeInPlace(dst, masked)
	}
	if dfi, err := j.root.Lstat(dst); err != nil || !dfi.IsDir() {
		if err := j.root.RemoveAll(dst); err != nil {
			return err
		}
		if err := j.root.Mkdir(dst, 0o700); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(host)
	if err != nil {
		return err
	}
	for _, e := range entries {
		src := filepath.Join(host, e.Name())
		switch {
		case e.IsDir() && depth < maxMaskedDepth:
			err = j.writeMaskedAt(cli, src, path.Join(dst, e.Name()), depth+1)
		case e.Type().IsRegular() && settingsFile(src):
			err = j.writeMaskedAt(cli, src, path.Join(dst, e.Name()), depth+1)
		}
		if err != nil {
			// Left out of the copy, never copied unmasked: one file the
			// server cannot mask costs the jail that file only.
			j.log.Warn("a credential file is left out of the jail's masked copy", "session", j.name, "cli", cli, "path", src, "err", err)
			j.root.RemoveAll(path.Join(dst, e.Name()))
		}
	}
	return nil
}

// writeInPlace makes dst a regular file holding b: the file that is there
// rewritten (a bind of it shows the new content), else a new one.
func (j *Jail) writeInPlace(dst string, b []byte) error {
	if fi, err := j.root.Lstat(dst); err == nil && fi.Mode().IsRegular() {
		if old, err := j.root.ReadFile(dst); err == nil && bytes.Equal(old, b) {
			return nil
		}
		if f, err := j.root.OpenFile(dst, os.O_WRONLY, 0); err == nil {
			_, werr := f.WriteAt(b, 0)
			return errors.Join(werr, f.Truncate(int64(len(b))), f.Close())
		}
	}
	return j.createIn(dst, bytes.NewReader(b))
}

// RefreshMasked rewrites in place the masked copies bound into the
// session's sandboxes (Bind) for the CLIs of exps, so that a
// sandbox started earlier sees the host's latest (a token the operator's
// CLI refreshed, its new expiry). A copy that cannot be made again is
// said, and the one before stays.
func (j *Jail) RefreshMasked(exps []auth.Exposure) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, e := range exps {
		if !j.h.masked(e.Name) {
			continue
		}
		for _, it := range e.Items {
			var err error
			if !it.State {
				err = j.rewriteMasked(e.Name, it.Host, it.Rel)
			}
			for _, sec := range it.Secrets {
				err = errors.Join(err, j.rewriteMasked(e.Name, sec.Host, path.Join(filepath.ToSlash(it.Rel), sec.Name)))
			}
			if err != nil {
				j.log.Warn("refresh a masked credential", "session", j.name, "cli", e.Name, "path", it.Rel, "err", err)
			}
		}
	}
}

// rewriteMasked writes the masked copy of host again where a sandbox has
// it bound; none is made where there is none.
func (j *Jail) rewriteMasked(cli, host, rel string) error {
	dst := maskedRel(cli, rel)
	if _, err := j.root.Lstat(dst); err != nil {
		return nil
	}
	return j.writeMasked(cli, host, dst)
}

// maskedRel is where a masked copy bound into sandboxes is kept, in the
// state directory (hidden from commands).
func maskedRel(cli, rel string) string {
	return path.Join(StateDir, "masked", cli, filepath.ToSlash(rel))
}

// writeBundle writes the bundle of roots the jail trusts, unless it is
// there already.
func (j *Jail) writeBundle() error {
	b := j.h.masking.bundle
	if fi, err := j.root.Lstat(CABundleRel); err == nil && fi.Mode().IsRegular() && fi.Size() == int64(len(b)) {
		return nil
	}
	if err := j.ensureDirs(path.Dir(CABundleRel)); err != nil {
		return err
	}
	return j.writeInPlace(CABundleRel, b)
}

// MaskCall gives the environment of a call whose network is on, in a
// session that masks credentials, the bundle of roots, which holds the
// authority of the session's proxies; the caller puts the call behind
// one.
func (j *Jail) MaskCall(env []string) ([]string, error) {
	if err := j.writeBundle(); err != nil {
		return env, fmt.Errorf("write the jail's bundle of roots: %w", err)
	}
	bundle := filepath.Join(j.path, CABundleRel)
	env = slices.DeleteFunc(env, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(caVars, k)
	})
	for _, k := range caVars {
		env = append(env, k+"="+bundle)
	}
	return env, nil
}

// Masks is the table of the session's placeholders its proxies
// substitute; nil when nothing is masked.
func (j *Jail) Masks() *egress.Masks {
	if j.mask == nil {
		return nil
	}
	return j.mask.masks
}

// Credentials lists the masked CLIs, then the masked variables, each
// with where it may go.
func (c MaskConfig) Credentials() []MaskedCredential {
	out := []MaskedCredential{}
	implied := map[string]bool{}
	for _, n := range slices.Sorted(maps.Keys(c.CLIs)) {
		out = append(out, MaskedCredential{Name: n, Vars: append([]string{}, c.vars[n]...), MaskHosts: c.CLIs[n]})
		for _, v := range c.vars[n] {
			implied[v] = true
		}
	}
	for _, n := range slices.Sorted(maps.Keys(c.Env)) {
		if !implied[n] {
			out = append(out, MaskedCredential{Name: "env:" + n, Vars: []string{n}, MaskHosts: c.Env[n]})
		}
	}
	return out
}

// MaskInfo is what jail_status says of masking.
type MaskInfo struct {
	Credentials  []MaskedCredential `json:"credentials"`
	CA           string             `json:"ca_fingerprint"`
	Bundle       string             `json:"ca_bundle"` // where the jail's bundle is, in the jail
	Placeholders int                `json:"placeholders"`
}

// MaskedCredential is one masked CLI or variable and where it may go.
type MaskedCredential struct {
	Name string   `json:"name"` // a CLI's, or env:NAME
	Vars []string `json:"env"`  // the variables masked with it
	MaskHosts
}

// MaskInfo describes the session's masking: no credentials when nothing
// is masked.
func (j *Jail) MaskInfo() MaskInfo {
	cfg := j.h.cfg.Mask
	info := MaskInfo{Credentials: []MaskedCredential{}}
	if cfg.Empty() || j.h.masking == nil || j.mask == nil {
		return info
	}
	info.CA, info.Bundle = j.h.masking.ca.Fingerprint(), filepath.Join(j.path, CABundleRel)
	info.Credentials = cfg.Credentials()
	info.Placeholders = len(j.mask.masks.Secrets())
	return info
}
