// Command jail-mcp is an MCP server that runs shell commands in a
// write-jail; see README.md.
//
// Its sub-commands live in internal/cli, which runs all of them but the
// server before this package, and the MCP SDK, are initialised.
package main

import (
	"context"
	"os"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/cli"
)

func init() { cli.Serve = serve }

func main() {
	os.Exit(cli.ExitCode(cli.Main(context.Background(), os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr), os.Stderr))
}
