package session

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/session/jailfs"
	"github.com/jail-mcp/jail-mcp/session/jailfs/jailfstest"
	"github.com/jail-mcp/jail-mcp/session/limits"
)

// deepDepth is deeper than a walk by paths could walk in the time of a
// test (quadratic: 10,000 took 158 s), and than the descriptors a
// recursion would hold (the soft limit is often 1024, at most 20,000 on
// some hosts).
const deepDepth = 25000

// TestDeepJail: a jail holding a chain of 25,000 directories is counted,
// reset and pruned in the chain's time, and while it is walked, the
// watchdog still holds the calls of another session to their bounds.
// The server makes no cgroups here (the bounds are the watchdog's alone,
// as for an unprivileged server): it holds the process and memory bounds
// from its own count, on the loop the walks must not hold up.
func TestDeepJail(t *testing.T) {
	m, _ := newManager(t, func(c *Config) { c.MaxDisk, c.MaxTimeout = 1<<40, time.Hour }, nil)
	// After New: no cgroups, so the watchdog's count is the only bound.
	m.cfg.MaxProcs, m.cfg.MaxMemory = 50, 64<<20
	if m.pool != nil {
		t.Fatal("the manager made cgroups")
	}
	// Walked whatever its depth: deeper than the usage watch goes.
	deep := openSession(t, m, "deep")
	start := time.Now()
	jailfstest.Chain(t, deep.Path, deepDepth)
	t.Logf("chain of %d made in %v", deepDepth, time.Since(start))
	want := int64(len((&Manager{}).skeletonDirs())) + deepDepth + 1

	start = time.Now()
	u, err := deep.Usage()
	t.Logf("counted in %v", time.Since(start))
	if err != nil || u.Files != want || u.Bytes < deepDepth*512 {
		t.Fatalf("Usage() = %+v, %v; want %d files", u, err, want)
	}
	if _, ok := deep.exactUsage(); ok {
		t.Errorf("a jail %d levels deep is watched, deeper than the usage watch goes", deepDepth)
	}

	// A call of the deep jail runs, so that the watchdog looks at its
	// usage (a walk) every second while the other session's calls run.
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan *Result, 1)
	go func() {
		res, _ := deep.Exec(ctx, Request{Command: "sleep 600", Timeout: 10 * time.Minute})
		ran <- res
	}()
	waitUntil(t, func() bool { return deep.Running() == 1 })
	// Its first look has been taken (metered), or is being taken.
	waitUntil(t, func() bool {
		deep.usageMu.Lock()
		defer deep.usageMu.Unlock()
		return deep.metering || !deep.meteredAt.IsZero()
	})

	other := openSession(t, m, "other")
	for _, tt := range []struct {
		name, command string
		want          limits.Bound
	}{
		{"fork bomb", `i=0; while [ $i -lt 2000 ]; do sleep 300 & i=$((i+1)); done; wait`, limits.BoundProcs},
		{"memory hog", `exec python3 -c 'import time
chunks = [b"m" * (1 << 20) for _ in range(512)]
time.sleep(300)'`, limits.BoundMemory},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := other.Exec(t.Context(), Request{Command: tt.command, Timeout: 2 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if res.Limit != tt.want || res.End != OverBound {
				t.Errorf("%s beside a walked jail: %+v, want killed for %s", tt.name, res, tt.want)
			}
		})
	}
	cancel()
	if res := <-ran; res == nil || res.End != Cancelled {
		t.Errorf("the deep jail's call: %+v", res)
	}

	before, err := deep.Usage()
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	r, err := deep.Reset(t.Context())
	t.Logf("reset in %v", time.Since(start))
	if err != nil || r.RemovedFiles != before.Files-int64(len((&Manager{}).skeletonDirs())) || r.RemovedFiles < deepDepth+1 {
		t.Errorf("Reset = %+v, %v; want the %d files beyond the skeleton removed", r, err, before.Files-int64(len((&Manager{}).skeletonDirs())))
	}
	if u, err := deep.Usage(); err != nil || u.Files != int64(len((&Manager{}).skeletonDirs())) {
		t.Errorf("Usage after reset = %+v, %v", u, err)
	}

	// An old jail no server holds, pruned.
	old := filepath.Join(m.cfg.Root, "old")
	if err := os.Mkdir(old, 0o700); err != nil {
		t.Fatal(err)
	}
	jailfstest.Chain(t, old, deepDepth)
	start = time.Now()
	got, err := jailfs.Prune(m.cfg.Root, jailfs.PruneOptions{Remove: true, Now: time.Now().Add(time.Hour)})
	t.Logf("pruned in %v", time.Since(start))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range got {
		if e.Name == "old" && (!e.Removed || e.Files != deepDepth+1 || e.Err != "") {
			t.Errorf("prune of the deep jail: %+v", e)
		}
	}
	if _, err := os.Lstat(old); !os.IsNotExist(err) {
		t.Errorf("the deep jail is still there: %v", err)
	}
}

// waitUntil waits for cond; go test's -timeout bounds the wait.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-t.Context().Done():
			t.Fatal("gave up waiting")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
