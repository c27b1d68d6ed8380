package egress

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jail-mcp/jail-mcp/auth"
)

// Issue 31, masked credentials: the jail holds placeholders, the proxy
// the real values. A CONNECT to a host a Secret is bound to is not
// tunnelled but ended here: the proxy speaks TLS to the command with a
// leaf of Masks.CA and to the host over TLS of its own, reads each
// HTTP/1.1 request, puts the real values where that host is to get them
// (its authentication headers, the bodies of its token endpoints), and
// turns every real value it knows in the answer back into its
// placeholder. Every other CONNECT stays a blind tunnel, and a plain
// HTTP request is never given a secret.

// maxMaskedBody bounds a request body the proxy reads to substitute (a
// token endpoint's form or JSON) and a token endpoint's JSON or form
// answer it reads whole to look for new tokens; a larger answer, and
// every other, is only scanned as it streams.
const maxMaskedBody = 1 << 20

// minSecret is the shortest value looked for in answers: auth.Placeholder
// makes none shorter, and a short value would match ordinary text.
const minSecret = 8

// authHeaders are the headers that carry credentials, canonical: only
// these are given real values.
var authHeaders = map[string]bool{
	"Authorization":  true,
	"X-Api-Key":      true,
	"X-Goog-Api-Key": true,
	"Api-Key":        true,
	"Cookie":         true,
	"Private-Token":  true,
}

// terminates reports whether a CONNECT to host on port is ended by the
// proxy: a host name a masked credential is bound to on that port (and
// an authority to speak for it; without one, no secret is ever sent).
func (p *Proxy) terminates(host string, port int) bool {
	m := p.opts.Masks
	return m != nil && m.CA != nil && net.ParseIP(strings.Trim(host, "[]")) == nil && m.Bound(host, port)
}

// normalHost is a host name as the table holds it: lower case, without a
// trailing dot.
func normalHost(h string) string {
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// mitm is one terminated connection: the client's TLS, the host's, and
// what one request's checks need.
type mitm struct {
	p        *Proxy
	masks    *Masks
	host     string // lower case, no trailing dot
	port     int
	protocol string // of the CONNECT (connect, socks5), for dials and refusals

	conn   *bufferedConn // the client's, under TLS
	client *tls.Conn
	head   *io.LimitedReader // bounds a request's header
	cr     *bufio.Reader
	cw     *bufio.Writer

	raw    net.Conn // dialled for the CONNECT, not yet used
	up     *tls.Conn
	upConn net.Conn
	upHead *io.LimitedReader // bounds an answer's header
	ur     *bufio.Reader
	uw     *bufio.Writer
	reused bool // up has carried a request

	x      exchange
	scrub  scrubber
	minted map[string]string // tokens the host gave on this connection → their placeholders
}

// serveMasked serves a CONNECT to a bound host, answered already: TLS
// for the host's name with the authority's leaf, then request after
// request. target is the connection dialled for the CONNECT.
func (p *Proxy) serveMasked(c *bufferedConn, target net.Conn, host string, port int, protocol string) {
	m := &mitm{p: p, masks: p.opts.Masks, host: normalHost(host), port: port, protocol: protocol, conn: c, raw: target}
	defer m.drop()
	var why string // the refusal of the handshake, if any
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		// The name asked for must be the CONNECT's: a leaf is never
		// shown, nor a request read, under another.
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			switch sni := normalHost(hello.ServerName); {
			case sni == "":
				why = fmt.Sprintf("TLS for %s asked without a name: refused", m.host)
				return nil, errNotBound
			case sni != m.host:
				why = fmt.Sprintf("TLS for %s asked under the name %s: refused", m.host, sni)
				return nil, errNotBound
			case len(hello.SupportedProtos) > 0 && !slices.Contains(hello.SupportedProtos, "http/1.1"):
				why = fmt.Sprintf("TLS for %s asked for %s only: refused, the proxy reads HTTP/1.1", m.host, strings.Join(hello.SupportedProtos, ", "))
				return nil, errors.New("HTTP/1.1 only")
			}
			return nil, nil
		},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return m.masks.CA.Leaf(m.host, time.Now())
		},
		DynamicRecordSizingDisabled: true,
	}
	cfg.SetSessionTicketKeys([][32]byte{p.ticketKey})
	m.client = tls.Server(c, cfg)
	m.client.SetDeadline(time.Now().Add(requestTimeout))
	if err := m.client.Handshake(); err != nil {
		if why != "" {
			p.refuse("https", m.host, port, why)
		}
		return
	}
	defer m.client.Close() // with TLS's close_notify
	m.client.SetDeadline(time.Time{})
	m.head = &io.LimitedReader{R: m.client, N: maxHeader}
	m.cr = bufio.NewReader(m.head)
	m.cw = bufio.NewWriterSize(m.client, 32<<10)
	for m.serveRequest() {
	}
}

// drop ends the connection to the host, if any.
func (m *mitm) drop() {
	if m.raw != nil {
		m.raw.Close()
		m.raw = nil
	}
	if m.up != nil {
		m.up.Close()
		m.p.untrack(m.upConn)
		m.up, m.upConn = nil, nil
	}
}

