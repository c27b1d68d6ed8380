//go:build !linux

package session

// cgroups are Linux only: elsewhere the watchdog alone bounds commands.
type cgroupSet struct{}

type callCgroup struct{ enforced map[string]bool }

func newCgroups() *cgroupSet                                                { return nil }
func (cs *cgroupSet) close()                                                {}
func (cs *cgroupSet) call(id string, maxProcs, maxMemory int64) *callCgroup { return nil }
func (cc *callCgroup) join() (func(), error)                                { return func() {}, nil }
func (cc *callCgroup) exceeded() string                                     { return "" }
func (cc *callCgroup) remove()                                              {}
