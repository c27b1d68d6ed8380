package cli

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/jail"
)

// TestChooseView: --overlay auto turns the view on where the probe passes
// and off, with the reason and what would enable it, where it does not;
// on fails closed; off never probes.
func TestChooseView(t *testing.T) {
	nested := fmt.Errorf("%w (fork/exec /proc/self/exe: no space left on device)", jail.ErrNestedUserns)
	noMount := fmt.Errorf("%w: the landlock backend cannot mount in its sandbox", jail.ErrNoOverlay)
	other := errors.New("probe the project view: a write in it failed: x")
	tests := []struct {
		mode, backend string
		probe         error
		wantOn        bool
		wantErr       string // on: the start is refused
		wantReason    []string
		wantHint      string // "" when no hint
		wantNoProbe   bool
	}{
		{mode: "auto", backend: "bwrap", wantOn: true, wantReason: []string{"--overlay auto", "bwrap mounts the project view"}},
		{mode: "on", backend: "bwrap", wantOn: true, wantReason: []string{"--overlay on"}},
		{mode: "off", backend: "bwrap", wantNoProbe: true, wantReason: []string{"--overlay off", "read-only"}},
		{mode: "auto", backend: "bwrap", probe: nested, wantReason: []string{"--overlay auto", "read-only", "user namespace", "no space left on device"}, wantHint: "AppArmor"},
		{mode: "on", backend: "bwrap", probe: nested, wantErr: "--overlay on: the sandbox refuses its session agent a user namespace"},
		{mode: "auto", backend: "landlock", probe: noMount, wantReason: []string{"landlock backend cannot mount"}, wantHint: "install bubblewrap"},
		{mode: "on", backend: "landlock", probe: noMount, wantErr: "--overlay on: --overlay needs bubblewrap"},
		{mode: "off", backend: "landlock", wantNoProbe: true, wantReason: []string{"--overlay off"}},
		{mode: "auto", backend: "bwrap", probe: other, wantReason: []string{"a write in it failed"}, wantHint: "jail-mcp doctor --overlay on"},
	}
	for _, tt := range tests {
		name := tt.mode + "/" + tt.backend
		if tt.probe != nil {
			name += "/" + tt.probe.Error()
		}
		t.Run(name, func(t *testing.T) {
			probed := false
			got, err := chooseView(tt.mode, tt.backend, func() error { probed = true; return tt.probe })
			if probed == tt.wantNoProbe {
				t.Errorf("probed %t, want %t", probed, !tt.wantNoProbe)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("err %v, want one line starting %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err %v", err)
			}
			if got.Mode != tt.mode || got.On != tt.wantOn {
				t.Errorf("mode %q on %t, want %q %t", got.Mode, got.On, tt.mode, tt.wantOn)
			}
			for _, w := range tt.wantReason {
				if !strings.Contains(got.Reason, w) {
					t.Errorf("reason %q lacks %q", got.Reason, w)
				}
			}
			if tt.wantHint == "" && got.Hint != "" || !strings.Contains(got.Hint, tt.wantHint) {
				t.Errorf("hint %q, want one with %q", got.Hint, tt.wantHint)
			}
			if line := got.String(); strings.Contains(line, "\n") || !strings.Contains(line, got.Reason) {
				t.Errorf("String() = %q: want one line with the reason", line)
			}
		})
	}
}
