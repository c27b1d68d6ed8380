package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// fakes are the secrets of the fixtures, drawn from a fixed seed when the
// test starts so that no credential-shaped literal sits in the source.
var fakes = func() map[string]string {
	rng := rand.New(rand.NewPCG(31, 31))
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	draw := func(n int, set string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = set[rng.IntN(len(set))]
		}
		return string(b)
	}
	jwt := func(payload string, sig int) string {
		enc := base64.RawURLEncoding.EncodeToString
		return enc([]byte(`{"alg":"RS256","kid":"b1a8259eb07660ef23781c85b7849bfa0a1c806c","typ":"JWT"}`)) + "." +
			enc([]byte(payload)) + "." + draw(sig, alnum+"-_")
	}
	return map[string]string{
		"oat":    "sk-ant-oat01-" + draw(93, alnum+"-_") + "AA",
		"ort":    "sk-ant-ort01-" + draw(93, alnum+"-_") + "AA",
		"ya29":   "ya29.a0AeDClZ" + draw(150, alnum+"-_"),
		"g1//":   "1//0g" + draw(98, alnum+"-_"),
		"aiza":   "AIzaSy" + draw(33, alnum+"-_"),
		"gho":    "gho_" + draw(36, alnum),
		"gho2":   "gho_" + draw(36, alnum),
		"ghp":    "ghp_" + draw(36, alnum),
		"glpat":  "glpat-" + draw(20, alnum+"-_"),
		"proj":   "sk-proj-" + draw(156, alnum+"-_"),
		"sk":     "sk-" + draw(48, alnum),
		"sk2":    "sk-" + draw(48, alnum),
		"rt":     "rt_" + draw(40, alnum) + "." + draw(43, alnum+"-_"),
		"hex":    draw(64, "0123456789abcdef"),
		"lin":    "lin_oauth_" + draw(64, "0123456789abcdef"),
		"linr":   "lin_refresh_" + draw(64, "0123456789abcdef"),
		"word":   draw(40, alnum),
		"pass":   "p%40ss%2Fw0rd-" + draw(12, alnum),
		"idjwt":  jwt(`{"aud":["app_EMoamEEZ73f0CkXaXp7hrann"],"email":"octocat@example.com","exp":1767225600,"https://api.openai.com/auth":{"chatgpt_account_id":"7f3c2a1e-5b4d-4c8e-9a6f-0d1e2f3a4b5c","chatgpt_plan_type":"pro"},"iss":"https://auth.openai.com","sub":"google-oauth2|104"}`, 342),
		"atjwt":  jwt(`{"aud":["https://api.openai.com/v1"],"client_id":"app_EMoamEEZ73f0CkXaXp7hrann","exp":1768089600,"https://api.openai.com/auth":{"chatgpt_account_id":"7f3c2a1e-5b4d-4c8e-9a6f-0d1e2f3a4b5c"},"scp":["openid","profile","email","offline_access"]}`, 342),
		"gidjwt": jwt(`{"iss":"https://accounts.google.com","azp":"681255809395.apps.googleusercontent.com","email":"octocat@example.com","email_verified":true,"exp":1767225600}`, 342),
		"kjwt":   jwt(`{"user_id":"d0f1","scope":"kimi-code","exp":1767225600}`, 43),
		"agent":  jwt(`{"agent_runtime_id":"r-7","agent_private_key":"MC4CAQAwBQYDK2VwBCIEIPz","account_id":"a-1","email":"octocat@example.com","plan_type":"pro"}`, 86),
	}
}()

// fill puts the fakes into a fixture in place of their {{names}}.
func fill(s string) string {
	for k, v := range fakes {
		s = strings.ReplaceAll(s, "{{"+k+"}}", v)
	}
	return s
}

type wantField struct{ key, kind, host string }

