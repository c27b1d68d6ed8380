package jail

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// bwrapFeatureCache holds what each bubblewrap binary can do, by its
// path and the identity and age of the file there: the server and jail-mcp
// run ask once per process, tests with every backend they open.
var bwrapFeatureCache sync.Map // bwrapBinary -> BwrapFeatures

// bwrapBinary is a bubblewrap binary as the file system has it now.
type bwrapBinary struct {
	path        string
	dev, ino    uint64
	size, mtime int64
}

// bwrapFeaturesOf says what the bubblewrap at path can do, from the
// options its --help lists (a fork and exec, about a millisecond, once per
// binary): none when it is setuid (which refuses --size and the overlay
// options), cannot be run, or says nothing in 5 seconds.
func bwrapFeaturesOf(path string) BwrapFeatures {
	fi, err := os.Stat(path)
	if err != nil {
		return BwrapFeatures{}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return BwrapFeatures{}
	}
	key := bwrapBinary{path: path, dev: uint64(st.Dev), ino: st.Ino, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if f, ok := bwrapFeatureCache.Load(key); ok {
		return f.(BwrapFeatures)
	}
	setuid := fi.Mode()&os.ModeSetuid != 0
	var feat BwrapFeatures
	if !setuid {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, path, "--help")
		// Nothing of the server's environment reaches it.
		cmd.Env, cmd.Dir = []string{}, "/"
		out, err := cmd.Output()
		if err != nil {
			return BwrapFeatures{} // not cached: a later start tries again
		}
		feat = parseBwrapHelp(string(out), setuid)
	}
	bwrapFeatureCache.Store(key, feat)
	return feat
}
