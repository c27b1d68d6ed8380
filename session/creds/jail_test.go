package creds

import (
	"log/slog"
	"os"
	"slices"
	"testing"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/jail"
)

// TestOpenChooses: the way of each CLI's files and the session's masking
// are chosen when the session opens: masked copies for the CLIs --mask
// names, the host's files for the others, and nothing masked beyond them
// when --mask is empty.
func TestOpenChooses(t *testing.T) {
	for _, c := range []struct {
		mask   string
		masked []string
	}{
		{mask: ""},
		{mask: "claude", masked: []string{"claude"}},
		{mask: "all", masked: []string{"claude", "gh"}},
	} {
		t.Run(c.mask, func(t *testing.T) {
			enabled := []string{"claude", "gh"}
			m, err := auth.ParseMask(c.mask)
			if err != nil {
				t.Fatal(err)
			}
			mc, err := ResolveMask(m, enabled, nil)
			if err != nil {
				t.Fatal(err)
			}
			dir := canonTempDir(t)
			root, err := os.OpenRoot(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { root.Close() })
			home := canonTempDir(t)
			getenv := func(string) string { return "" }
			h, err := New(Config{Home: home, Getenv: getenv, Auth: enabled, Mask: mc, Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			j := h.Open(root, dir, "s")
			for _, n := range enabled {
				_, isMasked := j.way(n).(*maskedWay)
				if want := slices.Contains(c.masked, n); isMasked != want {
					t.Errorf("%s: masked way %t, want %t", n, isMasked, want)
				}
			}
			_, masks := j.mask.(*sessionMask)
			if want := len(c.masked) > 0; masks != want || (j.Masks() != nil) != want {
				t.Errorf("session masking %t, table %v; want %t", masks, j.Masks(), want)
			}
			if info := j.MaskInfo(); info.Credentials == nil || len(info.Credentials) != len(c.masked) {
				t.Errorf("MaskInfo credentials %v, want %d", info.Credentials, len(c.masked))
			}
			env, proxied, err := j.Call([]string{"A=1"})
			if err != nil || proxied != (len(c.masked) > 0) || env[0] != "A=1" {
				t.Errorf("Call: %q %t %v", env, proxied, err)
			}
			// The links a backend places lead to the host paths of the
			// CLIs that are not masked; the masked ones' are unread.
			var plain []string
			for _, n := range enabled {
				if !slices.Contains(c.masked, n) {
					plain = append(plain, n)
				}
			}
			exps := []auth.Exposure{{Name: "claude"}, {Name: "gh"}}
			if got, want := h.LinkedPaths(exps), canonical(auth.EnabledPaths(plain, home, getenv)); !slices.Equal(got, want) {
				t.Errorf("LinkedPaths = %q, want %q", got, want)
			}
			if got, want := h.MaskedPaths(), canonical(auth.EnabledPaths(c.masked, home, getenv)); !equalSets(got, want) {
				t.Errorf("MaskedPaths = %q, want %q", got, want)
			}
		})
	}
}

func canonical(paths []string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, jail.CanonicalPath(p))
	}
	return out
}

func equalSets(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}
