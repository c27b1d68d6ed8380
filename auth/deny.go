package auth

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// DenyDefault is the name that stands, in a --deny-read list, for the
// built-in list of the host's secret files.
const DenyDefault = "default"

// denyHome is the built-in list under the server user's home: what holds
// keys, tokens, passwords and what was typed. The last element of a path
// may be a pattern (filepath.Match).
var denyHome = []string{
	// SSH: private keys and whatever else is there; known_hosts and
	// config stay readable (denyHomeShown).
	".ssh",
	".gnupg",
	// Cloud and cluster credentials.
	".aws", ".azure", ".config/gcloud", ".kube", ".docker/config.json",
	// Tokens of git, package registries and tools.
	".git-credentials", ".netrc", ".npmrc", ".pypirc", ".cargo/credentials*",
	".config/gh/hosts.yml", ".vault-token", ".terraform.d/credentials*",
	// Password managers and keyrings.
	".password-store", ".local/share/keyrings", ".config/op",
	// Browser profiles: cookies, saved passwords, sessions.
	".mozilla", ".config/google-chrome", ".config/chromium", ".config/BraveSoftware",
	"snap/firefox/common/.mozilla", "snap/chromium/common/chromium",
	// Shell and REPL histories: what the operator typed, secrets included.
	".bash_history", ".zsh_history", ".zhistory", ".histfile", ".sh_history",
	".local/share/fish/fish_history", ".python_history", ".node_repl_history",
	".psql_history", ".mysql_history", ".sqlite_history", ".irb_history",
	".pry_history", ".rediscli_history", ".Rhistory", ".lesshst", ".viminfo",
	".julia/logs/repl_history.jl",
	// Database clients' passwords. libpq's password file
	// (postgresql.org/docs/current/libpq-pgpass.html); MySQL's option
	// file, which may hold [client] password=, and mysql_config_editor's
	// login-path file (dev.mysql.com/doc/refman/8.0/en/option-files.html).
	".pgpass", ".my.cnf", ".mylogin.cnf",
	// GitLab's CLI keeps its tokens in its one config file
	// (docs.gitlab.com/cli/configuration: ~/.config/glab-cli/config.yml).
	".config/glab-cli",
	// Terraform's CLI configuration holds credentials blocks
	// (developer.hashicorp.com/terraform/cli/config/config-file: .terraformrc;
	// terraform login writes .terraform.d/credentials.tfrc.json, above).
	".terraformrc",
	// Pulumi's access tokens (pulumi.com/docs: PULUMI_HOME, by default
	// ~/.pulumi, credentials.json); the rest of ~/.pulumi is plugins.
	".pulumi/credentials.json",
	// rclone's remotes with their keys (rclone.org/docs: --config,
	// ~/.config/rclone/rclone.conf); s3cmd's keys (s3cmd --configure
	// writes ~/.s3cfg).
	".config/rclone", ".s3cfg",
	// Kaggle's API token: kaggle.json in ~/.kaggle, or in ~/.config/kaggle
	// with access_token (Kaggle/kaggle-api README, KAGGLE_CONFIG_DIR).
	".kaggle", ".config/kaggle",
	// Hugging Face's tokens: $HF_HOME/token and stored_tokens, HF_HOME
	// by default ~/.cache/huggingface (huggingface_hub's constants.py,
	// HF_TOKEN_PATH); ~/.huggingface/token before huggingface_hub 0.14.
	// The rest of the cache (models, datasets) stays readable.
	".cache/huggingface/token", ".cache/huggingface/stored_tokens", ".huggingface",
	// SOPS's age private keys (getsops.io/docs/usage/identities/age:
	// $XDG_CONFIG_HOME/sops/age/keys.txt, SOPS_AGE_KEY_FILE).
	".config/sops",
	// Maven's master password, which decrypts the server passwords of
	// settings.xml (maven.apache.org/guides/mini/guide-encryption.html).
	// settings.xml itself stays readable: its mirrors and proxies are
	// what a build in the jail needs; a plain password there is yours to
	// deny (--deny-read default,~/.m2/settings.xml).
	".m2/settings-security.xml",
	// RubyGems' API key (guides.rubygems.org: gem signin writes
	// ~/.gem/credentials, or $XDG_DATA_HOME/gem/credentials).
	".gem/credentials", ".local/share/gem/credentials",
	// Podman's and skopeo's registry logins when XDG_RUNTIME_DIR is unset
	// (podman-login(1), containers-auth.json(5)).
	".config/containers/auth.json",
	// atuin's shell history, its sync key and session (docs.atuin.sh:
	// ~/.local/share/atuin/history.db, key, session).
	".local/share/atuin",
	// Thunderbird's profiles: mail, saved passwords (profile location per
	// support.mozilla.org, Debian's older ~/.mozilla-thunderbird, the snap).
	".thunderbird", ".mozilla-thunderbird", "snap/thunderbird/common/.thunderbird",
}

