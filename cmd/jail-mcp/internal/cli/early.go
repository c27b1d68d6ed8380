package cli

import (
	"context"
	"os"
	"strings"
)

// Every sub-command but serve runs from this package's initialisation,
// before the packages of the MCP server are initialised: Go initialises
// packages in the order of their import paths as soon as their own
// imports are (the Go spec, since 1.21), this package needs none of the
// MCP SDK's, and the JSON-schema compiler that the SDK brings takes longer
// to initialise (about 9 ms) than `jail-mcp version` takes in all.
// `jail-mcp run` pays only for what it uses.
func init() {
	if len(os.Args) < 2 || strings.HasPrefix(os.Args[1], "-") || os.Args[1] == "serve" {
		return // the server: main runs it, with everything initialised
	}
	os.Exit(ExitCode(Main(context.Background(), os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr), os.Stderr))
}
