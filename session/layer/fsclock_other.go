//go:build !linux

package layer

import "time"

// fsNow is the time a file system stamps on a change made now, or a
// little earlier.
func fsNow() int64 { return time.Now().UnixNano() - viewSlack }