// denyEnv are the variables that move a secret of denyHome elsewhere,
// each with the path below what it names ("" for the path itself).
var denyEnv = []struct{ name, below string }{
	{"PGPASSFILE", ""},
	{"MYSQL_TEST_LOGIN_FILE", ""},
	{"GLAB_CONFIG_DIR", ""},
	{"TF_CLI_CONFIG_FILE", ""},
	{"PULUMI_HOME", "credentials.json"},
	{"RCLONE_CONFIG", ""},
	{"KAGGLE_CONFIG_DIR", ""},
	{"HF_HOME", "token"},
	{"HF_HOME", "stored_tokens"},
	{"HF_TOKEN_PATH", ""},
	{"SOPS_AGE_KEY_FILE", ""},
	{"REGISTRY_AUTH_FILE", ""},
	{"XDG_RUNTIME_DIR", "containers/auth.json"},
	{"XDG_CONFIG_HOME", "glab-cli"},
	{"XDG_CONFIG_HOME", "rclone"},
	{"XDG_CONFIG_HOME", "kaggle"},
	{"XDG_CONFIG_HOME", "sops"},
	{"XDG_CONFIG_HOME", "containers/auth.json"},
	{"XDG_DATA_HOME", "gem/credentials"},
	{"XDG_DATA_HOME", "atuin"},
}

// DenyVars are the variables of the server's environment that move a
// file of the built-in list: where one names an absolute path, the list
// holds the file there too.
func DenyVars() []string {
	var out []string
	for _, e := range denyEnv {
		out = append(out, e.name)
	}
	return dedupe(out)
}

// denyHomeShown are the paths under a denied one that stay readable.
var denyHomeShown = []string{".ssh/known_hosts", ".ssh/config"}

// denyRoot is what the built-in list adds when the server runs as root,
// which can read them.
var denyRoot = []string{
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
	"/etc/ssh/ssh_host_*_key",
	// TLS private keys: Debian's ssl-cert keeps them here (its snakeoil
	// key too); certbot its account and certificate keys
	// (eff-certbot.readthedocs.io, "Where are my certificates?").
	"/etc/ssl/private", "/etc/letsencrypt",
	// NetworkManager's connections with their Wi-Fi and VPN secrets
	// (nm-settings-keyfile(5)).
	"/etc/NetworkManager/system-connections",
}

// Deny is a resolved --deny-read list.
type Deny struct {
	// Default: the built-in list is in it.
	Default bool `json:"default"`
	// Paths read as absent or refused in the jail: absolute and clean;
	// the last element may be a pattern (filepath.Match).
	Paths []string `json:"paths"`
	// Shown are paths below Paths that stay readable (~/.ssh/known_hosts).
	Shown []string `json:"shown"`
}

// DefaultDeny is the built-in list for a server whose user's home is
// home (root: the server runs as root): the home's secret files, the host
// paths of every credential the registry knows (the jail's HOME shows the
// enabled CLIs' where they belong), and as root the host's password and
// host-key files.
func DefaultDeny(home string, root bool, getenv func(string) string) Deny {
	d := Deny{Default: true}
	if filepath.IsAbs(home) {
		for _, rel := range denyHome {
			d.Paths = append(d.Paths, filepath.Join(home, rel))
		}
		for _, rel := range denyHomeShown {
			d.Shown = append(d.Shown, filepath.Join(home, rel))
		}
	}
	for _, e := range denyEnv {
		if v := getenv(e.name); filepath.IsAbs(v) {
			d.Paths = append(d.Paths, filepath.Join(v, e.below))
		}
	}
	d.Paths = append(d.Paths, CredentialPaths(home, getenv)...)
	if root {
		d.Paths = append(d.Paths, denyRoot...)
	}
	d.Paths = dedupe(d.Paths)
	return d
}

