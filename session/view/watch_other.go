//go:build !linux

package view

import (
	"log/slog"
	"time"
)

// watch: only Linux has the project view; elsewhere it is blind.
type watch struct{}

func newWatch(string, []string, int, func(uint64), *slog.Logger) *watch {
	return &watch{}
}
func (w *watch) current() uint64            { return 0 }
func (w *watch) state() (string, time.Time) { return "no project view on this system", time.Time{} }
func (w *watch) close()                     {}
