package auth

import (
	"strings"
	"testing"
)

func TestTokenShaped(t *testing.T) {
	copilot := "tid=0123456789abcdef0123456789abcdef;exp=1767225600;sku=copilot_for_business_seat;proxy-ep=proxy.business.githubcopilot.com;st=dotcom;chat=1;8kp=1:" + strings.Repeat("9f3a", 16)
	jwt := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlc2lnbmF0dXJl"
	for _, c := range []struct {
		name, v string
		want    bool
	}{
		{"expires_at", "ghs_16C7e42F292c6912E7710c838347Ae178B4a", true},
		{"x", "ghu_abcdefgh0123456789ABCDEFGHij", true},
		{"x", jwt, true},
		{"token", copilot, true},
		{"x", copilot, true},
		{"x", "Xk9fQ2mZr7LpW3nB8vT1cY6hJ4sD0gKa", true}, // 32 drawn at random
		{"token", strings.Repeat("a1b2c3d4", 5), true},  // hex under a token's name
		{"id", strings.Repeat("a1b2c3d4", 5), false},    // hex elsewhere: an id
		{"id", "123e4567-e89b-12d3-a456-426614174000", false},
		{"x", "thisIsAVeryLongIdentifierName2024Version", false},
		{"x", "https://api.github.com/copilot_internal/v2/token", false},
		{"x", "/home/user/Projects/Repo2024/src/Main123.go", false},
		{"x", "2026-01-01T00:00:00Z", false},
		{"x", "bearer", false},
		{"scope", "repo,gist,read:org", false},
		{"token", "short", true}, // handed out as a token: masked, or refused
		{"token", "", false},
		{"installation_token", "00Dxx0000001gPL!AR8AQJXg5oj8jXSgxJfA0lBog", true},
		{"x", "ghp_abc", false},
		{"x", "sk-ant-api03-0123456789", false}, // too little after the prefix
		{"x", "tid=1;exp=2:abc", false},
	} {
		if got := IssuedToken(c.name, c.v); got != c.want {
			t.Errorf("IssuedToken(%q, %q) = %v, want %v", c.name, c.v, got, c.want)
		}
	}
	ph, err := Placeholder(copilot)
	keep := strings.LastIndexByte(copilot, ':') + 1
	if err != nil || ph[:keep] != copilot[:keep] || ph == copilot || len(ph) != len(copilot) {
		t.Errorf("Placeholder(a Copilot token) = %q, %v: want its fields kept and its signature drawn", ph, err)
	}
}

func TestTokenEndpoint(t *testing.T) {
	for path, want := range map[string]bool{
		"/oauth/token": true, "/token": true, "/login/oauth/access_token": true,
		"/app/installations/1/access_tokens": true, "/oauth2/v2.0/token": true, "/api/Access-Token": true,
		"/v1/messages/count_tokens": false, "/v1beta/models/gemini:countTokens": false, "/oauth/token/info": false,
		"/v1/tokens": false, "/token/": false, "/csrf_token": false, "": false,
	} {
		if got := TokenEndpoint(path); got != want {
			t.Errorf("TokenEndpoint(%q) = %v, want %v", path, got, want)
		}
	}
}

// TestHandedToken: in the answer of a request that carried a credential,
// a known prefix or a JWT under any name, and a credential-shaped value
// under token, access_token, refresh_token or id_token, are tokens;
// words, page tokens, ids and short values are not.
func TestHandedToken(t *testing.T) {
	for _, c := range []struct {
		name, v string
		want    bool
	}{
		{"token", "AABF3JGZDX3P5PMEXLND6TS6FCWO6", true}, // a runner's registration token
		{"token", "ghs_16C7e42F292c6912E7710c838347Ae178B4a", true},
		{"anything", "glpat-xxxxxxxxxxxxxxxx1234", true},
		{"id_token", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJl", true},
		{"Refresh-Token", "a8Fk2Lm9Qp4Rs7Tu1Vw3Xy5Z", true},
		{"token", "Hello", false}, // a logprob's token
		{"token", "a sentence of many words, 42", false},
		{"nextPageToken", "CgsI9pTq0gYQ6J3vAhIOY2F0ZWdvcnlfa2V5XzQy", false},
		{"id", "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", false},
		{"token", "abcdefghijklmnopqrstuvwxyz", false}, // no digit
		{"sha", "6dcb09b5b57875f334f61aebed695e2e4193db5e", false},
	} {
		if got := HandedToken(c.name, c.v); got != c.want {
			t.Errorf("HandedToken(%q, %q) = %v, want %v", c.name, c.v, got, c.want)
		}
	}
}
