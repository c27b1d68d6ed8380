package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Field is one secret value found in a credential file.
type Field struct {
	// Key is where the value is, in words that survive the CLI rewriting
	// the file: a JSON, YAML or TOML path ("claudeAiOauth.accessToken",
	// "github.com.oauth_token", "[0].token.accessToken"), a dotenv name,
	// or a git-credentials line without its secret
	// ("https://octocat@github.com").
	Key string
	// Value is the secret, as the CLI reads it (escapes decoded).
	Value string
	// Kind is "access", "refresh", "id" or "key" (an API key, a personal
	// token, any other secret): the proxy treats a refresh token apart.
	Kind string
	// Host is the host the file itself gives the value to (a
	// git-credentials line's, a gh hosts.yml entry's), else "". Such a
	// value belongs to that host, or to its CLI's Hosts when it is one.
	// A line that names a port other than 443 gives "host:port".
	Host string
}

// MaskFile returns content with each secret value replaced by ph(field),
// and the fields found, in file order. name is the file's base name: it
// and a look at content choose the format (JSON, YAML, TOML, dotenv,
// git-credentials). The result is content's length: each value is
// rewritten in place, so the file keeps its layout, and where the CLI
// wrote an escape the placeholder keeps it. A file with no secret comes
// back unchanged with no fields. What cannot be masked (a file that does
// not read in its format, a secret spelled in a way it does not read, an
// error of ph) is an error, never a file with a secret left in it.
func MaskFile(name string, content []byte, ph func(Field) (string, error)) ([]byte, []Field, error) {
	spans, err := scan(name, content)
	if err != nil {
		return nil, nil, err
	}
	if len(spans) == 0 {
		return content, nil, nil
	}
	out := bytes.Clone(content)
	fields := make([]Field, len(spans))
	type pair struct{ key, value, ph string }
	var swept []pair
	for i, s := range spans {
		p, err := ph(s.Field)
		if err != nil {
			return nil, nil, fmt.Errorf("placeholder for %s: %w", s.Key, err)
		}
		if err := fits(s.Value, p); err != nil {
			return nil, nil, fmt.Errorf("placeholder for %s: %w", s.Key, err)
		}
		raw, err := respell(content[s.start:s.end], s.Value, p, s.esc)
		if err != nil {
			return nil, nil, fmt.Errorf("placeholder for %s: %w", s.Key, err)
		}
		copy(out[s.start:s.end], raw)
		fields[i] = s.Field
		if len(s.Value) >= 8 {
			swept = append(swept, pair{s.Key, s.Value, p})
		}
	}
	// A value may also stand where no rule looked (a comment, a copy under
	// a name that is no secret's): it goes there too.
	for _, sw := range swept {
		v := []byte(sw.value)
		for i := 0; ; {
			j := bytes.Index(out[i:], v)
			if j < 0 {
				break
			}
			copy(out[i+j:], sw.ph)
			i += j + len(v)
		}
	}
	// A placeholder and what stands beside it may spell a value again
	// (one of few distinct bytes, as a test's can be): then no
	// placeholder will do.
	for _, sw := range swept {
		if sw.ph != sw.value && bytes.Contains(out, []byte(sw.value)) {
			return nil, nil, fmt.Errorf("placeholder for %s: the value is still in the file beside it", sw.key)
		}
	}
	return out, fields, nil
}

// FieldValue is the value at key in content, key being one MaskFile gave
// for a file of that name: the server reads the host file's current token
// with it when a request needs the real value.
func FieldValue(name string, content []byte, key string) (string, bool) {
	spans, err := scan(name, content)
	if err != nil {
		return "", false
	}
	for _, s := range spans {
		if s.Key == key {
			return s.Value, true
		}
	}
	return "", false
}

// span is a Field and where its value is spelled in the file.
type span struct {
	Field
	start, end int // the spelling, quotes excluded
	esc        escaping
}

// escaping is how a span's bytes spell its value.
type escaping int

