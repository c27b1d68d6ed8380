package auth

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// TestPlaceholderShape: a placeholder keeps the secret's prefix, length
// and character classes, differs from it and from another placeholder.
func TestPlaceholderShape(t *testing.T) {
	for _, secret := range []string{
		"sk-ant-oat01-AbCdEf0123456789_xyzXYZ-0123456789abcdefABCDEF",
		"ghp_0123456789abcdefABCDEF0123456789abcd",
		"github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
		"ya29.a0AfH6SMBx-abc.def_GHI",
		"AIzaSyA-0123456789abcdefghijklmnopqrstu",
		"plainsecretvalue123",
		fakes["idjwt"],
	} {
		p, err := Placeholder(secret)
		if err != nil {
			t.Fatalf("%q: %v", secret, err)
		}
		q, _ := Placeholder(secret)
		if p == secret || p == q || len(p) != len(secret) {
			t.Errorf("%q: placeholder %q (another %q)", secret, p, q)
		}
		for _, pre := range knownPrefixes {
			if strings.HasPrefix(secret, pre) {
				if !strings.HasPrefix(p, pre) {
					t.Errorf("%q: placeholder %q lost the prefix %q", secret, p, pre)
				}
				break
			}
		}
		if _, jwt := jwtKeep(secret); jwt {
			continue // TestPlaceholderJWT
		}
		for i := range secret {
			if class(secret[i]) != class(p[i]) {
				t.Errorf("%q: placeholder %q differs in kind at %d", secret, p, i)
				break
			}
		}
	}
	for _, weak := range []string{"short", "sk-ant-oat01-ab", "--------........"} {
		if _, err := Placeholder(weak); err == nil {
			t.Errorf("%q: a placeholder", weak)
		}
	}
}

func class(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return 1
	case c >= 'a' && c <= 'z':
		return 2
	case c >= 'A' && c <= 'Z':
		return 3
	}
	return int(c) + 4
}

// TestPlaceholderJWT: a JWT's placeholder keeps its header and claims,
// which clients decode, and only its signature differs; claims that hold
// a secret are not kept.
func TestPlaceholderJWT(t *testing.T) {
	enc := base64.RawURLEncoding.EncodeToString
	head := enc([]byte(`{"alg":"RS256","typ":"JWT"}`))
	for _, secret := range []string{fakes["idjwt"], fakes["atjwt"], fakes["gidjwt"], fakes["kjwt"]} {
		p, err := Placeholder(secret)
		if err != nil {
			t.Fatal(err)
		}
		i := strings.LastIndexByte(secret, '.')
		if len(p) != len(secret) || p[:i+1] != secret[:i+1] || p[i+1:] == secret[i+1:] {
			t.Errorf("placeholder %q of %q", p, secret)
		}
		if strings.Trim(p[i+1:], base64url) != "" {
			t.Errorf("signature %q is not base64url", p[i+1:])
		}
		parts := strings.Split(p, ".")
		claims, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil || !json.Valid(claims) {
			t.Errorf("the placeholder's claims do not read: %v", err)
		}
	}

	// Codex's agent identity: a private key among the claims.
	secret := head + "." + enc([]byte(`{"agent_runtime_id":"r1","agent_private_key":"MC4CAQAwBQYDK2VwBCIEIJ"}`)) + "." + strings.Repeat("Sig0", 11)
	p, err := Placeholder(secret)
	if err != nil {
		t.Fatal(err)
	}
	claims := strings.Split(secret, ".")[1]
	if len(p) != len(secret) || !strings.HasPrefix(p, head+".") || strings.Count(p, ".") != 2 || strings.Contains(p, claims[8:]) {
		t.Errorf("the claims with a private key were kept: %q", p)
	}

	for _, notJWT := range []string{
		"ya29.a0AfH6SMBx-abc.def_GHI",                            // three parts, the first not JSON
		enc([]byte(`[1,2]`)) + "." + enc([]byte(`{}`)) + ".Sig0", // header not an object
		head + "." + enc([]byte(`{"a":1}`)) + ".",                // no signature
		head + ".e30.Sig0Sig0.more",                              // four parts
	} {
		if _, ok := jwtKeep(notJWT); ok {
			t.Errorf("%q taken for a JWT", notJWT)
		}
	}
	if _, err := Placeholder(head + ".e30.Sig0"); err == nil {
		t.Error("a JWT with a 4-character signature got a placeholder")
	}
}
