package auth

import (
	"slices"
	"strings"
	"testing"
)

func TestRegistrySorted(t *testing.T) {
	if !slices.IsSortedFunc(Registry, func(a, b CLI) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("Registry is not sorted by name: %v", Names())
	}
	seen := map[string]bool{}
	for _, c := range Registry {
		for _, n := range append([]string{c.Name}, c.Aliases...) {
			if seen[n] {
				t.Errorf("name %q appears twice", n)
			}
			seen[n] = true
		}
	}
}

func TestParseList(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "all", want: Names()},
		{in: "none", want: []string{}},
		{in: "claude", want: []string{"claude"}},
		{in: "claude-code, gh,claude", want: []string{"claude", "gh"}},
		{in: "kimi-code,claudish", want: []string{"claude", "kimi"}},
		{in: "", wantErr: "empty list"},
		{in: "nope", wantErr: `unknown CLI "nope" (known: claude, codex`},
		{in: "gh,", wantErr: `unknown CLI ""`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseList(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseList(%q) error %v, want %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("ParseList(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestNarrow(t *testing.T) {
	allowed := []string{"claude", "gh"}
	tests := []struct {
		name      string
		requested []string
		want      []string
		wantErr   string
	}{
		{name: "nil keeps all", requested: nil, want: allowed},
		{name: "empty means none", requested: []string{}, want: []string{}},
		{name: "subset", requested: []string{"gh"}, want: []string{"gh"}},
		{name: "alias", requested: []string{"claude-code"}, want: []string{"claude"}},
		{name: "widening refused", requested: []string{"codex"}, wantErr: `credentials of "codex" are not enabled by the operator (enabled: claude, gh)`},
		{name: "unknown refused", requested: []string{"x"}, wantErr: `unknown CLI "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Narrow(allowed, tt.requested)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("Narrow = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if _, err := Narrow([]string{}, []string{"gh"}); err == nil || !strings.Contains(err.Error(), "enabled: none") {
		t.Errorf("widening from none: %v", err)
	}
}
