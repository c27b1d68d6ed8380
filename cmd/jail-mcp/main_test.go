package main

import (
	"testing"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// TestMain: the test binary doubles as the real server (testkit.Main).
func TestMain(m *testing.M) { testkit.Main(m) }