var maskTests = []struct {
	name, file, content string
	want                []wantField
	kept                []string // non-secrets that must stay as they are
}{
	{
		name: "claude", file: ".credentials.json",
		content: `{"claudeAiOauth":{"accessToken":"{{oat}}","refreshToken":"{{ort}}","expiresAt":1767225600000,"scopes":["user:inference","user:profile","user:sessions:claude_code"],"subscriptionType":"max","rateLimitTier":"default_claude_max_20x"}}`,
		want: []wantField{
			{"claudeAiOauth.accessToken", "access", ""},
			{"claudeAiOauth.refreshToken", "refresh", ""},
		},
		kept: []string{`"expiresAt":1767225600000`, `"user:sessions:claude_code"`, `"subscriptionType":"max"`, `default_claude_max_20x`},
	},
	{
		name: "codex chatgpt", file: "auth.json",
		content: `{
  "OPENAI_API_KEY": null,
  "tokens": {
    "id_token": "{{idjwt}}",
    "access_token": "{{atjwt}}",
    "refresh_token": "{{rt}}",
    "account_id": "7f3c2a1e-5b4d-4c8e-9a6f-0d1e2f3a4b5c"
  },
  "last_refresh": "2026-11-30T09:15:42.123456Z"
}
`,
		want: []wantField{
			{"tokens.id_token", "id", ""},
			{"tokens.access_token", "access", ""},
			{"tokens.refresh_token", "refresh", ""},
		},
		kept: []string{`"OPENAI_API_KEY": null`, `"account_id": "7f3c2a1e-5b4d-4c8e-9a6f-0d1e2f3a4b5c"`, `"last_refresh": "2026-11-30T09:15:42.123456Z"`},
	},
	{
		name: "codex api key", file: "auth.json",
		content: `{"OPENAI_API_KEY":"{{proj}}","tokens":null,"last_refresh":null}`,
		want:    []wantField{{"OPENAI_API_KEY", "key", ""}},
	},
	{
		name: "codex agent identity", file: "auth.json",
		content: `{"auth_mode":"agentIdentity","OPENAI_API_KEY":null,"agent_identity":"{{agent}}"}`,
		want:    []wantField{{"agent_identity", "key", ""}},
		kept:    []string{`"auth_mode":"agentIdentity"`},
	},
	{
		name: "gemini oauth", file: "oauth_creds.json",
		content: `{
  "access_token": "{{ya29}}",
  "scope": "https://www.googleapis.com/auth/cloud-platform https://www.googleapis.com/auth/userinfo.email https://www.googleapis.com/auth/userinfo.profile openid",
  "token_type": "Bearer",
  "id_token": "{{gidjwt}}",
  "expiry_date": 1767225600000,
  "refresh_token": "{{g1//}}"
}`,
		want: []wantField{
			{"access_token", "access", ""},
			{"id_token", "id", ""},
			{"refresh_token", "refresh", ""},
		},
		kept: []string{`"token_type": "Bearer"`, `"expiry_date": 1767225600000`, `https://www.googleapis.com/auth/cloud-platform`},
	},
	{
		name: "gemini mcp tokens", file: "mcp-oauth-tokens.json",
		content: `[{"serverName":"linear","token":{"accessToken":"{{lin}}","refreshToken":"{{linr}}","tokenType":"Bearer","expiresAt":1767225600000,"scope":"read write"},"clientId":"nD2fJ1kq","tokenUrl":"https://mcp.linear.app/token","mcpServerUrl":"https://mcp.linear.app/sse","updatedAt":1767225600000}]`,
		want: []wantField{
			{"[0].token.accessToken", "access", ""},
			{"[0].token.refreshToken", "refresh", ""},
		},
		kept: []string{`"tokenType":"Bearer"`, `"clientId":"nD2fJ1kq"`, `"tokenUrl":"https://mcp.linear.app/token"`},
	},
	{
		name: "gemini env", file: ".env",
		content: "# Gemini CLI\nGEMINI_API_KEY={{aiza}}\nGOOGLE_CLOUD_PROJECT=my-project-123\nexport GOOGLE_API_KEY=\"{{aiza}}\" # the same key\n",
		want: []wantField{
			{"GEMINI_API_KEY", "key", ""},
			{"GOOGLE_API_KEY", "key", ""},
		},
		kept: []string{"GOOGLE_CLOUD_PROJECT=my-project-123\n", "# the same key"},
	},
	{
		name: "gh hosts", file: "hosts.yml",
		content: `github.com:
    users:
        octocat:
            oauth_token: {{gho}}
    git_protocol: https
    oauth_token: {{gho}}
    user: octocat
ghe.example.com:
    users:
        monalisa:
            oauth_token: "{{gho2}}" # enterprise
    oauth_token: "{{gho2}}"
    user: monalisa
`,
		want: []wantField{
			{"github.com.users.octocat.oauth_token", "access", "github.com"},
			{"github.com.oauth_token", "access", "github.com"},
			{"ghe.example.com.users.monalisa.oauth_token", "access", "ghe.example.com"},
			{"ghe.example.com.oauth_token", "access", "ghe.example.com"},
		},
		kept: []string{"    git_protocol: https\n", "    user: octocat\n", "# enterprise"},
	},
	{
		name: "git credentials", file: ".git-credentials",
		content: `https://octocat:{{ghp}}@github.com
https://oauth2:{{glpat}}@gitlab.example.com:8443
https://{{ghp}}:x-oauth-basic@github.com/octo-org/octo-repo.git
https://bob:{{pass}}@git.example.org
`,
		want: []wantField{
			{"https://octocat@github.com", "key", "github.com"},
			{"https://oauth2@gitlab.example.com:8443", "key", "gitlab.example.com:8443"},
			{"https://*@github.com/octo-org/octo-repo.git", "key", "github.com"},
			{"https://bob@git.example.org", "key", "git.example.org"},
		},
		kept: []string{"https://octocat:", "@gitlab.example.com:8443\n", ":x-oauth-basic@github.com/octo-org/octo-repo.git\n", "%40", "%2F"},
	},
	{
		name: "kimi config", file: "config.toml",
		content: `default_model = "kimi-for-coding"
default_thinking = false

[providers.kimi-for-coding]
type = "kimi"
base_url = "https://api.kimi.com/coding/v1"
api_key = "{{sk}}"

[providers."managed:kimi-code"]
type = "kimi"
base_url = "https://api.kimi.com/coding/v1"
api_key = ""
oauth = { storage = "file", key = "oauth/kimi-code" }

[models.kimi-for-coding]
provider = "kimi-for-coding"
model = "kimi-for-coding"
max_context_size = 262144

[services.moonshot_search]
base_url = "https://api.kimi.com/coding/v1/search"
api_key = '{{sk2}}' # search
custom_headers = { "X-Trace" = "on", tags = ["a", "b"] }
`,
		want: []wantField{
			{"providers.kimi-for-coding.api_key", "key", ""},
			{"services.moonshot_search.api_key", "key", ""},
		},
		kept: []string{`key = "oauth/kimi-code"`, `max_context_size = 262144`, `base_url = "https://api.kimi.com/coding/v1"`},
	},
	{
		name: "kimi oauth", file: "kimi-code.json",
		content: `{"access_token": "{{kjwt}}", "refresh_token": "{{word}}", "expires_at": 1767225600.25, "scope": "kimi-code", "token_type": "Bearer", "expires_in": 900.0}`,
		want: []wantField{
			{"access_token", "access", ""},
			{"refresh_token", "refresh", ""},
		},
		kept: []string{`"scope": "kimi-code"`, `"expires_in": 900.0`},
	},
	{
		name: "opencode", file: "auth.json",
		content: `{
  "anthropic": {
    "type": "oauth",
    "refresh": "{{ort}}",
    "access": "{{oat}}",
    "expires": 1767225600000
  },
  "openai": {
    "type": "api",
    "key": "{{sk}}"
  },
  "github-copilot": {
    "type": "oauth",
    "refresh": "{{gho}}",
    "access": "{{gho}}",
    "expires": 0
  },
  "my-gateway": {
    "type": "wellknown",
    "key": "OPENCODE_API_KEY",
    "token": "{{word}}"
  }
}`,
		want: []wantField{
			{"anthropic.refresh", "refresh", ""},
			{"anthropic.access", "access", ""},
			{"openai.key", "key", ""},
			{"github-copilot.refresh", "access", ""},
			{"github-copilot.access", "access", ""},
			{"my-gateway.token", "key", ""},
		},
		kept: []string{`"type": "oauth"`, `"key": "OPENCODE_API_KEY"`, `"expires": 0`},
	},
	{
		name: "escapes", file: "auth.json",
		content: `{"refresh_token":"1\/\/0gAbCdEfGhIjKlMnOp-QrStUvWx","access_token":"ya29.\u0041bc\u00e9DefGhIjKlMnOp\uD83D\uDE00Qr"}`,
		want: []wantField{
			{"refresh_token", "refresh", ""},
			{"access_token", "access", ""},
		},
		kept: []string{`"1\/\/`, `"ya29.\u00`, `\u00e9`, `\uD83D\uDE00`},
	},
	{
		name: "gemini accounts", file: "google_accounts.json",
		content: `{"active":"octocat@example.com","old":[]}`,
	},
	{
		name: "claude state", file: ".claude.json",
		content: `{"numStartups":12,"userID":"{{hex}}","oauthAccount":{"accountUuid":"5e0c3f4a-8b1d-4f2e-9c7a-6d5b4a3c2b1a","emailAddress":"octocat@example.com"},"hasCompletedOnboarding":true}`,
	},
	{
		name: "gh config", file: "config.yml",
		content: "version: 1\ngit_protocol: https\neditor: vim\naliases:\n    co: pr checkout\n",
	},
	{
		name: "empty", file: "auth.json",
	},
}