const (
	plain   escaping = iota // the bytes are the value
	escaped                 // backslash escapes: JSON's, TOML's, YAML's double-quoted
	percent                 // %XX, in a URL
)

// fits checks that p can take v's place: the same length, and changed
// only in bytes that need no quoting in any of the formats (letters,
// digits, - and _).
func fits(v, p string) error {
	if len(p) != len(v) {
		return fmt.Errorf("%d bytes where the value has %d", len(p), len(v))
	}
	for i := range len(v) {
		if v[i] != p[i] && !tokenByte(p[i]) {
			return fmt.Errorf("byte %d is %q, which may need quoting", i, p[i])
		}
	}
	return nil
}

func tokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// respell spells p where raw spelled v: a byte p keeps from v keeps its
// spelling, escape included, and a changed byte is written plainly, or as
// the same kind of escape where v's was one, so the length holds.
func respell(raw []byte, v, p string, esc escaping) ([]byte, error) {
	if esc == plain {
		return []byte(p), nil
	}
	out := make([]byte, 0, len(raw))
	d := 0
	for i := 0; i < len(raw); {
		n, dec, ok := unit(raw[i:], esc)
		if !ok || d+len(dec) > len(v) {
			return nil, errors.New("the value's escapes do not read back")
		}
		was, now := v[d:d+len(dec)], p[d:d+len(dec)]
		switch {
		case was == now:
			out = append(out, raw[i:i+n]...)
		case n == len(dec):
			out = append(out, now...)
		case esc == escaped && n == 6 && len(dec) == 1:
			out = fmt.Appendf(out, `\u%04x`, now[0])
		case esc == percent && n == 3 && len(dec) == 1:
			out = fmt.Appendf(out, "%%%02X", now[0])
		default:
			return nil, fmt.Errorf("it changes the escaped %q", was)
		}
		i, d = i+n, d+len(dec)
	}
	if len(out) != len(raw) {
		return nil, errors.New("it does not keep the length of the value's spelling")
	}
	return out, nil
}

// unit reads one spelled character at the head of b: how many bytes it
// takes and what they decode to.
func unit(b []byte, esc escaping) (int, []byte, bool) {
	switch {
	case esc == percent && b[0] == '%':
		if len(b) < 3 {
			return 0, nil, false
		}
		x, err := strconv.ParseUint(string(b[1:3]), 16, 8)
		return 3, []byte{byte(x)}, err == nil
	case esc != escaped || b[0] != '\\':
		return 1, b[:1], true
	case len(b) < 2:
		return 0, nil, false
	}
	switch b[1] {
	case '"', '\\', '/':
		return 2, b[1:2], true
	case 'b':
		return 2, []byte{'\b'}, true
	case 'f':
		return 2, []byte{'\f'}, true
	case 'n':
		return 2, []byte{'\n'}, true
	case 'r':
		return 2, []byte{'\r'}, true
	case 't':
		return 2, []byte{'\t'}, true
	case 'u':
		r, ok := hex4(b[2:])
		if !ok {
			return 0, nil, false
		}
		if utf16.IsSurrogate(r) {
			// A pair reads as one character; a lone half as U+FFFD, as
			// encoding/json reads it.
			if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
				if r2, ok := hex4(b[8:]); ok {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						return 12, utf8.AppendRune(nil, d), true
					}
				}
			}
			r = utf8.RuneError
		}
		return 6, utf8.AppendRune(nil, r), true
	case 'U': // TOML
		if len(b) < 10 {
			return 0, nil, false
		}
		x, err := strconv.ParseUint(string(b[2:10]), 16, 32)
		if err != nil || !utf8.ValidRune(rune(x)) {
			return 0, nil, false
		}
		return 10, utf8.AppendRune(nil, rune(x)), true
	}
	return 0, nil, false
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	x, err := strconv.ParseUint(string(b[:4]), 16, 16)
	return rune(x), err == nil
}

