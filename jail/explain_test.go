//go:build linux

package jail

import (
	"io/fs"
	"strings"
	"testing"
)

func TestExplainBwrap(t *testing.T) {
	const msg = "bwrap: setting up uid map: Permission denied\nsecond line"
	tests := []struct {
		name       string
		files      map[string]string
		wantReason string // suffix after the first line of msg
		wantHint   string
	}{
		{
			name:       "apparmor restricts userns",
			files:      map[string]string{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1"},
			wantReason: "; AppArmor restricts unprivileged user namespaces",
			wantHint:   "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0",
		},
		{
			name:       "apparmor with trailing newline",
			files:      map[string]string{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1\n"},
			wantReason: "; AppArmor restricts unprivileged user namespaces",
			wantHint:   "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0",
		},
		{
			name: "apparmor allows, clone disabled",
			files: map[string]string{
				"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "0",
				"/proc/sys/kernel/unprivileged_userns_clone":             "0",
			},
			wantReason: "; unprivileged user namespaces are disabled",
			wantHint:   "sudo sysctl -w kernel.unprivileged_userns_clone=1",
		},
		{
			name:       "no user namespaces",
			files:      map[string]string{"/proc/sys/user/max_user_namespaces": "0\n"},
			wantReason: "; user namespaces are disabled",
			wantHint:   "sudo sysctl -w user.max_user_namespaces=15000",
		},
		{
			name: "all open",
			files: map[string]string{
				"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "0",
				"/proc/sys/kernel/unprivileged_userns_clone":             "1",
				"/proc/sys/user/max_user_namespaces":                     "15000",
			},
		},
		{name: "nothing readable", files: map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{ReadFile: func(name string) ([]byte, error) {
				if v, ok := tt.files[name]; ok {
					return []byte(v), nil
				}
				return nil, fs.ErrNotExist
			}}
			reason, hint := explainBwrap(msg, opts)
			if hint != tt.wantHint {
				t.Errorf("hint %q, want %q", hint, tt.wantHint)
			}
			wantReason := "bubblewrap cannot create its sandbox here: bwrap: setting up uid map: Permission denied" + tt.wantReason
			if reason != wantReason {
				t.Errorf("reason %q, want %q", reason, wantReason)
			}
			if strings.Contains(reason, "\n") {
				t.Errorf("reason %q spans lines", reason)
			}
		})
	}
}
