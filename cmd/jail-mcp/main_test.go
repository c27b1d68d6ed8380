package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// TestMain: the test binary doubles as the real server (testkit.Main).
func TestMain(m *testing.M) { testkit.Main(m) }

// writeFiles writes files (name: content) beneath dir, making their
// directories.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
