package output

import (
	"io"
	"os"
	"path"
	"time"

	"github.com/google/uuid"

	"github.com/jail-mcp/jail-mcp/session/jailfs"
)

// dir is where a call's whole output is kept when it is cut.
const dir = ".jail-mcp/output"

// keepOutputs is how many calls' output directories a jail keeps.
const keepOutputs = 20

// NewID names a new output directory: when, and a random part.
func NewID() string {
	return ID(uuid.NewString()[:8])
}

// ID names a new output directory: when, and tag (a job's id).
func ID(tag string) string {
	return time.Now().UTC().Format("20060102-150405") + "-" + tag
}

// KeptMax is the most bytes of one stream (or patch) kept in the jail
// under the disk bound maxDisk (0: none): what is kept counts against the
// jail's disk bound and must stay under the per-file bound the server
// itself is held to.
func KeptMax(maxDisk int64) int64 {
	if maxDisk > 0 {
		return min(maxKept, maxDisk/4)
	}
	return maxKept
}

// Dirs are a jail's output directories, reached through its root.
type Dirs struct {
	Root *os.Root
	// Live names the directories in use (running jobs'), which pruning
	// keeps.
	Live func() map[string]bool
}

// Make creates a fresh output directory id inside the jail and prunes
// the oldest beyond keepOutputs. It returns the path relative to the jail.
func (d Dirs) Make(id string) (string, error) {
	p := path.Join(dir, id)
	if err := d.Root.MkdirAll(p, 0o700); err != nil {
		return "", err
	}
	if names, err := jailfs.SortedNames(d.Root, dir); err == nil && len(names) > keepOutputs {
		live := d.Live()
		for _, n := range names[:len(names)-keepOutputs] {
			if n != id && !live[n] {
				d.Root.RemoveAll(path.Join(dir, n))
			}
		}
	}
	return p, nil
}

// Create creates the file name in the output directory dir (relative to
// the jail), which must not exist yet.
func (d Dirs) Create(dir, name string) (io.WriteCloser, error) {
	return d.Root.OpenFile(path.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
}

// Keep writes data to the file name in a new output directory, through
// the jail's root, up to keepMax bytes. It returns the file's path
// relative to the jail and the bytes kept.
func (d Dirs) Keep(name string, data []byte, keepMax int64) (string, int, error) {
	dir, err := d.Make(NewID())
	if err != nil {
		return "", 0, err
	}
	data = data[:min(int64(len(data)), keepMax)]
	f, err := d.Create(dir, name)
	if err != nil {
		return "", 0, err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, err
	}
	return path.Join(dir, name), len(data), nil
}
