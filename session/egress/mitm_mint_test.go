package egress

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/auth"
)

// minted is the secrets the proxy minted for answers of host.
func (f *maskFixture) minted() []Secret {
	var out []Secret
	for _, s := range f.masks.Secrets() {
		if strings.HasPrefix(s.Name, boundHost+" response ") {
			out = append(out, s)
		}
	}
	return out
}

// serveJSON has the origin answer path with body, as JSON.
func (o *maskOrigin) serveJSON(path string, body func(r *http.Request) string) {
	o.handle(path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body(r))
	})
}

// TestMaskedNotTokenAnswers (review of issue 44): the answer of anything
// but a token endpoint goes on as the host sent it, though a name in it
// ends in "token" (a page token, a CSRF token, a logprob's token) and an
// id in it is token-shaped. A page token the client sends back in the
// URL, where the proxy swaps no placeholder, is then the host's own, and
// the next page comes.
func TestMaskedNotTokenAnswers(t *testing.T) {
	f := newMaskFixture(t, nil)
	c := f.client(nil)
	page := "CgsI9pTq0gYQ6J3vAhIOY2F0ZWdvcnlfa2V5XzQy"
	id := "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT"
	if !auth.TokenShaped(page) || !auth.TokenShaped(id) {
		t.Fatal("the test's page token and id are not token-shaped: they test nothing")
	}
	f.origin.serveJSON("/v1beta/models", func(r *http.Request) string {
		if r.URL.Query().Get("pageToken") == page {
			return `{"models":[{"name":"models/second"}]}`
		}
		return `{"models":[{"name":"models/first"}],"nextPageToken":"` + page + `"}`
	})
	// Each request carries a credential, as an API client's do: the
	// narrower rule of what such an answer hands out (auth.HandedToken)
	// finds no token in these either.
	c = authorized(c, "Bearer "+f.secrets["bearer"].ph)
	answers := map[string]string{
		"/csrf":                `{"csrf_token":"` + randomText(40) + `","ok":true}`,
		"/v1/chat/completions": `{"id":"` + id + `","object":"chat.completion","choices":[{"logprobs":{"content":[{"token":"Hello","logprob":-0.1}]}}]}`,
		"/list":                `{"items":[],"NextToken":"` + randomText(40) + `"}`,
	}
	for path, a := range answers {
		f.origin.serveJSON(path, func(*http.Request) string { return a })
		if _, body := do(t, c, "GET", f.url(boundHost, path), nil, ""); body != a {
			t.Errorf("%s: %q, want it as the host sent it: %q", path, body, a)
		}
	}
	_, body := do(t, c, "GET", f.url(boundHost, "/v1beta/models"), nil, "")
	var first struct{ NextPageToken string }
	if err := json.Unmarshal([]byte(body), &first); err != nil || first.NextPageToken != page {
		t.Errorf("the first page: %q, want the host's page token %q", body, page)
	}
	// What a client does: the page token it got, sent back in the query.
	if _, body := do(t, c, "GET", f.url(boundHost, "/v1beta/models?pageToken="+url.QueryEscape(first.NextPageToken)), nil, ""); !strings.Contains(body, "models/second") {
		t.Errorf("the second page: %q", body)
	}
	if m := f.minted(); len(m) != 0 {
		t.Errorf("minted for answers of no token endpoint: %+v", m)
	}
}

// TestMaskedTokenNames (review of issue 44): on a token endpoint, a value
// under any name that says token (auth.TokenName: token, access_token,
// installation_token) is a token whatever its shape, in JSON and in a
// form: one definition of a token's name, not an exact list for some
// names and a shape test for the others.
func TestMaskedTokenNames(t *testing.T) {
	f := newMaskFixture(t, nil)
	c := f.client(nil)
	f.masks.Set(Secret{Name: "env:APP_TOKEN", Placeholder: "sk-" + randomText(40), Hosts: []string{boundHost + ":" + f.port},
		TokenPaths: []string{"/app/token", "/app/token-form"}, Value: func() (string, error) { return "sk-" + randomText(40), nil }})
	letters := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return 'q'
		}
		return r
	}, randomText(40)) // no digit: not credential-like
	bang := "00D" + randomText(12) + "!" + randomText(40) // a Salesforce session id's shape
	f.origin.serveJSON("/app/token", func(*http.Request) string {
		return `{"token":"` + letters + `","expires_in":3600,"token_type":"bearer"}`
	})
	f.origin.handle("/app/token-form", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-www-form-urlencoded")
		io.WriteString(w, "installation_token="+url.QueryEscape(bang)+"&expires_in=3600")
	})
	for path, real := range map[string]string{"/app/token": letters, "/app/token-form": bang} {
		resp, body := do(t, c, "POST", f.url(boundHost, path), nil, "")
		if resp.StatusCode != 200 || strings.Contains(body, real) || strings.Contains(body, url.QueryEscape(real)) {
			t.Errorf("%s: %d %q: the jail got the token", path, resp.StatusCode, body)
		}
		if !strings.Contains(body, "expires_in") {
			t.Errorf("%s: %q, want the rest of the answer as sent", path, body)
		}
	}
	if m := f.minted(); len(m) != 2 {
		t.Errorf("minted %+v, want 2", m)
	}
}

