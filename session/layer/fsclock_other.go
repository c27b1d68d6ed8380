//go:build !linux

package layer

import "time"

// fsNow is the time a file system stamps on a change made now, or a
// little earlier.
func fsNow() int64 { return time.Now().UnixNano() - ViewSlack }

// fileClock: none here (fsNow serves).
type fileClock int

func openFileClock(string) fileClock { return -1 }
func (fileClock) now() (int64, bool) { return 0, false }
func (fileClock) close()             {}
