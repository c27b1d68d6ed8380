//go:build !linux

package session

import "time"

const watchInterval = 50 * time.Millisecond

type procTree struct {
	procs int
	rss   int64
}

// scanProcs and descendants are not implemented off Linux yet: the
// watchdog sees nothing.
func scanProcs() map[int]int { return nil }

func descendants(root int, parent map[int]int) procTree { return procTree{} }

// limitProcess is not implemented off Linux yet.
func limitProcess(maxFile int64) error { return nil }

const Watchable = false
