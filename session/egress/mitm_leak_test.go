package egress

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/jail-mcp/jail-mcp/auth"
)

// lockedWriter writes to w under mu: the proxy's log, read by a test.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// handle has the origin answer path with h.
func (o *maskOrigin) handle(path string, h http.HandlerFunc) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.paths[path] = h
}

// logText is what the proxy logged so far.
func (f *maskFixture) logText() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.log.String()
}

// b64Forms are the ways a host may write s in base64: standard and
// URL-safe, padded or not.
func b64Forms(s string) []string {
	b := []byte(s)
	return []string{
		base64.StdEncoding.EncodeToString(b), base64.URLEncoding.EncodeToString(b),
		base64.RawStdEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b),
	}
}

// TestMaskedEncodedEchoes (issue 44): a bound host that reflects what it
// got reflects what the proxy wrote: the Basic header it built (its
// base64, as sent or re-encoded), and the escaped values it wrote into a
// token body, in the answer's body, its headers and a 103's headers. The
// jail reads the placeholder's forms, never the value's.
func TestMaskedEncodedEchoes(t *testing.T) {
	f := newMaskFixture(t, nil)
	c := f.client(nil)
	git := f.secrets["git"]
	const user = "x-access-token:"
	basic := http.Header{"Authorization": {"Basic " + base64Std(user+git.ph)}}
	f.origin.handle("/basic", func(w http.ResponseWriter, r *http.Request) {
		_, cred, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		dec, _ := base64.StdEncoding.DecodeString(cred)
		forms := strings.Join(b64Forms(string(dec)), " ")
		w.Header().Set("Link", "</style.css>; rel=preload; a="+forms)
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Set("X-Echo", forms)
		io.WriteString(w, forms)
	})
	var early []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		early = append(early, fmt.Sprint(code, h))
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "GET", f.url(boundHost, "/basic"), nil)
	req.Header = basic
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_, echo := do(t, c, "GET", f.url(boundHost, "/echo"), basic, "")
	got := map[string]string{
		"the answer":          string(b),
		"the answer's header": resp.Header.Get("X-Echo"),
		"the 103's header":    strings.Join(early, "\n"),
		"the echo":            echo,
	}
	for where, text := range got {
		for i, leak := range b64Forms(user + git.real) {
			if strings.Contains(text, leak) {
				t.Errorf("%s holds the value's Basic credential (form %d): %q", where, i, text)
			}
		}
		if !strings.Contains(text, base64Std(user+git.ph)) {
			t.Errorf("%s does not hold the placeholder's Basic credential: %q", where, text)
		}
	}

	// A value with bytes a form and JSON escape, written into a token
	// body: the echo holds its escaped forms.
	real := "sk-" + randomText(20) + "/&+<" + randomText(20)
	ph, err := auth.Placeholder(real)
	if err != nil {
		t.Fatal(err)
	}
	f.masks.Set(Secret{Name: "env:ODD_TOKEN", Placeholder: ph, Hosts: []string{boundHost + ":" + f.port}, TokenPaths: []string{"/echo-token"},
		Value: func() (string, error) { return real, nil }})
	jsonEsc := func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }
	for _, body := range []struct{ ctype, body, want string }{
		{"application/x-www-form-urlencoded", "token=" + url.QueryEscape(ph), "token=" + url.QueryEscape(ph)},
		{"application/json", `{"token":"` + ph + `"}`, `{"token":"` + jsonEsc(ph) + `"}`},
	} {
		_, echo := do(t, c, "POST", f.url(boundHost, "/echo-token"), http.Header{"Content-Type": {body.ctype}}, body.body)
		if seen, _ := f.origin.last("/echo-token"); !strings.Contains(seen.body, url.QueryEscape(real)) && !strings.Contains(seen.body, jsonEsc(real)) {
			t.Fatalf("%s: the origin got %q, not the value", body.ctype, seen.body)
		}
		for _, leak := range []string{real, url.QueryEscape(real), jsonEsc(real), strings.ReplaceAll(jsonEsc(real), "/", `\/`)} {
			if strings.Contains(echo, leak) {
				t.Errorf("%s: the echo holds the value as %q: %q", body.ctype, leak, echo)
			}
		}
		if !strings.Contains(echo, body.want) {
			t.Errorf("%s: the echo does not hold the placeholder as the proxy wrote the value (%q): %q", body.ctype, body.want, echo)
		}
	}
}