// serveRequest serves the connection's next request; false: the
// connection ends. Between requests the connection waits as a tunnel
// does; a request's header, once begun, is due within requestTimeout.
// An answer the proxy gives itself ends the connection.
func (m *mitm) serveRequest() bool {
	m.head.N = maxHeader
	if _, err := m.cr.Peek(1); err != nil {
		return false
	}
	m.client.SetReadDeadline(time.Now().Add(requestTimeout))
	req, err := http.ReadRequest(m.cr)
	m.client.SetReadDeadline(time.Time{})
	m.head.N = math.MaxInt64
	if err != nil {
		m.answer(http.StatusBadRequest, "not an HTTP/1.1 request")
		return false
	}
	if req.ProtoMajor != 1 {
		// The HTTP/2 preface (PRI * HTTP/2.0) from a client that did
		// not ask for it by ALPN: no answer it could read.
		m.refuse(fmt.Sprintf("HTTP/%d.%d on the TLS connection for %s: refused, the proxy reads HTTP/1.1", req.ProtoMajor, req.ProtoMinor, m.host))
		return false
	}
	if name, ok := m.sameHost(req.Host); !ok {
		// Domain fronting: a request for another host on a connection
		// the authority's leaf for this one opened.
		m.refuse(fmt.Sprintf("a request for %q on the TLS connection for %s: refused", name, m.host))
		m.answer(http.StatusMisdirectedRequest, fmt.Sprintf("this connection is for %s, not %s", m.host, name))
		return false
	}
	if req.Method == http.MethodConnect {
		m.answer(http.StatusMethodNotAllowed, "no CONNECT inside a CONNECT")
		return false
	}
	dropHopHeaders(req.Header)
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // none added
	}
	// The answer is to be read: no compression it may not be able to undo.
	req.Header.Set("Accept-Encoding", "identity")
	m.x.start(m.masks.table(), m.host, m.port, req.URL.Path)
	streamed, a := m.substitute(req)
	m.loadScrub()
	if a != nil {
		m.answer(a.code, a.text)
		return false
	}
	resp, wrote, err := m.roundTrip(req, streamed)
	if err != nil {
		_, refused := errors.AsType[*RefusedError](err)
		_, untrusted := errors.AsType[*tls.CertificateVerificationError](err)
		switch {
		case refused && !untrusted:
			m.answer(http.StatusForbidden, err.Error())
		case refused:
			m.answer(http.StatusBadGateway, err.Error())
		default:
			m.fail(fmt.Sprintf("no answer from %s that the proxy could read", m.host), err)
		}
		return false
	}
	return m.respond(req, resp, wrote)
}

// loadScrub readies the scrubber for the request's answer, and for the
// proxy's own: the value of every secret of the table, in the forms an
// echo may spell it, and each text the proxy itself wrote for the
// request (a Basic credential's base64, a value escaped into a token
// body).
func (m *mitm) loadScrub() {
	s := &m.scrub
	s.reset()
	for _, sec := range m.x.secrets {
		if v, err := m.x.value(sec); err == nil {
			s.add(v, sec.Placeholder)
			if !plainToken(v) {
				for _, k := range []textKind{formText, jsonText} {
					a, b := k.forms(k.escape(v))
					pa, pb := k.forms(k.escape(sec.Placeholder))
					s.add(a, pa)
					s.add(b, pb)
				}
				s.add(url.PathEscape(v), url.PathEscape(sec.Placeholder))
			}
		}
	}
	for _, w := range m.x.wrote {
		s.add(w.value, w.placeholder)
	}
}

// plainToken reports whether v is spelled the same escaped for a URL, a
// form or JSON: letters, digits and -._~.
func plainToken(v string) bool {
	for i := range len(v) {
		if c := v[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~') {
			return false
		}
	}
	return true
}

// fail answers the client with text, a fixed text of the proxy's own,
// when err may quote what the host sent (Go's parse errors quote the
// line that does not read, a header the proxy filled in): err goes to
// the operator's log, scrubbed as an answer is.
func (m *mitm) fail(text string, err error) {
	if m.p.opts.Log != nil {
		m.p.opts.Log.Warn("masked answer not passed on", "host", m.host, "port", m.port, "err", m.scrub.text(err.Error()))
	}
	m.answer(http.StatusBadGateway, text)
}

// sameHost reports whether hostport, a request's Host, names the
// CONNECT's host (and port, when it gives one); it returns the name.
func (m *mitm) sameHost(hostport string) (string, bool) {
	name, port := hostport, ""
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		name, port = h, p
	}
	name = normalHost(name)
	return name, name == m.host && (port == "" || port == strconv.Itoa(m.port))
}

// refuse counts a refusal on this connection.
func (m *mitm) refuse(reason string) {
	m.p.refuse("https", m.host, m.port, reason)
}

// lingerTimeout bounds the wait, after an answer that ends a connection,
// for the client to read it and close (lingerAfter).
const lingerTimeout = 2 * time.Second

