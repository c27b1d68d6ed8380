package session

import (
	"fmt"

	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/limits"
)

// PrepareProcess makes, once at start-up and before the first command,
// every change to the whole process (the server, or jail-mcp run) that the
// commands it starts depend on; nothing else in the server changes
// process-wide state:
//   - it is not dumpable (jail.ProtectServer), so no process of its user
//     can read its environment or descriptors, write its memory or trace it;
//   - every descriptor it inherited is close-on-exec (closeInheritedFDs),
//     so commands get their standard streams and what a backend passes on
//     purpose, nothing else;
//   - no core dumps, and no file larger than maxFile (--max-disk): the
//     resource limits every command inherits and cannot raise.
//
// The other bounds are per call (limits.Watchdog, limits.Pool,
// jailfs.UsageWatch).
func PrepareProcess(maxFile int64) error {
	if err := jail.ProtectServer(); err != nil {
		return err
	}
	if err := closeInheritedFDs(); err != nil {
		return err
	}
	if err := limits.LimitProcess(maxFile); err != nil {
		return fmt.Errorf("set resource limits: %w", err)
	}
	return nil
}
