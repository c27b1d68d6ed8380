// Command jail-mcp is an MCP server that runs shell commands in a
// write-jail; see README.md.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(exitCode(run(context.Background(), os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr), os.Stderr))
}