// TestMaskFile masks realistic credential files of each registered CLI:
// the masked file is as long as the original, reads in the same format
// with the same non-secrets, holds no secret and every placeholder,
// FieldValue finds each value by its key in both, and masking the masked
// file with the same placeholders changes nothing.
func TestMaskFile(t *testing.T) {
	for _, tt := range maskTests {
		t.Run(tt.name, func(t *testing.T) {
			content := []byte(fill(tt.content))
			phs := map[string]string{}
			out, fields, err := MaskFile(tt.file, content, func(f Field) (string, error) {
				p, err := Placeholder(f.Value)
				phs[f.Key] = p
				return p, err
			})
			if err != nil {
				t.Fatal(err)
			}
			var got []wantField
			for _, f := range fields {
				got = append(got, wantField{f.Key, f.Kind, f.Host})
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("fields\n got %v\nwant %v", got, tt.want)
			}
			if len(out) != len(content) {
				t.Errorf("masked length %d, want %d", len(out), len(content))
			}
			if len(fields) == 0 && !bytes.Equal(out, content) {
				t.Errorf("no secret, yet changed:\n%s", out)
			}
			for _, k := range tt.kept {
				if !bytes.Contains(out, []byte(fill(k))) {
					t.Errorf("lost %q:\n%s", k, out)
				}
			}
			for _, f := range fields {
				if bytes.Contains(out, []byte(f.Value)) {
					t.Errorf("%s: the secret is still in the masked file", f.Key)
				}
				if v, ok := FieldValue(tt.file, content, f.Key); !ok || v != f.Value {
					t.Errorf("%s: FieldValue of the original = %q, %v", f.Key, v, ok)
				}
				if v, ok := FieldValue(tt.file, out, f.Key); !ok || v != phs[f.Key] {
					t.Errorf("%s: FieldValue of the masked = %q, %v; want the placeholder %q", f.Key, v, ok, phs[f.Key])
				}
			}
			if _, ok := FieldValue(tt.file, content, "no.such.key"); ok {
				t.Error("FieldValue found a key that is not there")
			}
			if json.Valid(content) {
				checkJSON(t, content, out, phs)
			}
			again, fields2, err := MaskFile(tt.file, out, func(f Field) (string, error) { return phs[f.Key], nil })
			if err != nil || !bytes.Equal(again, out) || len(fields2) != len(fields) {
				t.Errorf("masking again: %v, %d fields, changed %v:\n%s", err, len(fields2), !bytes.Equal(again, out), again)
			}
		})
	}
}

