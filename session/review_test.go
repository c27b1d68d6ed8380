package session

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/session/layer"
	"github.com/jail-mcp/jail-mcp/session/view"
)

func TestViewOff(t *testing.T) {
	m, _ := newManager(t, nil, nil)
	s := openSession(t, m, "s")
	if _, err := s.Diff(layer.Options{}); !errors.Is(err, ErrNoView) {
		t.Errorf("Diff = %v, want ErrNoView", err)
	}
	if _, err := s.Apply([]string{"a"}, true); !errors.Is(err, ErrNoView) {
		t.Errorf("Apply = %v, want ErrNoView", err)
	}
}

// TestLayerUpperRefused: a layer that is not the jail's own directory (a
// symlink out of it, a file) is never handed to session/layer, nor is
// the layer of a closed session.
func TestLayerUpperRefused(t *testing.T) {
	overlay := func(c *Config) { c.Overlay = true }
	tests := []struct {
		name  string
		plant func(t *testing.T, jail, project string)
		want  string
	}{
		{"upper a symlink", func(t *testing.T, jail, project string) {
			replace(t, filepath.Join(jail, view.LayerUpper), func(p string) error { return os.Symlink(project, p) })
		}, "not a directory"},
		{"layer a symlink", func(t *testing.T, jail, project string) {
			// The skeleton is not remade through a symlink (os.Root
			// refuses to leave the jail), so it is still found.
			replace(t, filepath.Join(jail, view.LayerDir), func(p string) error { return os.Symlink(project, p) })
		}, "not a directory"},
		{"upper a file", func(t *testing.T, jail, project string) {
			replace(t, filepath.Join(jail, view.LayerUpper), func(p string) error { return os.WriteFile(p, nil, 0o600) })
		}, "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, project := newManager(t, overlay, nil)
			s := openSession(t, m, "s")
			tt.plant(t, s.Path, project)
			_, err := s.Diff(layer.Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Diff = %v, want %q", err, tt.want)
			}
			_, err = s.Apply([]string{"a"}, false)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Apply = %v, want %q", err, tt.want)
			}
		})
	}
	t.Run("closed", func(t *testing.T) {
		m, _ := newManager(t, overlay, nil)
		s := openSession(t, m, "s")
		s.Close()
		if _, err := s.Apply([]string{"a"}, false); !errors.Is(err, errClosed) {
			t.Errorf("Apply = %v, want %v", err, errClosed)
		}
		if _, err := s.Diff(layer.Options{}); !errors.Is(err, errClosed) {
			t.Errorf("Diff = %v, want %v", err, errClosed)
		}
	})
}

func replace(t *testing.T, p string, make func(string) error) {
	t.Helper()
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	if err := make(p); err != nil {
		t.Fatal(err)
	}
}

// TestBoundPatch: a patch longer than --max-output is cut at a line's
// end, with a marker that says how much was left out and where the whole
// patch is; a line longer than the bound is cut inside.
func TestBoundPatch(t *testing.T) {
	const limit = 1024
	line := strings.Repeat("x", 39) + "\n"
	tests := []struct {
		name, patch string
		cut         bool
	}{
		{"short", strings.Repeat(line, 10), false},
		{"at the bound", strings.Repeat(line, limit/len(line)) + strings.Repeat("y", limit%len(line)), false},
		{"long", strings.Repeat(line, 1000), true},
		{"one long line", "+" + strings.Repeat("é", 5000) + "\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newManager(t, func(c *Config) { c.MaxOutput = limit }, nil)
			s := openSession(t, m, "s")
			var r DiffResult
			s.boundPatch([]byte(tt.patch), &r)
			if !tt.cut {
				if r.Patch != tt.patch || r.PatchTruncated || r.OutputPath != "" {
					t.Fatalf("patch of %d bytes changed: %+v", len(tt.patch), r)
				}
				return
			}
			if !r.PatchTruncated || len(r.Patch) > limit {
				t.Fatalf("truncated %v, %d bytes inline, want cut within %d", r.PatchTruncated, len(r.Patch), limit)
			}
			head, mark, ok := strings.Cut(r.Patch, "[... ")
			if !ok || !strings.HasSuffix(head, "\n") || !strings.HasPrefix(tt.patch, strings.TrimSuffix(head, "\n")) {
				t.Fatalf("inline patch is not the head and a marker: %q", r.Patch)
			}
			kept := len(head)
			if !strings.HasPrefix(tt.patch, head) {
				kept-- // cut inside a line: the marker got a line of its own
			}
			n, _, _ := strings.Cut(mark, " ")
			if left, err := strconv.Atoi(n); err != nil || left != len(tt.patch)-kept {
				t.Errorf("marker says %q bytes left out, want %d", n, len(tt.patch)-kept)
			}
			if !strings.Contains(mark, r.OutputPath) || filepath.Dir(filepath.Dir(filepath.Dir(r.OutputPath))) != filepath.Join(s.Path, ".jail-mcp") {
				t.Errorf("marker %q, output_path %q: want the whole patch in the jail's outputs", mark, r.OutputPath)
			}
			if b, err := os.ReadFile(r.OutputPath); err != nil || string(b) != tt.patch {
				t.Errorf("the whole patch is not kept: %d bytes, %v", len(b), err)
			}
		})
	}
}