// TestMaskedTokenEndpoints (review of issue 44): a credential that lists
// its token endpoints (the registry's CLIs) mints in their answers only,
// not in one of a path merely named like one; a credential that lists
// none (a variable bound to hosts the operator named) mints in the
// answers of paths named as token endpoints are, and no other.
func TestMaskedTokenEndpoints(t *testing.T) {
	f := newMaskFixture(t, nil)
	f.masks.Set(Secret{Name: "claude accessToken", Placeholder: "sk-ant-oat01-" + randomText(40), Hosts: []string{"blind.test:" + f.port},
		TokenPaths: []string{"/v1/oauth/token"}, Value: func() (string, error) { return "sk-ant-oat01-" + randomText(40), nil }})
	answer := func(*http.Request) string {
		return `{"access_token":"sk-ant-oat01-` + randomText(48) + `","expires_in":28800}`
	}
	for _, p := range []string{"/v1/oauth/token", "/oauth/token", "/login/oauth/access_token", "/v1/messages/count_tokens"} {
		f.origin.serveJSON(p, answer)
	}
	cl := f.client(nil)
	for _, c := range []struct {
		host, path string
		mint       bool
	}{
		{"blind.test", "/v1/oauth/token", true},
		{"blind.test", "/oauth/token", false}, // not the credential's
		{"other.bound.test", "/oauth/token", true},
		{"other.bound.test", "/login/oauth/access_token", true},
		{"other.bound.test", "/v1/messages/count_tokens", false},
	} {
		before := len(f.masks.Secrets())
		_, body := do(t, cl, "POST", f.url(c.host, c.path), nil, "")
		minted := len(f.masks.Secrets()) - before
		if c.mint && minted != 1 || !c.mint && minted != 0 {
			t.Errorf("%s%s: %d minted (%q), want a placeholder: %v", c.host, c.path, minted, body, c.mint)
		}
	}
}

// TestMaskedMintBound (review of issue 44): a token endpoint that hands out
// token after token (or echoes what the jail sends it) mints at most
// maxMinted placeholders in a session. Past them the proxy answers itself
// rather than pass a token on or forget one it minted: the first token's
// placeholder still works and its value is still replaced in answers. A
// token longer than maxMintedLen is refused too.
func TestMaskedMintBound(t *testing.T) {
	f := newMaskFixture(t, nil)
	c := f.client(nil)
	f.masks.Set(Secret{Name: "env:ECHO_TOKEN", Placeholder: "sk-" + randomText(40), Hosts: []string{boundHost + ":" + f.port},
		TokenPaths: []string{"/echo-json"}, Value: func() (string, error) { return "sk-" + randomText(40), nil }})
	f.origin.handle("/echo-json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.Copy(w, r.Body)
	})
	js := http.Header{"Content-Type": {"application/json"}}
	// A token longer than any the proxy masks is not passed on either.
	long := "gho_" + strings.Repeat(randomText(64), maxMintedLen/64)
	if resp, body := do(t, c, "POST", f.url(boundHost, "/echo-json"), js, `{"access_token":"`+long+`"}`); resp.StatusCode != http.StatusBadGateway || strings.Contains(body, long) {
		t.Errorf("a token of %d bytes: %d %.80q, want the proxy's 502", len(long), resp.StatusCode, body)
	}
	var first, firstPH string
	for i := range maxMinted + 3 {
		real := "gho_" + randomText(36)
		resp, body := do(t, c, "POST", f.url(boundHost, "/echo-json"), js, `{"access_token":"`+real+`"}`)
		if strings.Contains(body, real) {
			t.Fatalf("answer %d holds the token: %q", i, body)
		}
		if i < maxMinted {
			var got struct {
				Access string `json:"access_token"`
			}
			if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &got) != nil || len(got.Access) != len(real) {
				t.Fatalf("answer %d: %d %q, want a placeholder", i, resp.StatusCode, body)
			}
			if i == 0 {
				first, firstPH = real, got.Access
			}
			continue
		}
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "jail-mcp: ") {
			t.Errorf("answer %d, past %d tokens: %d %q, want the proxy's 502", i, maxMinted, resp.StatusCode, body)
			break
		}
	}
	if n := len(f.minted()); n > maxMinted {
		t.Errorf("%d tokens minted, want at most %d", n, maxMinted)
	}
	f.waitRefusal(t, "too many tokens")
	f.origin.accepts(first)
	if resp, _ := do(t, c, "GET", f.url(boundHost, "/auth"), http.Header{"Authorization": {"Bearer " + firstPH}}, ""); resp.StatusCode != 200 {
		t.Errorf("the first token's placeholder: %d", resp.StatusCode)
	}
	if _, body := do(t, c, "GET", f.url(boundHost, "/split?v="+url.QueryEscape(first)), nil, ""); body != "before "+firstPH+" after" {
		t.Errorf("the first token in an answer: %q, want its placeholder", body)
	}
}

