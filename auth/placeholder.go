package auth

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
)

// knownPrefixes are the fixed heads of the credential formats clients
// check: a placeholder keeps them, so that a client that looks at a
// token's kind (sk-ant-oat01- for an OAuth token, ghp_ for a classic
// GitHub one) takes the placeholder for what the secret is. Longest
// first.
var knownPrefixes = []string{
	"sk-ant-oat01-", "sk-ant-ort01-", "sk-ant-api03-", "sk-ant-admin01-",
	"github_pat_", "sk-proj-", "sk-svcacct-", "sk-admin-",
	"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "glpat-", "npm_", "pypi-",
	"xoxb-", "xoxp-", "AKIA", "ASIA", "AIza", "ya29.", "1//", "sk-",
}

// Placeholder is a stand-in for secret of the same shape: the same known
// prefix, the same length, and at each position a character of the same
// class (a digit for a digit, a lower-case letter for one, an upper-case
// letter for one; any other byte kept: dashes, dots, underscores), drawn
// at random. Of a JWT it keeps the header and the claims, which clients
// read (Codex takes the account, plan and expiry from its id_token), and
// draws a signature of base64url characters. Two calls give two
// placeholders.
func Placeholder(secret string) (string, error) {
	if len(secret) < 8 {
		return "", errors.New("a secret shorter than 8 bytes has no placeholder that cannot be guessed")
	}
	if head, ok := jwtHead(secret); ok {
		return signature(secret, head)
	}
	head := knownPrefix(secret)
	out := []byte(head)
	varied := 0
	for i := len(head); i < len(secret); i++ {
		c := secret[i]
		var set string
		switch {
		case c >= '0' && c <= '9':
			set = "0123456789"
		case c >= 'a' && c <= 'z':
			set = "abcdefghijklmnopqrstuvwxyz"
		case c >= 'A' && c <= 'Z':
			set = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		default:
			out = append(out, c)
			continue
		}
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(set))))
		if err != nil {
			return "", err
		}
		out = append(out, set[n.Int64()])
		varied++
	}
	if varied < 8 {
		return "", errors.New("a secret with fewer than 8 letters and digits past its prefix has no placeholder that cannot be guessed")
	}
	p := string(out)
	if p == secret {
		// Drawn the same: vanishingly rare, never handed out.
		return Placeholder(secret)
	}
	return p, nil
}

// jwtHead is a JWT's header and claims with the dot after them: three
// base64url parts, the first two JSON objects. A JWT whose claims hold a
// secret (Codex's agent identity carries a private key) is no JWT here:
// its placeholder keeps nothing of it.
func jwtHead(s string) (string, bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return "", false
	}
	for i, p := range parts {
		if p == "" || strings.Trim(p, base64url) != "" {
			return "", false
		}
		if i == 2 {
			break
		}
		b, err := base64.RawURLEncoding.DecodeString(p)
		var obj map[string]any
		if err != nil || json.Unmarshal(b, &obj) != nil || obj == nil || holdsSecret(obj) {
			return "", false
		}
	}
	return parts[0] + "." + parts[1] + ".", true
}

const base64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// holdsSecret says whether a name anywhere in v is a secret's.
func holdsSecret(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if secretName(k) || holdsSecret(x) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if holdsSecret(x) {
				return true
			}
		}
	}
	return false
}

// signature is head, the JWT's header and claims, and a signature drawn
// of base64url characters as long as secret's.
func signature(secret, head string) (string, error) {
	n := len(secret) - len(head)
	if n < 8 {
		return "", errors.New("a JWT with a signature shorter than 8 characters has no placeholder that cannot be guessed")
	}
	out := []byte(head)
	for range n {
		i, err := rand.Int(rand.Reader, big.NewInt(int64(len(base64url))))
		if err != nil {
			return "", err
		}
		out = append(out, base64url[i.Int64()])
	}
	if p := string(out); p != secret {
		return p, nil
	}
	return signature(secret, head)
}
