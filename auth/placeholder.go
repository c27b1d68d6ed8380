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
// at random. Of Copilot's signed fields it keeps the fields and draws
// the signature (signedKeep). Of a JWT it keeps the header and the claims, which clients
// read (Codex takes the account, plan and expiry from its id_token), and
// draws the signature of base64url characters; claims that hold a secret
// are drawn too. Two calls give two placeholders.
func Placeholder(secret string) (string, error) {
	if len(secret) < 8 {
		return "", errors.New("a secret shorter than 8 bytes has no placeholder that cannot be guessed")
	}
	if keep, ok := jwtKeep(secret); ok {
		return jwtPlaceholder(secret, keep)
	}
	head := knownPrefix(secret)
	if keep, ok := signedKeep(secret); ok {
		head = secret[:keep]
	}
	p, varied, err := draw(secret, len(head), classOf)
	if err != nil {
		return "", err
	}
	if varied < 8 {
		return "", errors.New("a secret with fewer than 8 letters and digits past its prefix has no placeholder that cannot be guessed")
	}
	if p == secret {
		// Drawn the same: vanishingly rare, never handed out.
		return Placeholder(secret)
	}
	return p, nil
}

// draw keeps the first keep bytes of secret and replaces each byte after
// them by one drawn at random from set(c), or keeps it where that is "".
// varied is how many it drew.
func draw(secret string, keep int, set func(c byte) string) (p string, varied int, err error) {
	out := []byte(secret[:keep])
	for i := keep; i < len(secret); i++ {
		c := secret[i]
		from := set(c)
		if from == "" {
			out = append(out, c)
			continue
		}
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(from))))
		if err != nil {
			return "", 0, err
		}
		out = append(out, from[n.Int64()])
		varied++
	}
	return string(out), varied, nil
}

// classOf is the characters of c's class, a digit's, a lower-case
// letter's or an upper-case one's; "" for any other byte.
func classOf(c byte) string {
	switch {
	case c >= '0' && c <= '9':
		return "0123456789"
	case c >= 'a' && c <= 'z':
		return "abcdefghijklmnopqrstuvwxyz"
	case c >= 'A' && c <= 'Z':
		return "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	}
	return ""
}

// jwtKeep is how much of a JWT its placeholder keeps: the header and
// the claims with the dots after them, or the header alone when the
// claims hold a secret (Codex's agent identity carries a private key). A
// JWT is three base64url parts, the first a JSON object.
func jwtKeep(s string) (int, bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return 0, false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, base64url) != "" {
			return 0, false
		}
	}
	if !jsonObject(parts[0], nil) {
		return 0, false
	}
	var claims map[string]any
	if !jsonObject(parts[1], &claims) || holdsSecret(claims) {
		return len(parts[0]) + 1, true
	}
	return len(parts[0]) + len(parts[1]) + 2, true
}

const base64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// jsonObject says whether p is base64url for a JSON object, read into obj
// if it is not nil.
func jsonObject(p string, obj *map[string]any) bool {
	b, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return false
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil || m == nil {
		return false
	}
	if obj != nil {
		*obj = m
	}
	return true
}

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

// jwtPlaceholder keeps the first keep bytes of a JWT and its dots, and
// draws the rest of base64url characters.
func jwtPlaceholder(secret string, keep int) (string, error) {
	p, varied, err := draw(secret, keep, func(c byte) string {
		if c == '.' {
			return ""
		}
		return base64url
	})
	if err != nil {
		return "", err
	}
	if varied < 8 {
		return "", errors.New("a JWT with fewer than 8 characters past what it shows has no placeholder that cannot be guessed")
	}
	if p != secret {
		return p, nil
	}
	return jwtPlaceholder(secret, keep)
}