// TestMaskedOwnAnswers (issue 44): an answer the proxy cannot read, which
// quotes the value the proxy sent, is answered by the proxy without it;
// the detail goes to the operator's log, with the placeholder in the
// value's place.
func TestMaskedOwnAnswers(t *testing.T) {
	f := newMaskFixture(t, nil)
	c := f.client(nil)
	bearer := f.secrets["bearer"]
	raw := func(head string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			conn, bw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			fmt.Fprintf(bw, head, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			bw.Flush()
		}
	}
	f.origin.handle("/bad-header", raw("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nAuthorization Bearer %s\r\n\r\n"))
	f.origin.handle("/bad-status", raw("HTTP/1.1 %s OK\r\nContent-Length: 0\r\n\r\n"))
	f.origin.handle("/bad-final", raw("HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\nBearer %s\r\n\r\n"))
	for _, path := range []string{"/bad-header", "/bad-status", "/bad-final"} {
		resp, body := do(t, c, "GET", f.url(boundHost, path), http.Header{"Authorization": {"Bearer " + bearer.ph}}, "")
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("%s: %d %q, want 502", path, resp.StatusCode, body)
		}
		var head bytes.Buffer
		resp.Header.Write(&head)
		if strings.Contains(body+head.String(), bearer.real) {
			t.Errorf("%s: the proxy's answer quotes the value: %q", path, body)
		}
	}
	log := f.logText()
	if strings.Contains(log, bearer.real) {
		t.Errorf("the log holds the value: %q", log)
	}
	if !strings.Contains(log, "malformed MIME header") || !strings.Contains(log, bearer.ph) {
		t.Errorf("the log does not hold the detail: %q", log)
	}
}

// TestMaskedPorts (issue 44): a credential is bound to its hosts on
// port 443 and on the ports named with them, no other. A host bound on
// 443 only is a blind tunnel on another port (its own certificate, the
// placeholder as sent); a placeholder sent to a port of a host that
// another credential is bound to there goes on as it is, counted.
func TestMaskedPorts(t *testing.T) {
	f := newMaskFixture(t, nil)
	c := f.client(nil)
	for _, name := range []string{"env:ON_443", "env:ON_1"} {
		real := "sk-ant-api03-" + randomText(40)
		ph, err := auth.Placeholder(real)
		if err != nil {
			t.Fatal(err)
		}
		f.origin.accepts(real)
		hosts := []string{"blind.test", boundHost}
		if name == "env:ON_1" {
			hosts = []string{"blind.test:1", boundHost + ":1"}
		}
		f.masks.Set(Secret{Name: name, Placeholder: ph, Hosts: hosts, Value: func() (string, error) { return real, nil }})
		if !f.masks.Bound("blind.test", 443) || f.masks.Bound("blind.test", 444) {
			t.Errorf("blind.test bound: %v on 443, %v on 444", f.masks.Bound("blind.test", 443), f.masks.Bound("blind.test", 444))
		}

		resp, body := do(t, c, "GET", f.url("blind.test", "/auth"), http.Header{"X-Api-Key": {ph}}, "")
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s to blind.test on the origin's port: %d %q, want the placeholder refused by the origin", name, resp.StatusCode, body)
		}
		upPool := x509.NewCertPool()
		upPool.AppendCertsFromPEM(f.upCA.PEM())
		if _, err := resp.TLS.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: "blind.test", Roots: upPool}); err != nil {
			t.Errorf("%s: blind.test on another port is not a blind tunnel: %v", name, err)
		}
		if resp, body := do(t, c, "GET", f.url(boundHost, "/auth"), http.Header{"X-Api-Key": {ph}}, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s to %s on the origin's port: %d %q, want the placeholder", name, boundHost, resp.StatusCode, body)
		}
		if seen, _ := f.origin.last("/auth"); seen.header.Get("X-Api-Key") != ph {
			t.Errorf("%s at the origin: %q, want the placeholder", name, seen.header.Get("X-Api-Key"))
		}
		f.waitRefusal(t, "the placeholder of "+name)
	}
}

