package main

import (
	"path/filepath"
	"testing"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/session/jailfs/jailfstest"
)

// TestMain: the test binary doubles as the real server (testkit.Main).
func TestMain(m *testing.M) { testkit.Main(m) }

// writeFiles writes files (name: content) beneath dir, making their
// directories.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		jailfstest.WriteFile(t, filepath.Join(dir, name), content)
	}
}
