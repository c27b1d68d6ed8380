package auth

import (
	"path/filepath"
	"testing"
)

// denyFamilies are, per tool, the files where it keeps a secret, as its
// own documentation or source names them (see denyHome for where each
// comes from): each must be behind an entry of the built-in list. env
// moves some of them; root are the host's, for a server run as root.
var denyFamilies = []struct {
	family string
	home   []string          // under the home
	env    map[string]string // variable -> the file it names, under /elsewhere
	root   []string
}{
	{family: "postgresql", home: []string{".pgpass"}, env: map[string]string{"PGPASSFILE": "/elsewhere/pgpass"}},
	{family: "mysql", home: []string{".my.cnf", ".mylogin.cnf"}, env: map[string]string{"MYSQL_TEST_LOGIN_FILE": "/elsewhere/mylogin.cnf"}},
	{family: "glab", home: []string{".config/glab-cli/config.yml"}, env: map[string]string{"GLAB_CONFIG_DIR": "/elsewhere/glab/config.yml"}},
	{family: "terraform", home: []string{".terraformrc", ".terraform.d/credentials.tfrc.json"}, env: map[string]string{"TF_CLI_CONFIG_FILE": "/elsewhere/terraform.rc"}},
	{family: "pulumi", home: []string{".pulumi/credentials.json"}, env: map[string]string{"PULUMI_HOME": "/elsewhere/pulumi/credentials.json"}},
	{family: "rclone", home: []string{".config/rclone/rclone.conf"}, env: map[string]string{"RCLONE_CONFIG": "/elsewhere/rclone.conf"}},
	{family: "s3cmd", home: []string{".s3cfg"}},
	{family: "kaggle", home: []string{".kaggle/kaggle.json", ".config/kaggle/kaggle.json", ".config/kaggle/access_token"}, env: map[string]string{"KAGGLE_CONFIG_DIR": "/elsewhere/kaggle/kaggle.json"}},
	{family: "huggingface", home: []string{".cache/huggingface/token", ".cache/huggingface/stored_tokens", ".huggingface/token"}, env: map[string]string{"HF_HOME": "/elsewhere/hf/token", "HF_TOKEN_PATH": "/elsewhere/hf-token"}},
	{family: "sops-age", home: []string{".config/sops/age/keys.txt"}, env: map[string]string{"SOPS_AGE_KEY_FILE": "/elsewhere/age.txt"}},
	{family: "maven", home: []string{".m2/settings-security.xml"}},
	{family: "rubygems", home: []string{".gem/credentials", ".local/share/gem/credentials"}},
	{family: "podman", home: []string{".config/containers/auth.json"}, env: map[string]string{"XDG_RUNTIME_DIR": "/elsewhere/run/containers/auth.json", "REGISTRY_AUTH_FILE": "/elsewhere/auth.json"}},
	{family: "atuin", home: []string{".local/share/atuin/history.db", ".local/share/atuin/key", ".local/share/atuin/session"}},
	{family: "thunderbird", home: []string{".thunderbird/p.default/logins.json", ".mozilla-thunderbird/p.default/key4.db", "snap/thunderbird/common/.thunderbird/p.default/key4.db"}},
	{family: "host-keys", root: []string{"/etc/ssl/private/server.key", "/etc/letsencrypt/live/example.org/privkey.pem", "/etc/letsencrypt/accounts/acme/private_key.json", "/etc/NetworkManager/system-connections/wifi.nmconnection"}},
}

// denied reports whether p is behind an entry of d: the entry itself or
// below it, the entry's last element a pattern.
func denied(d Deny, p string) bool {
	for _, e := range d.Paths {
		for q := p; ; q = filepath.Dir(q) {
			if ok, _ := filepath.Match(e, q); ok {
				return true
			}
			if q == "/" || q == "." {
				break
			}
		}
	}
	return false
}

// TestDefaultDenyFamilies: the built-in list covers every family's
// secret files, at their default places, where a variable of the
// server's environment moves them, and as root the host's.
func TestDefaultDenyFamilies(t *testing.T) {
	const home = "/home/u"
	for _, f := range denyFamilies {
		t.Run(f.family, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range f.env {
				// A variable names a directory where the file is below it.
				switch k {
				case "GLAB_CONFIG_DIR", "PULUMI_HOME", "KAGGLE_CONFIG_DIR", "HF_HOME":
					env[k] = filepath.Dir(v)
				case "XDG_RUNTIME_DIR":
					env[k] = "/elsewhere/run"
				default:
					env[k] = v
				}
			}
			d := DefaultDeny(home, len(f.root) > 0, func(k string) string { return env[k] })
			for _, rel := range f.home {
				if p := filepath.Join(home, rel); !denied(d, p) {
					t.Errorf("%s is readable", p)
				}
			}
			for k, p := range f.env {
				if !denied(d, p) {
					t.Errorf("%s (%s=%s) is readable", p, k, env[k])
				}
			}
			for _, p := range f.root {
				if !denied(d, p) {
					t.Errorf("as root, %s is readable", p)
				}
			}
		})
	}
	// Maven's settings.xml stays readable: its mirrors and proxies are
	// what a build in the jail needs (its passwords are encrypted with
	// the master key of settings-security.xml, which is denied).
	if d := DefaultDeny(home, false, func(string) string { return "" }); denied(d, filepath.Join(home, ".m2/settings.xml")) {
		t.Error("~/.m2/settings.xml is denied: Maven builds in the jail lose their mirrors")
	}
}