// answer answers the client itself, in JSON (what API clients read), and
// ends the connection (lingerAfter).
func (m *mitm) answer(code int, text string) {
	// Scrubbed too: a text may name what a request or an answer held.
	body, _ := json.Marshal(map[string]string{"error": "jail-mcp: " + m.scrub.text(text)})
	body = append(body, '\n')
	fmt.Fprintf(m.cw, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", code, http.StatusText(code), len(body), body)
	if m.cw.Flush() == nil {
		m.lingerAfter()
	}
}

// lingerAfter ends the writing side of the client's connection and drops
// what the client still sends (a body the proxy did not read), until it
// closes or lingerTimeout passes: closing with unread bytes would reset
// the connection, and the client could lose the answer before reading it.
func (m *mitm) lingerAfter() {
	m.client.CloseWrite()
	if cw, ok := m.conn.Conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	m.conn.SetReadDeadline(time.Now().Add(lingerTimeout))
	io.Copy(io.Discard, m.conn)
}

// localAnswer is what the client gets instead of the host's answer.
type localAnswer struct {
	code int
	text string
}

// exchange is what one request's checks know: the table as the request
// found it, the values read for it, the secrets refused already.
type exchange struct {
	secrets []*Secret
	host    string
	port    int
	// issuing: the request is to a token endpoint of a secret bound to
	// the host (Secret.issues). Only there are the answer's tokens
	// minted placeholders: elsewhere a name that ends in "token" (a page
	// token, a CSRF token) or a token-shaped id is the client's to send
	// back, in a URL or a body where no placeholder is swapped.
	issuing bool
	// carried: the request carried the value of a secret bound to the
	// host. Its answer may hand out a credential made with it (a GitHub
	// App's installation token, a runner's registration token): values
	// auth.HandedToken says are one are minted too.
	carried bool
	values  map[*Secret]string
	refused map[*Secret]bool
	found   []*Secret
	// wrote are the texts the proxy wrote for the request that spell a
	// value otherwise than as it is (a Basic credential's base64, an
	// escaped value in a token body), each with the same text of the
	// placeholder: what an echo of the request gives back.
	wrote []scrubPair
}

func (x *exchange) start(secrets []*Secret, host string, port int, path string) {
	x.secrets, x.host, x.port = secrets, host, port
	x.issuing = slices.ContainsFunc(secrets, func(s *Secret) bool { return x.bound(s) && s.issues(path) })
	x.carried = false
	if x.values == nil {
		x.values, x.refused = map[*Secret]string{}, map[*Secret]bool{}
	}
	clear(x.values)
	clear(x.refused)
	x.wrote = x.wrote[:0]
}

// mintRule is which of an answer's values are tokens to mint: on a token
// endpoint any under a token's name (auth.IssuedToken), in the answer of
// another request that carried a credential the narrower
// auth.HandedToken; nil: the answer mints none.
func (x *exchange) mintRule() func(name, v string) bool {
	switch {
	case x.issuing:
		return auth.IssuedToken
	case x.carried:
		return auth.HandedToken
	}
	return nil
}

// wrote notes that the proxy wrote value where the client sent
// placeholder.
func (x *exchange) note(value, placeholder string) {
	if value != placeholder {
		x.wrote = append(x.wrote, scrubPair{value: value, placeholder: placeholder})
	}
}

// bound reports whether s may be sent to the request's host and port.
func (x *exchange) bound(s *Secret) bool {
	return slices.ContainsFunc(s.Hosts, func(h string) bool {
		name, port := binding(h)
		return name == x.host && port == x.port
	})
}

// value is s's value, read once per request.
func (x *exchange) value(s *Secret) (string, error) {
	if v, ok := x.values[s]; ok {
		return v, nil
	}
	v, err := s.Value()
	if err != nil {
		return "", err
	}
	x.values[s] = v
	return v, nil
}

// textKind is how a text a placeholder is looked for in encodes it.
type textKind int

const (
	plainText textKind = iota // a header, a URL
	formText                  // application/x-www-form-urlencoded
	jsonText                  // inside a JSON string
)

// forms are the spellings of s in a text of kind k: as it is, and
// escaped as an encoder of k may write it ("" when that is the same).
func (k textKind) forms(s string) (string, string) {
	e := ""
	switch k {
	case formText:
		e = url.QueryEscape(s)
	case jsonText:
		e = strings.ReplaceAll(s, "/", `\/`)
	}
	if e == s {
		e = ""
	}
	return s, e
}

// contains reports whether text holds s in a form of kind k.
func (k textKind) contains(text, s string) bool {
	a, b := k.forms(s)
	return strings.Contains(text, a) || b != "" && strings.Contains(text, b)
}

// escape is s written into a text of kind k.
func (k textKind) escape(s string) string {
	switch k {
	case formText:
		return url.QueryEscape(s)
	case jsonText:
		b, _ := json.Marshal(s)
		return string(b[1 : len(b)-1])
	}
	return s
}

// substitute puts real values in req for the host: in its authentication
// headers, and in its body when it is a token endpoint's (read whole for
// that); a placeholder anywhere else goes on as it is. It reports whether
// the body is still to stream from the client, or the answer the client
// gets instead of the host's.
func (m *mitm) substitute(req *http.Request) (bool, *localAnswer) {
	x := &m.x
	never := func(*Secret) bool { return false }
	always := func(*Secret) bool { return true }
	if _, a := m.replace(req.RequestURI, plainText, never); a != nil {
		return false, a
	}
	for name, vs := range req.Header {
		put := never
		if authHeaders[name] {
			put = always
		}
		for i, v := range vs {
			out, a := m.replace(v, plainText, put)
			if a != nil {
				return false, a
			}
			if scheme, dec, ok := basicAuth(name, out); ok {
				sub, a := m.replace(dec, plainText, put)
				if a != nil {
					return false, a
				}
				if sub != dec {
					out = scheme + " " + base64.StdEncoding.EncodeToString([]byte(sub))
					// The whole credential, in every base64 a host
					// may echo it in: a part of it would depend on
					// where the value falls in its 3-byte groups.
					for _, e := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
						x.note(e.EncodeToString([]byte(sub)), e.EncodeToString([]byte(dec)))
					}
				}
			}
			vs[i] = out
		}
	}
	if req.Body == nil || req.Body == http.NoBody {
		return false, nil
	}
	path := req.URL.Path
	tokenPath := func(s *Secret) bool { return slices.Contains(s.TokenPaths, path) }
	kind, ok := bodyKind(req.Header)
	if !ok || !slices.ContainsFunc(x.secrets, func(s *Secret) bool { return x.bound(s) && tokenPath(s) }) {
		return true, nil
	}
	if req.ContentLength > maxMaskedBody {
		return false, &localAnswer{http.StatusRequestEntityTooLarge, fmt.Sprintf("a body of more than %d bytes to a token endpoint", maxMaskedBody)}
	}
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		// The body is read here before anything goes on: the client
		// waits for this proxy's go-ahead, not the host's.
		req.Header.Del("Expect")
		io.WriteString(m.cw, "HTTP/1.1 100 Continue\r\n\r\n")
		if err := m.cw.Flush(); err != nil {
			return false, &localAnswer{http.StatusBadRequest, "the body did not come"}
		}
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxMaskedBody+1))
	if err != nil {
		return false, &localAnswer{http.StatusBadRequest, "the body did not come whole"}
	}
	if len(body) > maxMaskedBody {
		return false, &localAnswer{http.StatusRequestEntityTooLarge, fmt.Sprintf("a body of more than %d bytes to a token endpoint", maxMaskedBody)}
	}
	out, a := m.replace(string(body), kind, tokenPath)
	if a != nil {
		return false, a
	}
	b := []byte(out)
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	req.ContentLength = int64(len(b))
	req.TransferEncoding = nil
	return false, nil
}