// checkJSON: the masked JSON reads as the original with each secret
// replaced by its placeholder.
func checkJSON(t *testing.T, orig, masked []byte, phs map[string]string) {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(orig, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(masked, &b); err != nil {
		t.Fatalf("the masked file is not JSON: %v\n%s", err, masked)
	}
	fa, fb := map[string]any{}, map[string]any{}
	flatten("", a, fa)
	flatten("", b, fb)
	if len(fa) != len(fb) {
		t.Fatalf("the masked JSON has %d leaves, the original %d", len(fb), len(fa))
	}
	for k, v := range fa {
		want := v
		if p, ok := phs[k]; ok {
			want = p
		}
		if fmt.Sprint(fb[k]) != fmt.Sprint(want) {
			t.Errorf("%s: masked %v, want %v", k, fb[k], want)
		}
	}
}

func flatten(path string, v any, out map[string]any) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			flatten(join(path, k), x, out)
		}
	case []any:
		for i, x := range v {
			flatten(fmt.Sprintf("%s[%d]", path, i), x, out)
		}
	default:
		out[path] = v
	}
}

// TestMaskFileRefuses: what cannot be masked is an error, never a file
// handed back with its secret in it.
func TestMaskFileRefuses(t *testing.T) {
	ph := func(f Field) (string, error) { return Placeholder(f.Value) }
	tests := []struct {
		name, file, content string
		ph                  func(Field) (string, error)
		wantErr             string
	}{
		{name: "broken JSON", file: "auth.json", content: `{"access_token": "` + fakes["oat"], ph: ph, wantErr: "not valid JSON"},
		{name: "weak secret", file: "auth.json", content: `{"password": "hunter2"}`, ph: ph, wantErr: "placeholder for password"},
		{name: "placeholder error", file: ".env", content: "GH_TOKEN=" + fakes["ghp"], ph: func(Field) (string, error) { return "", errors.New("no") }, wantErr: "placeholder for GH_TOKEN: no"},
		{name: "placeholder of another length", file: ".env", content: "GH_TOKEN=" + fakes["ghp"], ph: func(Field) (string, error) { return "x", nil }, wantErr: "1 bytes where the value has 40"},
		{name: "placeholder that needs quoting", file: "a.json", content: `{"token":"` + fakes["word"] + `"}`, ph: func(f Field) (string, error) { return `"` + f.Value[1:], nil }, wantErr: "may need quoting"},
		{name: "multi-line TOML secret", file: "config.toml", content: "api_key = \"\"\"\n" + fakes["sk"] + "\"\"\"\n", ph: ph, wantErr: "multi-line string"},
		{name: "block YAML secret", file: "hosts.yml", content: "github.com:\n    oauth_token: |\n        " + fakes["gho"] + "\n", ph: ph, wantErr: "block scalar"},
		{name: "unclosed dotenv secret", file: ".env", content: "OPENAI_API_KEY=\"" + fakes["sk"] + "\n", ph: ph, wantErr: "OPENAI_API_KEY is not read"},
		{name: "bad TOML", file: "config.toml", content: "api_key = \n", ph: ph, wantErr: "line 1: a missing value"},
		{name: "bad escape", file: ".git-credentials", content: "https://bob:pa%zzss@example.org\n", ph: ph, wantErr: "line 1: a bad %-escape"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := MaskFile(tt.file, []byte(tt.content), tt.ph)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if out != nil {
				t.Errorf("an error, yet a file: %s", out)
			}
		})
	}
}

