// Package view owns what a jailed command sees of the host beyond its
// jail: the environment every command gets (env.go), and the project view
// (--overlay): every command sees the project writable, and what it
// changes lands in the session's layer, <jail>/.overlay, hidden from
// commands: upper/ holds the changes, work/ the kernel's work
// directories, caches/ the layers of the host caches shown in the jail
// (caches.go). A watch of the project numbers its states, so that the
// views a session agent keeps are renewed when the host changes the
// project (watch_linux.go). session/layer reads the upper layer
// (jail_diff) and applies it to the project (jail_apply).
package view

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jail-mcp/jail-mcp/jail"
)

// LayerDir is the layer's directory in a jail.
const LayerDir = ".overlay"

// LayerUpper is where a jail's layer keeps what commands changed in the
// project, relative to the jail.
const LayerUpper = LayerDir + "/upper"

// maxWatches bounds the project directories the server watches (each
// takes some kernel memory of the user's).
const maxWatches = 50000

// View is the project view of one server: the host caches it shows in
// each jail, and the watch of the project. A nil View is the view off.
type View struct {
	caches []hostCache
	watch  *watch
}

// Start finds the host caches a view shows, of the server's environment
// env and home, and starts the watch of project's directories but skip's
// (the jails, the directories commands write in place): onChange gets
// each number of the project's state, 0 while the watch is blind.
func Start(project, home string, env map[string]string, skip []string, onChange func(gen uint64), log *slog.Logger) *View {
	v := &View{caches: hostCaches(env, home, project)}
	v.watch = newWatch(project, skip, maxWatches, onChange, log)
	return v
}

// Close ends the watch.
func (v *View) Close() {
	if v != nil {
		v.watch.close()
	}
}

// Skeleton are the directories the project view needs in a jail: the
// layer's and the caches' mount points.
func (v *View) Skeleton() []string {
	if v == nil {
		return nil
	}
	dirs := []string{LayerUpper, LayerDir + "/work", LayerDir + "/caches"}
	for _, c := range v.caches {
		if c.env == "" {
			dirs = append(dirs, c.target)
		}
	}
	return dirs
}

// Mounts are the host caches as the jail at jailPath shows them.
func (v *View) Mounts(jailPath string) []jail.CacheMount {
	var out []jail.CacheMount
	for _, c := range v.caches {
		target := c.lower
		if c.env == "" {
			target = filepath.Join(jailPath, c.target)
		}
		out = append(out, jail.CacheMount{Name: c.name, Lower: c.lower, Target: target})
	}
	return out
}

// Env adds to env, the host's part of every call's environment, the
// variables that point the jail's tools at caches shown at the host's
// paths.
func (v *View) Env(env map[string]string) map[string]string {
	if v == nil {
		return env
	}
	return viewEnv(env, v.caches)
}

// Clean removes, in the jail at root, the work directories of the views
// of its stopped agents (the kernel makes their own work/ with no
// permission bits, which no plain removal of the jail would get
// through), by empty; the layer stays.
func (v *View) Clean(root *os.Root, empty func(*os.Root)) {
	if v == nil {
		return
	}
	clean := func(dir string, match func(name string) bool) {
		r, err := root.OpenRoot(dir)
		if err != nil {
			return
		}
		defer r.Close()
		f, err := r.Open(".")
		if err != nil {
			return
		}
		names, _ := f.Readdirnames(-1)
		f.Close()
		for _, n := range names {
			if !match(n) {
				continue
			}
			if sub, err := r.OpenRoot(n); err == nil {
				empty(sub)
				sub.Close()
			}
			r.Remove(n)
		}
	}
	clean(LayerDir+"/work", func(string) bool { return true })
	for _, c := range v.caches {
		clean(LayerDir+"/caches/"+c.name, func(n string) bool { return strings.HasPrefix(n, "work-") })
	}
}

// Renewer is a runner whose views of the project a change makes stale (a
// session agent under --overlay).
type Renewer interface{ RenewView(gen uint64) }

// Gen is the number of the project's state a call must see (0: a view of
// its own), or 0 without the view.
func (v *View) Gen() uint64 {
	if v == nil {
		return 0
	}
	return v.watch.current()
}

// Status says whether the watch of the project sees every change
// ("watching"), or is blind and why: every call then gets a view of its
// own (a mount per call), until it sees all again; "" without the view.
func (v *View) Status() string {
	if v == nil {
		return ""
	}
	why, since := v.watch.state()
	if why == "" {
		return "watching"
	}
	return fmt.Sprintf("blind since %s (%s): every call gets a view of its own until the watch sees all again", since.Format(time.RFC3339), why)
}