// basicAuth is the decoded user:password of header name's value v when it
// is an authentication header with Basic credentials (git sends a token
// so), and the scheme as v spells it.
func basicAuth(name, v string) (scheme, decoded string, ok bool) {
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok || !authHeaders[name] || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", "", false
	}
	return scheme, string(dec), true
}

// bodyKind is the kind of a request body the proxy looks into: a form or
// JSON, not compressed.
func bodyKind(h http.Header) (textKind, bool) {
	if ce := h.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return 0, false
	}
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	switch {
	case mt == "application/x-www-form-urlencoded":
		return formText, true
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return jsonText, true
	}
	return 0, false
}

// replace looks for placeholders in s, a text of kind k: one of a secret
// bound to the host and for which put says so is replaced by the value; a
// refresh token the host must not get is answered; one of a secret bound
// elsewhere goes on as it is, counted as a refusal.
func (m *mitm) replace(s string, k textKind, put func(*Secret) bool) (string, *localAnswer) {
	x := &m.x
	x.found = x.found[:0]
	for _, sec := range x.secrets {
		if len(s) >= len(sec.Placeholder) && k.contains(s, sec.Placeholder) {
			x.found = append(x.found, sec)
		}
	}
	for _, sec := range x.found {
		if !x.bound(sec) {
			if !x.refused[sec] {
				x.refused[sec] = true
				m.refuse(fmt.Sprintf("the placeholder of %s (for %s) sent to %s: passed on as the placeholder", sec.Name, strings.Join(sec.Hosts, ", "), m.host))
			}
			continue
		}
		if sec.NoRefresh {
			m.refuse(fmt.Sprintf("%s sent to %s: refused, the operator's CLI refreshes its login on the host", sec.Name, m.host))
			return "", &localAnswer{http.StatusForbidden, fmt.Sprintf("a refresh of the operator's login (%s) from inside the jail is refused: the operator's CLI refreshes it on the host", sec.Name)}
		}
		if !put(sec) {
			continue
		}
		v, err := x.value(sec)
		if err != nil {
			// The cause goes to the log only: it may quote what it read.
			if m.p.opts.Log != nil {
				m.p.opts.Log.Warn("masked credential unreadable", "name", sec.Name, "host", m.host, "err", err)
			}
			return "", &localAnswer{http.StatusBadGateway, fmt.Sprintf("the value of %s cannot be read on the host", sec.Name)}
		}
		x.carried = true
		a, b := k.forms(sec.Placeholder)
		ev := k.escape(v)
		s = strings.ReplaceAll(s, a, ev)
		if b != "" {
			s = strings.ReplaceAll(s, b, ev)
		}
		if k != plainText {
			x.note(ev, k.escape(sec.Placeholder))
		}
	}
	return s, nil
}

// connect makes sure of a TLS connection to the host: the one dialled for
// the CONNECT first, a new one when the last has ended. It is the proxy's
// own (its policy, resolver and address rules), checked against
// Masks.Roots; a certificate that does not verify is a refusal.
func (m *mitm) connect() error {
	if m.up != nil {
		return nil
	}
	raw := m.raw
	m.raw = nil
	if raw == nil {
		var err error
		if raw, err = m.p.dial(context.Background(), m.protocol, m.host, m.port); err != nil {
			return err
		}
	}
	if !m.p.track(raw) {
		raw.Close()
		return errors.New("the proxy is closing")
	}
	up := tls.Client(raw, &tls.Config{
		ServerName:                  m.host,
		RootCAs:                     m.masks.Roots,
		NextProtos:                  []string{"http/1.1"},
		MinVersion:                  tls.VersionTLS12,
		ClientSessionCache:          m.p.sessions,
		DynamicRecordSizingDisabled: true,
	})
	up.SetDeadline(time.Now().Add(m.p.opts.DialTimeout))
	if err := up.Handshake(); err != nil {
		up.Close()
		m.p.untrack(raw)
		if verr, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
			return fmt.Errorf("%w: %w", m.p.refuse("https", m.host, m.port, fmt.Sprintf("the certificate of %s does not verify: %v", m.host, verr.Err)), verr)
		}
		return fmt.Errorf("TLS with %s: %w", m.host, err)
	}
	up.SetDeadline(time.Time{})
	m.up, m.upConn, m.reused = up, raw, false
	m.upHead = &io.LimitedReader{R: up, N: math.MaxInt64}
	m.ur = bufio.NewReaderSize(m.upHead, 16<<10)
	m.uw = bufio.NewWriterSize(up, 16<<10)
	return nil
}