// authorized is c with header Authorization set to auth on every request.
func authorized(c *http.Client, auth string) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", auth)
		return c.Transport.RoundTrip(r)
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestMaskedHandedTokens (review of issue 44): a credential that lists its
// token endpoints (gh's) makes other credentials elsewhere on its hosts:
// a GitHub App's installation token, a runner's registration token, a
// GitLab personal access token. The answer of any request that carried
// the credential is read for them (a known prefix, a JWT, or a
// credential-shaped value under token, access_token, refresh_token,
// id_token): each gets a placeholder that works as the token does, the
// rest of the answer as sent. An answer to a request that carried none
// is passed as sent (the host hands nothing out for it).
func TestMaskedHandedTokens(t *testing.T) {
	f := newMaskFixture(t, nil)
	real := "gho_" + randomText(36)
	ph, err := auth.Placeholder(real)
	if err != nil {
		t.Fatal(err)
	}
	f.masks.Set(Secret{Name: "gh oauth_token", Placeholder: ph, Hosts: []string{boundHost + ":" + f.port},
		TokenPaths: []string{"/login/oauth/access_token"}, Value: func() (string, error) { return real, nil }})
	handed := map[string]string{
		"/repos/o/r/actions/runners/registration-token": "AABF3JGZDX3P5PMEXLND6TS6FCW" + "O6",
		"/app/installations/1/access_tokens":            "ghs_" + randomText(36),
		"/api/v4/users/1/personal_access_tokens":        "glpat-" + randomText(20),
		"/api/v4/oidc":                                  "eyJhbGciOiJSUzI1NiJ9." + randomText(40) + "." + randomText(43),
	}
	for path, tok := range handed {
		f.origin.serveJSON(path, func(*http.Request) string {
			return `{"id":7,"token":"` + tok + `","expires_at":"2026-12-06T01:00:00Z"}`
		})
	}
	form := "ghu_" + randomText(36)
	f.origin.handle("/form", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-www-form-urlencoded")
		io.WriteString(w, "access_token="+form+"&scope=repo")
	})
	handed["/form"] = form
	c := authorized(f.client(nil), "Bearer "+ph)
	for path, tok := range handed {
		before := len(f.minted())
		resp, body := do(t, c, "POST", f.url(boundHost, path), nil, "")
		if resp.StatusCode != 200 || strings.Contains(body, tok) || !strings.Contains(body, "expires_at") && path != "/form" {
			t.Errorf("%s: %d %q: want the token's placeholder, the rest as sent", path, resp.StatusCode, body)
		}
		if n := len(f.minted()) - before; n != 1 {
			t.Errorf("%s: %d minted, want 1", path, n)
		}
	}
	// The placeholder of the installation token works as the token.
	inst := handed["/app/installations/1/access_tokens"]
	f.origin.accepts(inst)
	_, body := do(t, c, "POST", f.url(boundHost, "/app/installations/1/access_tokens"), nil, "")
	var got struct{ Token string }
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if resp, _ := do(t, f.client(nil), "GET", f.url(boundHost, "/auth"), http.Header{"Authorization": {"Bearer " + got.Token}}, ""); resp.StatusCode != 200 {
		t.Errorf("the installation token's placeholder: %d", resp.StatusCode)
	}
	// No credential sent, nothing read for tokens.
	before := len(f.minted())
	if _, body := do(t, f.client(nil), "POST", f.url(boundHost, "/api/v4/users/1/personal_access_tokens"), nil, ""); !strings.Contains(body, `"token":"glpat-`) {
		t.Errorf("an answer to a request without a credential: %q, want it as sent", body)
	}
	if n := len(f.minted()) - before; n != 0 {
		t.Errorf("%d minted for a request that carried no credential", n)
	}
}

// TestMaskedTokenAnswerUnread (review of issue 44): a token endpoint's
// answer the proxy cannot read whole (said to be JSON but not JSON, or
// longer than it reads) is not passed on: it may hold a token.
func TestMaskedTokenAnswerUnread(t *testing.T) {
	f := newMaskFixture(t, nil)
	c := f.client(nil)
	tok := "sk-ant-oat01-" + randomText(48)
	f.origin.serveJSON("/token", func(r *http.Request) string {
		if r.URL.Query().Get("big") != "" {
			return `{"access_token":"` + tok + `","pad":"` + strings.Repeat("x", maxMaskedBody) + `"}`
		}
		return `{"access_token":"` + tok + `",` // cut short
	})
	for _, q := range []string{"", "?big=1"} {
		resp, body := do(t, c, "POST", f.url(boundHost, "/token"+q), nil, "")
		if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, tok) {
			t.Errorf("/token%s: %d %.100q, want the proxy's 502", q, resp.StatusCode, body)
		}
	}
}
