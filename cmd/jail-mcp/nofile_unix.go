//go:build unix

package main

import "syscall"

// descriptorLimit is how many descriptors this process may have open
// (RLIMIT_NOFILE: Go raises its soft limit to the hard one at start-up).
func descriptorLimit() (int, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 0, false
	}
	return int(rl.Cur), true
}