// roundTrip sends req to the host and reads its answer's header. A body
// that streams from the client is written while the answer is read (the
// client may wait for the host's 100 Continue), and wrote reports the
// end of that writing. A request with no body to stream that finds a
// kept connection closed under it is sent once more on a new one.
func (m *mitm) roundTrip(req *http.Request, streamed bool) (resp *http.Response, wrote <-chan error, err error) {
	for attempt := 0; ; attempt++ {
		if err := m.connect(); err != nil {
			return nil, nil, err
		}
		retry := m.reused && !streamed && attempt == 0
		m.reused = true
		done := make(chan error, 1)
		w := m.uw
		write := func() {
			err := req.Write(w)
			if err == nil {
				err = w.Flush()
			}
			done <- err
		}
		if streamed {
			go write()
		} else {
			write()
		}
		_, err := m.ur.Peek(1)
		if err != nil && retry {
			m.drop()
			if req.GetBody != nil {
				if req.Body, err = req.GetBody(); err != nil {
					return nil, nil, err
				}
			}
			continue
		}
		if err == nil {
			m.upHead.N = maxHeader
			resp, err = http.ReadResponse(m.ur, req)
			m.upHead.N = math.MaxInt64
		}
		if err != nil {
			m.drop()
			return nil, nil, fmt.Errorf("no answer from %s: %w", m.host, err)
		}
		return resp, done, nil
	}
}

// respond passes the host's answer (its 1xx first) on to the client with
// every real value the table knows replaced by its placeholder, and new
// tokens in a token endpoint's answer given placeholders of their own.
// It reports whether the client's connection goes on.
func (m *mitm) respond(req *http.Request, resp *http.Response, wrote <-chan error) bool {
	s := &m.scrub // loaded for the request (loadScrub)
	resp, ok := m.informational(req, resp)
	if !ok {
		return false
	}
	dropHopHeaders(resp.Header)
	bodyless := req.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified
	var body io.Reader = resp.Body
	var whole, ahead []byte // a token answer read whole; the start of a larger one
	readWhole := false
	if !bodyless {
		if body, whole, ahead, ok = m.readAnswer(resp); !ok {
			return false
		}
		readWhole = whole != nil
	}
	keep := !req.Close
	var framing int
	const (
		none    = iota // no body
		length         // Content-Length, the host's or of the body read whole
		chunked        // the length is not known, or replacing changes it
		toEnd          // to the connection's end, for an HTTP/1.0 client
	)
	switch {
	case bodyless:
		framing = none
	case readWhole:
		var out bytes.Buffer
		s.write(&out, whole, true)
		whole = out.Bytes()
		framing = length
		resp.Header.Set("Content-Length", strconv.Itoa(len(whole)))
	case resp.ContentLength >= 0 && s.sameLength:
		framing = length
		resp.Header.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	case req.ProtoAtLeast(1, 1):
		framing = chunked
		resp.Header.Del("Content-Length")
		resp.Header.Set("Transfer-Encoding", "chunked")
	default:
		framing, keep = toEnd, false
		resp.Header.Del("Content-Length")
	}
	if !keep {
		resp.Header.Set("Connection", "close")
	}
	m.writeHead(resp)
	var err error
	switch {
	case framing == none:
	case readWhole:
		_, err = m.cw.Write(whole)
	case framing == chunked:
		if err = s.stream(&chunkWriter{m.cw}, ahead, body, m.drop); err == nil {
			_, err = io.WriteString(m.cw, "0\r\n\r\n")
		}
	default:
		cw := &countWriter{w: m.cw}
		if err = s.stream(cw, ahead, body, m.drop); err == nil && framing == length && cw.n != resp.ContentLength {
			err = io.ErrUnexpectedEOF
		}
	}
	if err == nil {
		err = m.cw.Flush()
	}
	if err != nil {
		m.drop()
		return false
	}
	// The host's connection is kept when the answer ended it cleanly and
	// the request was all sent; a body still being sent (an answer that
	// came early) ends both connections, as the client's body is not
	// read to its end.
	var werr error
	select {
	case werr = <-wrote:
	default:
		select {
		case werr = <-wrote:
		case <-time.After(50 * time.Millisecond):
			m.drop()
			return false
		}
	}
	if werr != nil || resp.Close {
		m.drop()
	}
	return keep
}

// informational passes the host's 1xx answers on to the client and
// returns the final one; ok is false, the connection ended, where the
// host switches protocols or its next answer cannot be read.
func (m *mitm) informational(req *http.Request, resp *http.Response) (_ *http.Response, ok bool) {
	for resp.StatusCode < 200 {
		if resp.StatusCode == http.StatusSwitchingProtocols {
			m.drop()
			m.answer(http.StatusBadGateway, "no protocol upgrade on a connection the proxy reads")
			return nil, false
		}
		dropHopHeaders(resp.Header)
		m.writeHead(resp)
		if err := m.cw.Flush(); err != nil {
			return nil, false
		}
		var err error
		m.upHead.N = maxHeader
		resp, err = http.ReadResponse(m.ur, req)
		m.upHead.N = math.MaxInt64
		if err != nil {
			m.drop()
			m.fail(fmt.Sprintf("no answer from %s that the proxy could read", m.host), err)
			return nil, false
		}
	}
	return resp, true
}

