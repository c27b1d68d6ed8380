// Package limits owns what holds a command to the operator's bounds: the
// Bound a result names, the cgroups the kernel holds a call to (a Pool of
// launcher threads placed in them ahead of the calls, and the cgroups of
// each call of a session agent with their marks), the Watchdog that
// counts what no cgroup holds (processes, memory, a jail's disk), and the
// resource limits every command inherits from the server. It knows
// nothing of sessions: a watched call brings its bounds, and its jail's
// disk as a Disk to ask.
package limits

// Bound names a bound of the operator's that a command went over.
type Bound string

// The bounds, as results name them (the limit field).
const (
	BoundTimeout  Bound = "timeout"   // its time: timeout_ms, --timeout, --max-timeout, --max-job-time
	BoundProcs    Bound = "procs"     // --max-procs
	BoundMemory   Bound = "memory"    // --max-memory
	BoundDisk     Bound = "disk"      // --max-disk, the jail's usage
	BoundFiles    Bound = "files"     // --max-files, the jail's inodes
	BoundFileSize Bound = "file_size" // --max-disk, one file's size
)

// Flag is the operator's setting behind b.
func (b Bound) Flag() string {
	switch b {
	case BoundTimeout:
		return "--timeout"
	case BoundProcs:
		return "--max-procs"
	case BoundMemory:
		return "--max-memory"
	case BoundDisk, BoundFileSize:
		return "--max-disk"
	case BoundFiles:
		return "--max-files"
	}
	return ""
}