// CredentialPaths are the host paths of every credential of the
// registry, present or not: a directory with secrets gives each secret,
// any other path itself.
func CredentialPaths(home string, getenv func(string) string) []string {
	var out []string
	for _, c := range Registry {
		out = append(out, c.hostPaths(home, getenv)...)
	}
	return out
}

// hostPaths are c's credential paths on the host, as CredentialPaths.
func (c CLI) hostPaths(home string, getenv func(string) string) []string {
	var out []string
	for _, p := range c.Paths {
		if !filepath.IsAbs(home) && p.Env == "" {
			continue
		}
		h := hostPath(p, home, getenv)
		if !filepath.IsAbs(h) {
			continue
		}
		if len(p.Secrets) == 0 {
			out = append(out, h)
			continue
		}
		for _, s := range p.Secrets {
			out = append(out, filepath.Join(h, s))
		}
	}
	return out
}

// EnabledPaths are the host paths of the credentials of the named CLIs,
// present or not, as CredentialPaths gives them: what a backend that
// links a CLI's credentials into the jail must let it read (a directory
// with secrets is a private copy but for them).
func EnabledPaths(names []string, home string, getenv func(string) string) []string {
	var out []string
	for _, n := range names {
		if c, ok := Lookup(n); ok {
			out = append(out, c.hostPaths(home, getenv)...)
		}
	}
	return out
}

// ParseDeny reads a --deny-read list: comma-separated entries, each
// "default", an absolute path, a path under the server user's home
// ("~/..."), or a path of the project (relative). Only the last element
// may be a pattern. The empty list denies nothing. Paths are cleaned,
// not resolved (ResolveDeny does).
func ParseDeny(v, home, project string) (entries []string, def bool, err error) {
	if strings.TrimSpace(v) == "" {
		return nil, false, nil
	}
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		var abs string
		switch {
		case e == "":
			return nil, false, errors.New("an empty entry: name a path, or default")
		case e == DenyDefault:
			def = true
			continue
		case e == "~" || strings.HasPrefix(e, "~/"):
			if !filepath.IsAbs(home) {
				return nil, false, fmt.Errorf("%q: the server user has no home directory ($HOME)", e)
			}
			abs = filepath.Join(home, strings.TrimPrefix(e, "~"))
		case strings.HasPrefix(e, "~"):
			return nil, false, fmt.Errorf("%q: only the server user's own home (~/) is known", e)
		case filepath.IsAbs(e):
			abs = filepath.Clean(e)
		default:
			c := filepath.Clean(e)
			if c == "." || c == ".." || strings.HasPrefix(c, "../") {
				return nil, false, fmt.Errorf("%q: a relative path names a path of the project, inside it", e)
			}
			abs = filepath.Join(project, c)
		}
		dir, base := filepath.Split(abs)
		if strings.ContainsAny(dir, "*?[\\") {
			return nil, false, fmt.Errorf("%q: only the last element of a path may be a pattern", e)
		}
		if _, err := filepath.Match(base, ""); err != nil {
			return nil, false, fmt.Errorf("%q: bad pattern: %w", e, err)
		}
		if strings.ContainsAny(abs, "\x00\n") {
			return nil, false, fmt.Errorf("%q: a control character", e)
		}
		entries = append(entries, abs)
	}
	return dedupe(entries), def, nil
}

func dedupe(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range in {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// Covers reports whether no command reads the host path p (absolute and
// clean) under d: p is one of d's paths or lies below one, where a
// path's last element may be a pattern, and p is not among what d still
// shows below them. What the server reads of the host for others (a
// patch of jail_diff) keeps to the same list.
func (d Deny) Covers(p string) bool {
	for _, s := range d.Shown {
		if within(p, s) {
			return false
		}
	}
	for _, h := range d.Paths {
		dir, pat := filepath.Split(h)
		if !strings.ContainsAny(pat, "*?[\\") {
			if within(p, h) {
				return true
			}
			continue
		}
		rest, ok := strings.CutPrefix(p, dir)
		if !ok || !strings.HasSuffix(dir, "/") {
			continue
		}
		first, _, _ := strings.Cut(rest, "/")
		if m, _ := filepath.Match(pat, first); m {
			return true
		}
	}
	return false
}

// within reports whether p is dir or lies below it.
func within(p, dir string) bool {
	return dir == "/" || strings.HasPrefix(p, dir) && (len(p) == len(dir) || p[len(dir)] == '/')
}