// TestMaskedIssuedTokens (issue 44): a bound host's token endpoint may
// hand a token out under any name (Copilot's exchange, a GitHub App's
// installation token: "token"): each token of its answer reaches the
// jail as a placeholder of its own, which then works; the answer's
// other values, and a token-shaped value in the answer of a path that is
// no token endpoint, are kept.
func TestMaskedIssuedTokens(t *testing.T) {
	f := newMaskFixture(t, nil)
	c := f.client(nil)
	gh := "gho_" + randomText(36)
	ghPH, err := auth.Placeholder(gh)
	if err != nil {
		t.Fatal(err)
	}
	f.masks.Set(Secret{Name: "env:GH_COPILOT", Placeholder: ghPH, Hosts: []string{boundHost + ":" + f.port},
		TokenPaths: []string{"/copilot", "/installation", "/form"}, Value: func() (string, error) { return gh, nil }})
	copilot := "tid=" + strings.ToLower(randomText(32)) + ";exp=1767225600;sku=copilot_for_business_seat;proxy-ep=proxy.business.githubcopilot.com;8kp=1:" + fmt.Sprintf("%x", randomText(32))
	ghs := "ghs_" + randomText(36)
	formTok := "ghu_" + randomText(36)
	sha := "Xk9fQ2mZr7LpW3nB8vT1cY6hJ4sD0gKa"
	answers := map[string]struct{ ctype, body, real string }{
		"/copilot":            {"application/json", `{"token":"` + copilot + `","expires_at":1767225600,"refresh_in":1500,"endpoints":{"api":"https://api.business.githubcopilot.com"},"sku":"copilot_for_business_seat"}`, copilot},
		"/installation":       {"application/json", `{"token":"` + ghs + `","expires_at":"2026-01-01T00:00:00Z","permissions":{"contents":"read"},"repository_selection":"all"}`, ghs},
		"/form":               {"application/x-www-form-urlencoded", "token=" + formTok + "&expires_in=28800&scope=repo", formTok},
		"/not-a-token-answer": {"application/json", `{"id":1,"sha":"` + sha + `","node":"ghs_` + randomText(36) + `"}`, ""},
	}
	for path, a := range answers {
		f.origin.handle(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", a.ctype)
			io.WriteString(w, a.body)
		})
	}
	for path, a := range answers {
		resp, body := do(t, c, "GET", f.url(boundHost, path), nil, "")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %q", path, resp.StatusCode, body)
		}
		if a.real == "" {
			if body != a.body {
				t.Errorf("%s: %q, want it as the host sent it", path, body)
			}
			continue
		}
		if strings.Contains(body, a.real) {
			t.Errorf("%s: the jail got the issued token: %q", path, body)
		}
		i := strings.Index(a.body, a.real)
		ph := body[i : i+len(a.real)]
		if len(body) != len(a.body) || body[:i] != a.body[:i] || body[i+len(a.real):] != a.body[i+len(a.real):] || ph == a.real {
			t.Errorf("%s: %q, want the host's answer with a placeholder in the token's place", path, body)
			continue
		}
		if keep := strings.LastIndexByte(a.real, ':') + 1; ph[:keep] != a.real[:keep] {
			t.Errorf("%s: the placeholder %q does not keep the token's fields", path, ph)
		}
		// The placeholder works where the token may go.
		f.origin.accepts(a.real)
		if resp, _ := do(t, c, "GET", f.url(boundHost, "/auth"), http.Header{"Authorization": {"Bearer " + ph}}, ""); resp.StatusCode != 200 {
			t.Errorf("%s: the issued token's placeholder: %d", path, resp.StatusCode)
		}
	}
}
