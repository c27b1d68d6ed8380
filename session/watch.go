package session

import (
	"time"
)

// diskEvery is how many watchdog ticks pass between two counts of the
// jail's disk usage, which walks the jail.
const diskEvery = 20

// watch enforces the process, memory and disk bounds of one command until
// stop is closed, and sends the name of the first bound exceeded.
func (s *Session) watch(root int, stop <-chan struct{}, hit chan<- string) {
	cfg := s.m.cfg
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for tick := 1; ; tick++ {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if Watchable && (cfg.MaxProcs > 0 || cfg.MaxMemory > 0) {
			tr := descendants(root)
			switch {
			case cfg.MaxProcs > 0 && int64(tr.procs) > cfg.MaxProcs+1: // +1: bwrap's init
				hit <- "procs"
				return
			case cfg.MaxMemory > 0 && tr.rss > cfg.MaxMemory:
				hit <- "memory"
				return
			}
		}
		if cfg.MaxDisk > 0 && tick%diskEvery == 0 {
			if u, err := count(s.root, false); err == nil && u.Bytes > cfg.MaxDisk {
				hit <- "disk"
				return
			}
		}
	}
}
