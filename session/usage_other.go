//go:build !linux

package session

import "log/slog"

// usageWatch keeps no jail's usage here: without inotify, every jail is
// walked, at most once a second.
type usageWatch struct{}

func newUsageWatch(*slog.Logger) *usageWatch { return &usageWatch{} }

func (w *usageWatch) close() {}

func (w *usageWatch) usage(*Session) (Usage, bool) { return Usage{}, false }

func (w *usageWatch) forget(*Session) {}
