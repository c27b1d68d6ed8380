//go:build !linux

package session

import (
	"log/slog"
	"time"
)

// viewWatch: only Linux has the project view; elsewhere it is blind.
type viewWatch struct{}

func newViewWatch(string, []string, int, func(uint64), *slog.Logger) *viewWatch {
	return &viewWatch{}
}
func (w *viewWatch) current() uint64            { return 0 }
func (w *viewWatch) state() (string, time.Time) { return "no project view on this system", time.Time{} }
func (w *viewWatch) close()                     {}

const maxViewWatches = 50000
