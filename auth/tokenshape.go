package auth

import "strings"

// A token endpoint may hand a token out under any name: GitHub's
// installation tokens and Copilot's exchange under "token", others under
// names of their own (issue 44). The proxy masks, in the answer of a
// token endpoint (and nowhere else: a page token or an id elsewhere is
// the client's to send back as it is), every value under a name that
// says token, and one under any other name when it is token-shaped: a
// known prefix, a JWT, a signed list of fields (Copilot's), or a long
// opaque string of random-looking characters. Words, numbers, ids (hex,
// UUIDs), URLs, paths and dates are none of these.

// TokenName reports whether name says it holds a token: token,
// access_token, accessToken, installation-token.
func TokenName(name string) bool {
	return strings.HasSuffix(normalize(name), "token")
}

// TokenEndpoint reports whether a URL path is named as a token endpoint
// is, for a credential whose own token endpoints nobody listed (a
// variable bound to hosts the operator named): its last segment is
// token, access_token or access_tokens, whatever the case and
// separators (/oauth/token, /login/oauth/access_token, a GitHub App's
// /app/installations/1/access_tokens). A count of tokens
// (/v1/messages/count_tokens, :countTokens) is no token endpoint.
func TokenEndpoint(path string) bool {
	switch normalize(path[strings.LastIndexByte(path, '/')+1:]) {
	case "token", "accesstoken", "accesstokens":
		return true
	}
	return false
}

// IssuedToken reports whether v, found under name in a token endpoint's
// answer, is a token to mask: under a name that says token, any value
// but "" (the endpoint hands it out as a token: one of an unusual shape
// is masked all the same, or refused, never passed on as it is); under
// any other name, a token-shaped one. It is the one rule of what a token
// answer's token is, for JSON and forms alike.
func IssuedToken(name, v string) bool {
	if TokenName(name) {
		return v != ""
	}
	return TokenShaped(v)
}

// HandedToken reports whether v, found under name in the answer of any
// other path to a request that carried a credential, is a credential the
// host handed out for it: a GitHub App's installation token, a runner's
// registration token, a personal access token an API created. Narrower
// than IssuedToken, as such an answer is mostly not about tokens: a
// known prefix or a JWT under any name, and under the names token,
// access_token, refresh_token and id_token a value shaped like a
// generated credential (long, one word of token characters, letters and
// digits both: a logprob's "token" is a word, a page token has a name of
// its own).
func HandedToken(name, v string) bool {
	if shaped, known := knownShape(v); known {
		return shaped
	}
	switch normalize(name) {
	case "token", "accesstoken", "refreshtoken", "idtoken":
		return credentialLike(v)
	}
	return false
}

// RefreshName reports whether name says it holds a refresh token:
// refresh_token, refreshToken, refresh-token.
func RefreshName(name string) bool {
	return normalize(name) == "refreshtoken"
}

// TokenShaped reports whether v is shaped like a credential whatever it
// is named: a known prefix with at least 16 generated characters after
// it, a JWT, Copilot's signed fields, or an opaque string of at least 32
// token characters with upper- and lower-case letters and digits mixed
// as a random draw mixes them.
func TokenShaped(v string) bool {
	if shaped, known := knownShape(v); known {
		return shaped
	}
	if _, ok := signedKeep(v); ok {
		return true
	}
	return opaque(v)
}

// knownShape is the verdict on v that needs no name and no guess, and
// whether there is one: too short or too long for a credential (no), a
// known prefix (yes, with at least 16 generated characters after it), a
// JWT (yes).
func knownShape(v string) (shaped, known bool) {
	if len(v) < 20 || len(v) > 16<<10 {
		return false, true
	}
	if p := knownPrefix(v); p != "" {
		return len(v)-len(p) >= 16 && credentialLike(v), true
	}
	if v[0] == 'e' && jwtLike(v) {
		return true, true
	}
	return false, false
}

// signedKeep is, for a token of signed fields as Copilot's exchange
// gives ("tid=...;exp=...;sku=...;8kp=1:<hex signature>"), how much its
// placeholder keeps: the fields and the colon, which clients read (the
// expiry, the endpoint); the signature, at least 32 hex digits, is
// drawn.
func signedKeep(v string) (int, bool) {
	i := strings.LastIndexByte(v, ':')
	if i < 0 || len(v)-i-1 < 32 {
		return 0, false
	}
	for j := i + 1; j < len(v); j++ {
		if c := v[j]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return 0, false
		}
	}
	fields := strings.Split(v[:i], ";")
	if len(fields) < 2 {
		return 0, false
	}
	for _, f := range fields {
		k, val, ok := strings.Cut(f, "=")
		if !ok || k == "" || strings.ContainsAny(val, " \t\r\n\"") {
			return 0, false
		}
		for j := range len(k) {
			if c := k[j]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				return 0, false
			}
		}
	}
	return i + 1, true
}

// opaque is a long string drawn at random from letters and digits (and
// the few other characters base64 and tokens use): upper and lower case
// and digits all present, and the class changing at least every third
// character, which names, words and camelCase identifiers do not do.
func opaque(v string) bool {
	if len(v) < 32 || !credentialLike(v) || v[0] == '/' || v[0] == '.' {
		return false
	}
	var upper, lower, digit, changes int
	class := func(c byte) int {
		switch {
		case c >= 'a' && c <= 'z':
			lower++
			return 1
		case c >= 'A' && c <= 'Z':
			upper++
			return 2
		case c >= '0' && c <= '9':
			digit++
			return 3
		}
		return 0
	}
	last := class(v[0])
	for i := 1; i < len(v); i++ {
		if c := class(v[i]); c != last {
			changes++
			last = c
		}
	}
	return upper >= 3 && lower >= 3 && digit >= 3 && changes*3 >= len(v)
}