// readAnswer is the body of resp to pass on, decoded: a JSON or form
// answer that may hand out tokens (exchange.mintRule) is read whole
// (whole, never nil then) and its new tokens minted; any other streams,
// as does one past maxMaskedBody that is not a token endpoint's (its
// start ahead, the rest body). false: the proxy answered instead, as it
// does for a token endpoint's answer it cannot read whole.
func (m *mitm) readAnswer(resp *http.Response) (body io.Reader, whole, ahead []byte, ok bool) {
	body, err := decoded(resp)
	if err != nil {
		m.drop()
		m.fail(fmt.Sprintf("an answer from %s in an encoding the proxy cannot read to keep secrets out of it", m.host), err)
		return nil, nil, nil, false
	}
	rule := m.x.mintRule()
	if rule == nil || !isJSON(resp.Header) && !isForm(resp.Header) {
		return body, nil, nil, true // nothing to mint: scrubbed as it streams
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(body, maxMaskedBody+1)); err != nil {
		m.drop()
		m.fail(fmt.Sprintf("the answer of %s did not come whole", m.host), err)
		return nil, nil, nil, false
	}
	if buf.Len() > maxMaskedBody {
		if m.x.issuing {
			m.drop()
			m.fail(fmt.Sprintf("an answer of a token endpoint of %s longer than %d bytes, which the proxy reads whole to mask its tokens", m.host, maxMaskedBody), errors.New("token answer too long"))
			return nil, nil, nil, false
		}
		return body, nil, buf.Bytes(), true
	}
	mint := m.mint
	if isForm(resp.Header) {
		mint = m.mintForm
	}
	whole, err = mint(buf.Bytes(), rule)
	switch {
	case errors.Is(err, errNotJSON) && !m.x.issuing:
		whole = buf.Bytes() // no tokens to find: scrubbed as any other
	case err != nil:
		m.mintFailed(err)
		return nil, nil, nil, false
	}
	if whole == nil {
		whole = []byte{}
	}
	return body, whole, nil, true
}

// mintFailed answers the client instead of passing on a token answer
// whose tokens could not all be minted: the answer holds a token the
// jail must not get.
func (m *mitm) mintFailed(err error) {
	if errors.Is(err, errTooManyTokens) {
		m.refuse(fmt.Sprintf("too many tokens: a token from %s past the %d a session masks, its answer not passed on", m.host, maxMinted))
		m.answer(http.StatusBadGateway, fmt.Sprintf("too many tokens: this session has masked the %d tokens hosts handed out that a session masks, and passes no more on (the answer of %s is not); start a new session", maxMinted, m.host))
		return
	}
	m.fail(fmt.Sprintf("a token from %s that cannot be masked", m.host), err)
}

// writeHead writes an answer's status and header, values replaced.
func (m *mitm) writeHead(resp *http.Response) {
	for _, vs := range resp.Header {
		for i, v := range vs {
			vs[i] = m.scrub.text(v)
		}
	}
	fmt.Fprintf(m.cw, "HTTP/1.1 %s\r\n", m.scrub.text(resp.Status))
	resp.Header.Write(m.cw)
	io.WriteString(m.cw, "\r\n")
}

// decoded is an answer's body as sent, undoing the compression it came
// with despite the request asking for none; the answer's header then says
// so.
func decoded(resp *http.Response) (io.Reader, error) {
	ce := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
	var r io.Reader
	switch ce {
	case "", "identity":
		return resp.Body, nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("the answer's gzip does not read: %w", err)
		}
		r = zr
	case "deflate":
		// zlib as the standard says, or raw deflate as some servers send.
		br := bufio.NewReader(resp.Body)
		if h, err := br.Peek(2); err == nil && h[0]&0x0f == 8 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0 {
			zr, err := zlib.NewReader(br)
			if err != nil {
				return nil, fmt.Errorf("the answer's deflate does not read: %w", err)
			}
			r = zr
		} else {
			r = flate.NewReader(br)
		}
	default:
		return nil, fmt.Errorf("an answer in the encoding %q, which the proxy cannot read to keep secrets out of it", ce)
	}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	return r, nil
}

// isForm reports whether an answer is form-encoded, as GitHub's token
// endpoint answers unless asked for JSON.
func isForm(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "application/x-www-form-urlencoded"
}

