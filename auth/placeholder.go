package auth

import (
	"crypto/rand"
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
// letter for one; any other byte kept: dashes, dots, underscores, the
// JWT's dots), drawn at random. Two calls give two placeholders.
func Placeholder(secret string) (string, error) {
	if len(secret) < 8 {
		return "", errors.New("a secret shorter than 8 bytes has no placeholder that cannot be guessed")
	}
	head := ""
	for _, p := range knownPrefixes {
		if strings.HasPrefix(secret, p) {
			head = p
			break
		}
	}
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
