//go:build !linux

package limits

import (
	"time"

	"github.com/jail-mcp/jail-mcp/jail"
)

const watchInterval = 50 * time.Millisecond

type procTree struct {
	procs int
	rss   int64
}

type memfdScan struct{}

// scanProcs and descendants are not implemented off Linux yet: the
// watchdog sees nothing.
func scanProcs() map[int]jail.Stat { return nil }

func descendants(root int, procs map[int]jail.Stat, memfds *memfdScan) procTree { return procTree{} }

// LimitProcess is not implemented off Linux yet.
func LimitProcess(maxFile int64) error { return nil }

// Watchable reports whether the watchdog can see processes here: not
// off Linux yet.
const Watchable = false
