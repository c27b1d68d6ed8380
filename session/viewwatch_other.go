//go:build !linux

package session

// viewWatch: only Linux has the project view; elsewhere it is blind.
type viewWatch struct{}

func newViewWatch(string, []string, int, func(uint64)) *viewWatch { return &viewWatch{} }
func (w *viewWatch) current() uint64                              { return 0 }
func (w *viewWatch) close()                                       {}

const maxViewWatches = 50000