// TestFormatOf: the format follows the name, else the first line.
func TestFormatOf(t *testing.T) {
	tests := []struct{ name, content, want string }{
		{"credentials", "https://u:p@github.com\n", "git-credentials"},
		{"credentials", "# git\n\nhttps://u:p@github.com\n", "git-credentials"},
		{"creds", `{"a": 1}`, "json"},
		{"creds", `[{"a": 1}]`, "json"},
		{"creds", "[providers.x]\napi_key = \"k\"\n", "toml"},
		{"creds", "api_key = \"k\"\n", "toml"},
		{"creds", "API_KEY=k\n", "dotenv"},
		{"creds", "export API_KEY=k\n", "dotenv"},
		{"creds", "github.com:\n    oauth_token: x\n", "yaml"},
		{"creds", "just words\n", ""},
		{"HOSTS.YML", "", "yaml"},
		{".env.local", "", "dotenv"},
	}
	for _, tt := range tests {
		if got := formatOf(strings.ToLower(tt.name), []byte(tt.content)); got != tt.want {
			t.Errorf("formatOf(%q, %q) = %q, want %q", tt.name, tt.content, got, tt.want)
		}
	}
}

// FuzzMaskFile: any file masks without a panic, to its own length, with
// none of the values it found left in it.
func FuzzMaskFile(f *testing.F) {
	for _, tt := range maskTests {
		f.Add(tt.file, []byte(fill(tt.content)))
	}
	f.Fuzz(func(t *testing.T, name string, content []byte) {
		FieldValue(name, content, "access_token")
		out, fields, err := MaskFile(name, content, func(f Field) (string, error) { return Placeholder(f.Value) })
		if err != nil {
			return
		}
		if len(out) != len(content) {
			t.Fatalf("masked length %d, want %d", len(out), len(content))
		}
		for _, f := range fields {
			if bytes.Contains(out, []byte(f.Value)) {
				t.Fatalf("%s: %q is still in the masked file", f.Key, f.Value)
			}
		}
	})
}

// TestFieldValueDecodes: a value is read as the CLI reads it, escapes
// decoded.
func TestFieldValueDecodes(t *testing.T) {
	tests := []struct{ file, content, key, want string }{
		{"auth.json", `{"refresh_token":"1\/\/0gAbCdEfGhIjKl","id":"\u0041"}`, "refresh_token", "1//0gAbCdEfGhIjKl"},
		{".git-credentials", "https://bob:p%40ss%2Fw0rd-Secret-123@git.example.org\n", "https://bob@git.example.org", "p@ss/w0rd-Secret-123"},
		{"config.toml", "[a]\n\"b.c\" = { token = \"x\\u0041yzSecret123\" }\n", "a.b.c.token", "xAyzSecret123"},
		{".env", "OPENAI_API_KEY='sk-abc 123'\n", "OPENAI_API_KEY", "sk-abc 123"},
	}
	for _, tt := range tests {
		if got, ok := FieldValue(tt.file, []byte(tt.content), tt.key); !ok || got != tt.want {
			t.Errorf("FieldValue(%s, %s) = %q, %v; want %q", tt.file, tt.key, got, ok, tt.want)
		}
	}
}