func isJSON(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// errNotJSON: an answer said to be JSON does not read as JSON.
var errNotJSON = errors.New("an answer said to be JSON that does not read as JSON")

// mint gives each token of a JSON answer (a string value rule says is
// one) that is neither a placeholder nor
// a value the table knows a placeholder of its own, added to the table
// as a secret of the host (its hosts and token paths; a refresh token is
// refused as the host's are), and returns the body with the
// placeholders in the tokens' places; errNotJSON for a body that is not
// JSON.
func (m *mitm) mint(body []byte, rule func(name, v string) bool) ([]byte, error) {
	type token struct {
		key, value string
		start, end int64 // the JSON string's, quotes included
	}
	var tokens []token
	type frame struct {
		object, wantKey bool
		key             string
	}
	var stack []frame
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		off := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF && len(stack) == 0 {
			break
		}
		if err != nil {
			return nil, errNotJSON
		}
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if k, ok := tok.(string); ok && top != nil && top.object && top.wantKey {
			top.key, top.wantKey = k, false
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if top != nil && top.object {
				top.wantKey = true
			}
			stack = append(stack, frame{object: tok == json.Delim('{'), wantKey: true})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			continue
		}
		if top == nil || !top.object {
			continue
		}
		top.wantKey = true
		if v, ok := tok.(string); ok && rule(top.key, v) {
			end := dec.InputOffset()
			start := off + int64(bytes.IndexByte(body[off:end], '"'))
			tokens = append(tokens, token{top.key, v, start, end})
		}
	}
	if len(tokens) == 0 {
		return body, nil
	}
	var out []byte
	last := int64(0)
	for _, t := range tokens {
		ph, err := m.mintOne(t.key, t.value)
		if err != nil {
			return nil, err
		}
		if ph == "" {
			continue // a placeholder already, or replaced as a known value
		}
		q, _ := json.Marshal(ph)
		out = append(append(out, body[last:t.start]...), q...)
		last = t.end
	}
	return append(out, body[last:]...), nil
}

// mintForm is mint of a form-encoded answer (GitHub's token endpoint
// answers access_token=...&scope=... unless asked for JSON): each field
// rule says is a token gets a placeholder of its own.
func (m *mitm) mintForm(body []byte, rule func(name, v string) bool) ([]byte, error) {
	pairs := strings.Split(string(body), "&")
	changed := false
	for i, pair := range pairs {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			continue
		}
		key, err1 := url.QueryUnescape(k)
		value, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil || !rule(key, value) {
			continue
		}
		ph, err := m.mintOne(key, value)
		if err != nil {
			return nil, err
		}
		if ph != "" {
			pairs[i], changed = k+"="+url.QueryEscape(ph), true
		}
	}
	if !changed {
		return body, nil
	}
	return []byte(strings.Join(pairs, "&")), nil
}

// mintOne gives the token value (named key in the answer) a placeholder
// of its own, added to the table as a secret of the host: its hosts and
// token paths, a refresh token refused as the host's are. "": value is a
// placeholder already, or a value the table knows (replaced as such). An
// error (a value too long or too short to mask, the session's
// maxMinted reached): the answer is not passed on.
func (m *mitm) mintOne(key, value string) (string, error) {
	if ph, ok := m.minted[value]; ok {
		return ph, nil
	}
	if m.masks.placeholder(value) || m.scrub.has(value) {
		return "", nil
	}
	if len(value) > maxMintedLen {
		return "", fmt.Errorf("a %s from %s of %d bytes, longer than a token the proxy masks", key, m.host, len(value))
	}
	var hosts, paths []string
	noRefresh := false
	for _, sec := range m.x.secrets {
		if m.x.bound(sec) {
			hosts = append(hosts, sec.Hosts...)
			paths = append(paths, sec.TokenPaths...)
			noRefresh = noRefresh || sec.NoRefresh
		}
	}
	slices.Sort(hosts)
	slices.Sort(paths)
	hosts, paths = slices.Compact(hosts), slices.Compact(paths)
	ph, err := auth.Placeholder(value)
	if err != nil {
		return "", fmt.Errorf("a %s from %s that cannot be masked: %w", key, m.host, err)
	}
	err = m.masks.mint(Secret{
		Name:        m.host + " response " + key,
		Placeholder: ph,
		Hosts:       hosts,
		TokenPaths:  paths,
		Value:       func() (string, error) { return value, nil },
		NoRefresh:   noRefresh && auth.RefreshName(key),
	})
	if err != nil {
		return "", err
	}
	m.scrub.add(value, ph)
	if m.minted == nil {
		m.minted = map[string]string{}
	}
	m.minted[value] = ph
	return ph, nil
}

// scrubber replaces real values by their placeholders in an answer as it
// streams: a tail that may begin a value is held back until the next read
// shows whether it does, so that a value split across reads is caught,
// and nothing more is held (an event stream's events go on as they come).
type scrubber struct {
	pairs      []scrubPair
	next       []int
	longest    int
	sameLength bool // every placeholder as long as its value: lengths hold
}

type scrubPair struct {
	value       string
	valueB      []byte
	placeholder string
}

func (s *scrubber) reset() {
	s.pairs, s.longest, s.sameLength = s.pairs[:0], 0, true
}

// add has value replaced by placeholder.
func (s *scrubber) add(value, placeholder string) {
	if len(value) < minSecret || value == placeholder || s.has(value) {
		return
	}
	s.pairs = append(s.pairs, scrubPair{value, []byte(value), placeholder})
	s.longest = max(s.longest, len(value))
	s.sameLength = s.sameLength && len(value) == len(placeholder)
}

func (s *scrubber) has(value string) bool {
	return slices.ContainsFunc(s.pairs, func(p scrubPair) bool { return p.value == value })
}

// text is v with every value replaced.
func (s *scrubber) text(v string) string {
	for _, p := range s.pairs {
		if strings.Contains(v, p.value) {
			v = strings.ReplaceAll(v, p.value, p.placeholder)
		}
	}
	return v
}

