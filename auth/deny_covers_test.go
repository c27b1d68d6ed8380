package auth

import "testing"

func TestDenyCovers(t *testing.T) {
	d := Deny{
		Paths: []string{"/h/.ssh", "/p/*.env", "/p/conf/secret.txt"},
		Shown: []string{"/h/.ssh/known_hosts"},
	}
	for p, want := range map[string]bool{
		"/h/.ssh":             true,
		"/h/.ssh/id_ed25519":  true,
		"/h/.ssh/known_hosts": false,
		"/h/.sshx":            false,
		"/p/a.env":            true,
		"/p/a.env/inner":      true,
		"/p/sub/a.env":        false,
		"/p/a.txt":            false,
		"/p/conf/secret.txt":  true,
		"/p/conf/other.txt":   false,
	} {
		if got := d.Covers(p); got != want {
			t.Errorf("Covers(%q) = %v, want %v", p, got, want)
		}
	}
}
