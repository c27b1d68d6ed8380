//go:build !linux

package jailfs

import (
	"log/slog"
	"os"
)

// UsageWatch keeps no jail's usage here: without inotify, every jail is
// walked, at most once a second.
type UsageWatch struct{}

// NewUsageWatch returns a watch that keeps nothing.
func NewUsageWatch(*slog.Logger, *os.Root) *UsageWatch { return &UsageWatch{} }

// Close does nothing.
func (w *UsageWatch) Close() {}

// Usage is never kept here: ok is false, and the caller walks the jail.
func (w *UsageWatch) Usage(string) (Usage, bool) { return Usage{}, false }

// Changes is never kept here: ok is false, and the caller looks itself.
func (w *UsageWatch) Changes(string, string) (uint64, bool) { return 0, false }

// Forget does nothing.
func (w *UsageWatch) Forget(string) {}