// decode is the value raw spells.
func decode(raw []byte, esc escaping) (string, bool) {
	if esc == plain {
		return string(raw), true
	}
	var out []byte
	for i := 0; i < len(raw); {
		n, dec, ok := unit(raw[i:], esc)
		if !ok {
			return "", false
		}
		out = append(out, dec...)
		i += n
	}
	return string(out), true
}

// scan finds the secrets of a file.
func scan(name string, content []byte) ([]span, error) {
	base := strings.ToLower(path.Base(filepath.ToSlash(name)))
	switch formatOf(base, content) {
	case "json":
		return scanJSON(content)
	case "yaml":
		return scanYAML(content, base == "hosts.yml" || base == "hosts.yaml")
	case "toml":
		return scanTOML(content)
	case "dotenv":
		return scanDotenv(content)
	case "git-credentials":
		return scanGitCredentials(content)
	}
	return nil, nil
}

// formatOf chooses a format by the file's name, else by its first line
// that is not blank or a comment.
func formatOf(base string, content []byte) string {
	switch {
	case strings.HasSuffix(base, ".json"):
		return "json"
	case strings.HasSuffix(base, ".yml"), strings.HasSuffix(base, ".yaml"):
		return "yaml"
	case strings.HasSuffix(base, ".toml"):
		return "toml"
	case base == ".env", strings.HasPrefix(base, ".env."), strings.HasSuffix(base, ".env"):
		return "dotenv"
	case base == ".git-credentials", base == "git-credentials":
		return "git-credentials"
	}
	for line := range bytes.Lines(content) {
		l := string(bytes.TrimSpace(line))
		if l == "" || l[0] == '#' {
			continue
		}
		k, _, ok := strings.Cut(strings.TrimPrefix(l, "export "), "=")
		switch {
		case l[0] == '{', l[0] == '[' && json.Valid(content):
			return "json"
		case l[0] == '[':
			return "toml"
		case ok && envName(k):
			return "dotenv"
		case ok && !strings.ContainsAny(strings.TrimSpace(k), " \t:/"):
			return "toml"
		case strings.Contains(l, "://") && !strings.ContainsAny(l, " \t"):
			return "git-credentials"
		case strings.Contains(l, ":"):
			return "yaml"
		}
		return ""
	}
	return ""
}

func envName(s string) bool {
	for i := range len(s) {
		c := s[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '.')) {
			return false
		}
	}
	return s != ""
}

// A name that ends, normalized, in one of secretSuffixes holds a secret
// whatever it looks like (token, oauth_token, OPENAI_API_KEY,
// client_secret). opencode's "access" and "refresh" hold one when the
// value is one long word (a Copilot token has ; and = in it), and its
// "key" when the value looks generated (it also names variables there).
// A value with a known prefix, or a JWT, is a secret under any name.
var secretSuffixes = []string{"apikey", "passwd", "password", "privatekey", "secret", "token"}

// normalize folds a name's case and drops its separators, so that
// access_token, accessToken and ACCESS-TOKEN are one name.
func normalize(name string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '_', '-', '.', ' ':
			return -1
		}
		return r
	}, strings.ToLower(name))
}