// write writes data to w with every value replaced, but for a tail that
// may begin a value (none when final); it returns that tail's length.
// Each value is looked for once per call (bytes.Index), and again only
// past a replacement: linear in data.
func (s *scrubber) write(w io.Writer, data []byte, final bool) (int, error) {
	put := func(b []byte) error {
		if len(b) == 0 {
			return nil
		}
		_, err := w.Write(b)
		return err
	}
	s.next = slices.Grow(s.next[:0], len(s.pairs))[:len(s.pairs)]
	for i := range s.next {
		s.next[i] = -1 // not looked for yet
	}
	pos := 0
	for {
		at, which := len(data), -1
		for i, p := range s.pairs {
			if s.next[i] < pos {
				if j := bytes.Index(data[pos:], p.valueB); j >= 0 {
					s.next[i] = pos + j
				} else {
					s.next[i] = len(data)
				}
			}
			if s.next[i] < at || s.next[i] == at && which >= 0 && len(p.value) > len(s.pairs[which].value) {
				at, which = s.next[i], i
			}
		}
		if which < 0 {
			break
		}
		if err := put(data[pos:at]); err != nil {
			return 0, err
		}
		if _, err := io.WriteString(w, s.pairs[which].placeholder); err != nil {
			return 0, err
		}
		pos = at + len(s.pairs[which].value)
	}
	held := 0
	if !final {
		held = s.tail(data[pos:])
	}
	return held, put(data[pos : len(data)-held])
}

// tail is the length of the longest end of data that begins a value.
func (s *scrubber) tail(data []byte) int {
	held := 0
	for _, p := range s.pairs {
		v := p.valueB
		for i := max(0, len(data)-len(v)+1); i < len(data)-held; i++ {
			j := bytes.IndexByte(data[i:len(data)-held], v[0])
			if j < 0 {
				break
			}
			i += j
			if bytes.HasPrefix(v, data[i:]) {
				held = len(data) - i
				break
			}
		}
	}
	return held
}

// flusher is a writer that passes on what it holds.
type flusher interface {
	io.Writer
	Flush() error
}

// stream writes ahead then body to w, values replaced. A body that one
// read brings whole is written there and then; a longer one is read
// (the host's TLS, decrypting) and written (the client's, encrypting)
// side by side, a few buffers apart, and w is flushed whenever the reader
// has nothing more ready, so that an event stream's events go on as they
// come. abort ends a read that waits, when writing has failed.
func (s *scrubber) stream(w flusher, ahead []byte, body io.Reader, abort func()) error {
	bp := smallPool.Get().(*[]byte)
	defer smallPool.Put(bp)
	buf := *bp
	if len(buf) < 4*s.longest {
		buf = make([]byte, 4*s.longest)
	}
	data, rerr := ahead, error(nil)
	if data == nil {
		n, err := body.Read(buf)
		data, rerr = buf[:n], err
		if rerr != nil {
			_, err := s.write(w, data, true)
			if err == nil {
				err = w.Flush()
			}
			if err == nil && rerr != io.EOF {
				err = rerr
			}
			return err
		}
	}
	type chunk struct {
		b   *[]byte
		err error // of the read the chunk came from: io.EOF at the end
	}
	const depth = 4
	free := make(chan *[]byte, depth)
	full := make(chan chunk, depth)
	stop := make(chan struct{})
	for range depth {
		free <- smallPool.Get().(*[]byte)
	}
	go func() {
		defer close(full)
		for {
			var out *[]byte
			select {
			case out = <-free:
			case <-stop:
				return
			}
			sw := sliceWriter((*out)[:0])
			h, _ := s.write(&sw, data, rerr != nil)
			*out = sw
			full <- chunk{out, rerr}
			if rerr != nil {
				return
			}
			held := copy(buf, data[len(data)-h:])
			var n int
			n, rerr = body.Read(buf[held:])
			data = buf[:held+n]
		}
	}()
	var err error
	for c := range full {
		if err == nil {
			if _, err = w.Write(*c.b); err == nil && len(full) == 0 {
				err = w.Flush()
			}
			if err == nil && c.err != nil && c.err != io.EOF {
				err = c.err
			}
			if err != nil {
				close(stop)
				abort()
			}
		}
		free <- c.b
	}
	for range depth {
		b := <-free
		*b = (*b)[:cap(*b)]
		smallPool.Put(b)
	}
	return err
}

// sliceWriter appends what it writes.
type sliceWriter []byte

func (w *sliceWriter) Write(p []byte) (int, error) {
	*w = append(*w, p...)
	return len(p), nil
}

// chunkWriter writes each write as a chunk of a chunked body.
type chunkWriter struct{ w *bufio.Writer }

func (c *chunkWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	fmt.Fprintf(c.w, "%x\r\n", len(p))
	c.w.Write(p)
	_, err := io.WriteString(c.w, "\r\n")
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *chunkWriter) Flush() error { return c.w.Flush() }

// countWriter counts what it writes.
type countWriter struct {
	w *bufio.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countWriter) Flush() error { return c.w.Flush() }

// checkPlain counts the placeholders a plain HTTP request carries in its
// URL and headers: no secret goes over plain HTTP, so each goes on as it
// is, counted as a refusal.
func (p *Proxy) checkPlain(req *http.Request, host string, port int) {
	secrets := p.opts.Masks.table()
	seen := map[*Secret]bool{}
	check := func(s string) {
		for _, sec := range secrets {
			if !seen[sec] && strings.Contains(s, sec.Placeholder) {
				seen[sec] = true
				p.refuse("http", host, port, fmt.Sprintf("the placeholder of %s sent over plain HTTP: passed on as the placeholder", sec.Name))
			}
		}
	}
	check(req.RequestURI)
	for name, vs := range req.Header {
		for _, v := range vs {
			check(v)
			if _, dec, ok := basicAuth(name, v); ok {
				check(dec)
			}
		}
	}
}