func secretName(name string) bool {
	n := normalize(name)
	for _, s := range secretSuffixes {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

// credentialLike is a value shaped like a generated credential: long,
// one word of token characters, letters and digits both.
func credentialLike(v string) bool {
	if len(v) < 16 {
		return false
	}
	letter, digit := false, false
	for i := range len(v) {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			letter = true
		case c >= '0' && c <= '9':
			digit = true
		case strings.IndexByte("._~+/=-", c) < 0:
			return false
		}
	}
	return letter && digit
}

func knownPrefix(v string) string {
	for _, p := range knownPrefixes {
		if strings.HasPrefix(v, p) {
			return p
		}
	}
	return ""
}

// classify says whether the value v under the name name is a secret, and
// of which kind. Expiry times, scopes, e-mail addresses, account ids and
// token types fall through: their names are no secret's, and they do not
// look like credentials.
func classify(name, v string) (string, bool) {
	if strings.TrimSpace(v) == "" {
		return "", false
	}
	n := normalize(name)
	switch {
	case secretName(name):
	case (n == "access" || n == "refresh") && len(v) >= 16 && !strings.ContainsAny(v, " \t\r\n"):
	case (n == "key" || knownPrefix(v) != "") && credentialLike(v):
	case len(v) >= 16 && v[0] == 'e' && jwtLike(v):
	default:
		return "", false
	}
	return kindOf(n, v), true
}

// jwtLike is a JWT: a bearer token under any name (Codex's
// agent_identity).
func jwtLike(v string) bool {
	_, ok := jwtKeep(v)
	return ok
}

// kindOf tells access, refresh and id tokens from other secrets: by the
// value's prefix where it has one that says (opencode keeps a Copilot
// access token under "refresh"), else by the name.
func kindOf(n, v string) string {
	for _, p := range []string{"sk-ant-ort01-", "ghr_", "1//"} {
		if strings.HasPrefix(v, p) {
			return "refresh"
		}
	}
	for _, p := range []string{"sk-ant-oat01-", "gho_", "ghu_", "ghs_", "ya29."} {
		if strings.HasPrefix(v, p) {
			return "access"
		}
	}
	switch {
	case strings.Contains(n, "refresh"):
		return "refresh"
	case strings.HasSuffix(n, "idtoken"):
		return "id"
	case strings.Contains(n, "access"), n == "oauthtoken":
		return "access"
	}
	return "key"
}

// join is a path one name deeper.
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// jsonScan walks a valid JSON text, noting where each secret string is.
type jsonScan struct {
	b     []byte
	i     int
	spans []span
}

// scanJSON finds the secrets of a JSON file. A file that is not valid
// JSON is an error rather than a file without secrets: what cannot be
// read cannot be masked.
func scanJSON(b []byte) ([]span, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	if !json.Valid(b) {
		return nil, errors.New("reading the file as JSON: not valid JSON")
	}
	s := &jsonScan{b: b}
	s.value("", "")
	return s.spans, nil
}

func (s *jsonScan) ws() {
	for s.i < len(s.b) && strings.IndexByte(" \t\r\n", s.b[s.i]) >= 0 {
		s.i++
	}
}

// more passes the white space and commas between a collection's items,
// and reports whether an item follows; at close, the collection's end,
// it reads it and reports false.
func (s *jsonScan) more(close byte) bool {
	for {
		s.ws()
		switch s.b[s.i] {
		case close:
			s.i++
			return false
		case ',':
			s.i++
		default:
			return true
		}
	}
}

// value reads the value at s.i, at path, under name (an array's items
// are under the array's name).
func (s *jsonScan) value(path, name string) {
	s.ws()
	switch s.b[s.i] {
	case '{':
		s.i++
		for s.more('}') {
			start, end := s.str()
			key := string(s.b[start:end])
			if d, ok := decode(s.b[start:end], escaped); ok {
				key = d
			}
			s.ws()
			s.i++ // the colon
			s.value(join(path, key), key)
		}
	case '[':
		s.i++
		for n := 0; s.more(']'); n++ {
			s.value(fmt.Sprintf("%s[%d]", path, n), name)
		}
	case '"':
		start, end := s.str()
		raw := s.b[start:end]
		esc := plain
		if bytes.IndexByte(raw, '\\') >= 0 {
			esc = escaped
		}
		v, _ := decode(raw, esc)
		if kind, ok := classify(name, v); ok {
			s.spans = append(s.spans, span{Field{Key: path, Value: v, Kind: kind}, start, end, esc})
		}
	default:
		for s.i < len(s.b) && strings.IndexByte(",}] \t\r\n", s.b[s.i]) < 0 {
			s.i++
		}
	}
}

// str reads the string at s.i and returns where its contents are.
func (s *jsonScan) str() (int, int) {
	s.i++
	start := s.i
	for s.b[s.i] != '"' {
		if s.b[s.i] == '\\' {
			s.i++
		}
		s.i++
	}
	s.i++
	return start, s.i - 1
}

// lines calls f with each line of b (without its end) and where it starts.
func lines(b []byte, f func(line []byte, off int) error) error {
	off := 0
	for l := range bytes.Lines(b) {
		n := len(l)
		l = bytes.TrimSuffix(bytes.TrimSuffix(l, []byte("\n")), []byte("\r"))
		if err := f(l, off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// quoted reads a quoted value at the head of l (l[0] is the quote) on one
// line: where its contents end, and how they spell the value. A
// single-quoted value's doubled quote, in YAML, is not handled.
func quoted(l []byte) (end int, esc escaping, ok bool) {
	q := l[0]
	for i := 1; i < len(l); i++ {
		switch {
		case q == '"' && l[i] == '\\':
			esc = escaped
			i++
		case l[i] == q:
			if q == '\'' && i+1 < len(l) && l[i+1] == '\'' {
				return 0, plain, false
			}
			return i, esc, true
		}
	}
	return 0, plain, false
}

// valueAt reads the value that starts at l[i]: quoted on one line, or
// plain up to a comment. It returns the value's spelling [start, end) in
// l; ok is false for a value it cannot read.
func valueAt(l []byte, i int) (start, end int, esc escaping, ok bool) {
	if i >= len(l) {
		return i, i, plain, true
	}
	if l[i] == '"' || l[i] == '\'' {
		n, esc, ok := quoted(l[i:])
		if !ok {
			return i, i, plain, false
		}
		return i + 1, i + n, esc, true
	}
	end = len(l)
	for j := i; j < len(l); j++ {
		if l[j] == '#' && j > 0 && (l[j-1] == ' ' || l[j-1] == '\t') {
			end = j
			break
		}
	}
	for end > i && (l[end-1] == ' ' || l[end-1] == '\t') {
		end--
	}
	return i, end, plain, true
}

// secretAt reads the value that starts at l[i] (l at off in the file)
// under the key name, and returns its span if it is a secret's. A value
// it cannot read is passed over, or under a secret's name is notRead's
// error.
func secretAt(l []byte, off, i int, name string, notRead func() error) (*span, error) {
	start, end, esc, ok := valueAt(l, i)
	v, ok2 := decode(l[start:end], esc)
	if !ok || !ok2 {
		if secretName(name) {
			return nil, notRead()
		}
		return nil, nil
	}
	kind, ok := classify(name, v)
	if !ok {
		return nil, nil
	}
	return &span{Field{Key: name, Value: v, Kind: kind}, off + start, off + end, esc}, nil
}

// scanYAML finds the secrets of a YAML file of mappings, such as gh's
// hosts.yml, line by line. Sequences, flow collections, block scalars and
// values over several lines are not looked into, but one under a secret's
// name is an error. In a hosts file the top-level keys are hosts.
func scanYAML(b []byte, hosts bool) ([]span, error) {
	type level struct {
		indent int
		key    string
	}
	var stack []level
	var spans []span
	block := -1 // the indent of a block scalar's key: deeper lines are its text
	n := 0
	err := lines(b, func(l []byte, off int) error {
		n++
		indent := 0
		for indent < len(l) && l[indent] == ' ' {
			indent++
		}
		rest := l[indent:]
		if block >= 0 {
			if len(bytes.TrimSpace(rest)) == 0 || indent > block {
				return nil
			}
			block = -1
		}
		if len(rest) == 0 || rest[0] == '#' || rest[0] == '-' || bytes.HasPrefix(rest, []byte("...")) {
			return nil
		}
		key, after, ok := yamlKey(rest)
		if !ok {
			return nil
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		p := ""
		for _, s := range stack {
			p = join(p, s.key)
		}
		p = join(p, key)
		i := indent + after
		for i < len(l) && (l[i] == ' ' || l[i] == '\t') {
			i++
		}
		if i == len(l) || l[i] == '#' {
			stack = append(stack, level{indent, key})
			return nil
		}
		switch l[i] {
		case '|', '>':
			block = indent
			if secretName(key) {
				return fmt.Errorf("reading the YAML file: line %d: a block scalar under %q is not read", n, key)
			}
			return nil
		case '{', '[', '&', '*', '!':
			return nil
		}
		sp, err := secretAt(l, off, i, key, func() error {
			return fmt.Errorf("reading the YAML file: line %d: the value of %q is not read", n, key)
		})
		if sp == nil || err != nil {
			return err
		}
		sp.Key = p
		if hosts && len(stack) > 0 {
			sp.Host = strings.ToLower(stack[0].key)
		}
		spans = append(spans, *sp)
		return nil
	})
	return spans, err
}

// yamlKey reads a mapping key at the head of l: the key, and where the
// text after its colon starts.
func yamlKey(l []byte) (string, int, bool) {
	if l[0] == '"' || l[0] == '\'' {
		n, _, ok := quoted(l)
		if !ok || n+1 >= len(l) || l[n+1] != ':' || n+2 < len(l) && l[n+2] != ' ' && l[n+2] != '\t' {
			return "", 0, false
		}
		return string(l[1:n]), n + 2, true
	}
	for i := range len(l) {
		switch {
		case l[i] == '#' && i > 0 && l[i-1] == ' ':
			return "", 0, false
		case l[i] == ':' && (i+1 == len(l) || l[i+1] == ' ' || l[i+1] == '\t'):
			return strings.TrimSpace(string(l[:i])), i + 1, i > 0
		}
	}
	return "", 0, false
}

// scanDotenv finds the secrets of a dotenv file: NAME=value lines,
// "export " allowed, values plain, single- or double-quoted on one line.
func scanDotenv(b []byte) ([]span, error) {
	var spans []span
	n := 0
	err := lines(b, func(l []byte, off int) error {
		n++
		i := 0
		for i < len(l) && (l[i] == ' ' || l[i] == '\t') {
			i++
		}
		if bytes.HasPrefix(l[i:], []byte("export ")) {
			i += len("export ")
		}
		eq := bytes.IndexByte(l[i:], '=')
		if eq < 0 {
			return nil
		}
		name := strings.TrimSpace(string(l[i : i+eq]))
		if !envName(name) {
			return nil
		}
		i += eq + 1
		for i < len(l) && (l[i] == ' ' || l[i] == '\t') {
			i++
		}
		sp, err := secretAt(l, off, i, name, func() error {
			return fmt.Errorf("reading the dotenv file: line %d: the value of %s is not read", n, name)
		})
		if sp != nil {
			spans = append(spans, *sp)
		}
		return err
	})
	return spans, err
}

// scanGitCredentials finds the secrets of a git credential store: one URL
// a line, scheme://user:password@host[/path], user and password
// percent-encoded. The password is the secret (but x-oauth-basic, the
// stand-in GitHub takes beside a token in the user), or a user that is a
// known kind of token.
func scanGitCredentials(b []byte) ([]span, error) {
	var spans []span
	n := 0
	err := lines(b, func(l []byte, off int) error {
		n++
		s := string(l)
		scheme, rest, ok := strings.Cut(s, "://")
		if !ok || strings.ContainsAny(scheme, " \t#") {
			return nil
		}
		authEnd := len(rest)
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			authEnd = i
		}
		at := strings.LastIndexByte(rest[:authEnd], '@')
		if at < 0 {
			return nil
		}
		userinfo, hostport, tail := rest[:at], rest[at+1:authEnd], rest[authEnd:]
		host := strings.ToLower(hostport)
		if h, _, ok := strings.Cut(strings.TrimPrefix(host, "["), "]"); strings.HasPrefix(host, "[") && ok {
			host = h
		} else if i := strings.LastIndexByte(host, ':'); i >= 0 {
			// A port of its own is the value's only port (issue 44):
			// host:port, as --mask names one; 443 goes without.
			if host[i+1:] == "443" || host[i+1:] == "" {
				host = host[:i]
			}
		}
		base := off + len(scheme) + len("://")
		user, pass, hasPass := strings.Cut(userinfo, ":")
		read := func(raw string) (string, escaping, error) {
			esc := plain
			if strings.Contains(raw, "%") {
				esc = percent
			}
			v, ok := decode([]byte(raw), esc)
			if !ok {
				return "", esc, fmt.Errorf("reading the credential store: line %d: a bad %%-escape", n)
			}
			return v, esc, nil
		}
		u, uesc, err := read(user)
		if err != nil {
			return err
		}
		if knownPrefix(u) != "" && credentialLike(u) {
			spans = append(spans, span{Field{Key: scheme + "://*@" + hostport + tail, Value: u, Kind: kindOf("", u), Host: host}, base, base + len(user), uesc})
		}
		if !hasPass || pass == "" || pass == "x-oauth-basic" {
			return nil
		}
		v, pesc, err := read(pass)
		if err != nil {
			return err
		}
		start := base + len(user) + 1
		spans = append(spans, span{Field{Key: scheme + "://" + user + "@" + hostport + tail, Value: v, Kind: kindOf("", v), Host: host}, start, start + len(pass), pesc})
		return nil
	})
	return spans, err
}

// tomlScan reads a TOML file, noting where each secret string is.
type tomlScan struct {
	b     []byte
	i     int
	spans []span
}

// scanTOML finds the secrets of a TOML file, such as kimi's config.toml:
// key = value under [table] and [[array]] headers, dotted and quoted keys,
// inline tables and arrays. A multi-line string under a secret's name is
// an error, as is a file it cannot read.
func scanTOML(b []byte) ([]span, error) {
	s := &tomlScan{b: b}
	if err := s.file(); err != nil {
		return nil, fmt.Errorf("reading the TOML file: line %d: %w", bytes.Count(b[:min(s.i, len(b))], []byte("\n"))+1, err)
	}
	return s.spans, nil
}

func (s *tomlScan) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// blank skips spaces and tabs, and also line ends and comments when
// lines is set.
func (s *tomlScan) blank(lines bool) {
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == ' ' || c == '\t':
			s.i++
		case lines && (c == '\n' || c == '\r'):
			s.i++
		case lines && c == '#':
			for s.i < len(s.b) && s.b[s.i] != '\n' {
				s.i++
			}
		default:
			return
		}
	}
}

// end reads the rest of a line: blanks and a comment.
func (s *tomlScan) end() error {
	s.blank(false)
	if s.peek() == '#' {
		for s.i < len(s.b) && s.b[s.i] != '\n' {
			s.i++
		}
	}
	if s.peek() == '\r' {
		s.i++
	}
	if s.i < len(s.b) && s.b[s.i] != '\n' {
		return fmt.Errorf("unexpected %q", s.b[s.i])
	}
	s.i++
	return nil
}

func (s *tomlScan) file() error {
	table := ""
	arrays := map[string]int{}
	for s.i < len(s.b) {
		s.blank(true)
		if s.i >= len(s.b) {
			break
		}
		if s.peek() == '[' {
			double := s.i+1 < len(s.b) && s.b[s.i+1] == '['
			s.i++
			if double {
				s.i++
			}
			keys, err := s.key()
			if err != nil {
				return err
			}
			for range 1 + btoi(double) {
				if s.peek() != ']' {
					return errors.New("a table header without its ]")
				}
				s.i++
			}
			table = strings.Join(keys, ".")
			if double {
				n := arrays[table]
				arrays[table]++
				table = fmt.Sprintf("%s[%d]", table, n)
			}
		} else {
			if err := s.pair(table, 0, "a key without ="); err != nil {
				return err
			}
		}
		if err := s.end(); err != nil {
			return err
		}
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// key reads a dotted key, bare or quoted parts, and the blanks after it.
func (s *tomlScan) key() ([]string, error) {
	var keys []string
	for {
		s.blank(false)
		switch c := s.peek(); c {
		case '"', '\'':
			n, esc, ok := quoted(s.b[s.i:])
			if !ok {
				return nil, errors.New("a quoted key without its end")
			}
			k, ok := decode(s.b[s.i+1:s.i+n], esc)
			if !ok {
				return nil, errors.New("a bad escape in a key")
			}
			keys = append(keys, k)
			s.i += n + 1
		default:
			start := s.i
			for s.i < len(s.b) && strings.IndexByte(" \t\r\n.=[]#\"',{}", s.b[s.i]) < 0 {
				s.i++
			}
			if s.i == start {
				return nil, errors.New("a missing key")
			}
			keys = append(keys, string(s.b[start:s.i]))
		}
		s.blank(false)
		if s.peek() != '.' {
			return keys, nil
		}
		s.i++
	}
}

// pair reads a key, its = and its value, the key's path below under;
// noEq is the error of a key without =.
func (s *tomlScan) pair(under string, depth int, noEq string) error {
	keys, err := s.key()
	if err != nil {
		return err
	}
	if s.peek() != '=' {
		return errors.New(noEq)
	}
	s.i++
	return s.value(join(under, strings.Join(keys, ".")), keys[len(keys)-1], depth)
}

// value reads the value at s.i, at path, under name.
func (s *tomlScan) value(path, name string, depth int) error {
	if depth > 64 {
		return errors.New("values nested too deep")
	}
	s.blank(false)
	rest := s.b[s.i:]
	switch {
	case bytes.HasPrefix(rest, []byte(`"""`)), bytes.HasPrefix(rest, []byte(`'''`)):
		if secretName(name) {
			return fmt.Errorf("a multi-line string under %q is not read", name)
		}
		q := rest[:3]
		i := 3
		for ; i < len(rest); i++ {
			if rest[i] == '\\' && q[0] == '"' {
				i++
				continue
			}
			if bytes.HasPrefix(rest[i:], q) {
				break
			}
		}
		if i >= len(rest) {
			return errors.New("a multi-line string without its end")
		}
		// The closing quotes may follow up to two quotes of the text.
		j := i
		for j < len(rest) && rest[j] == q[0] && j-i < 5 {
			j++
		}
		s.i += j
		return nil
	case len(rest) > 0 && (rest[0] == '"' || rest[0] == '\''):
		line := rest
		if j := bytes.IndexByte(line, '\n'); j >= 0 {
			line = line[:j]
		}
		n, esc, ok := quoted(line)
		if !ok {
			return errors.New("a string without its end")
		}
		start, end := s.i+1, s.i+n
		v, ok := decode(s.b[start:end], esc)
		if !ok {
			return errors.New("a bad escape in a string")
		}
		if kind, ok := classify(name, v); ok {
			s.spans = append(s.spans, span{Field{Key: path, Value: v, Kind: kind}, start, end, esc})
		}
		s.i = end + 1
		return nil
	case len(rest) > 0 && rest[0] == '{':
		s.i++
		for {
			s.blank(true)
			switch s.peek() {
			case '}':
				s.i++
				return nil
			case ',':
				s.i++
				continue
			}
			if err := s.pair(path, depth+1, "an inline table's key without ="); err != nil {
				return err
			}
			s.blank(true)
			if c := s.peek(); c != ',' && c != '}' {
				return errors.New("an inline table without its }")
			}
		}
	case len(rest) > 0 && rest[0] == '[':
		s.i++
		for n := 0; ; n++ {
			s.blank(true)
			if s.peek() == ']' {
				s.i++
				return nil
			}
			if err := s.value(fmt.Sprintf("%s[%d]", path, n), name, depth+1); err != nil {
				return err
			}
			s.blank(true)
			switch s.peek() {
			case ',':
				s.i++
			case ']':
			default:
				return errors.New("an array without its ]")
			}
		}
	}
	start := s.i
	for s.i < len(s.b) && strings.IndexByte(",]}#\r\n", s.b[s.i]) < 0 {
		s.i++
	}
	if len(bytes.TrimSpace(s.b[start:s.i])) == 0 {
		return errors.New("a missing value")
	}
	return nil
}
