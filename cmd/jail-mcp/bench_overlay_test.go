//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/tools"
)

// BenchmarkOverlay measures the project view (--overlay, bubblewrap only)
// against its baselines, each in the same run.
func BenchmarkOverlay(b *testing.B) {
	bw := testkit.Backends()[0]
	b.Run("per-call", func(b *testing.B) {
		// jailed_exec /bin/true with --overlay against one without, the
		// calls alternating between the two servers (x-plain: the ratio
		// of their sums), each server's agent warm.
		bin := productBinary(b)
		plain := startBinary(b, bw, bin, testkit.NewProject(b), testkit.ServerEnv(), "--overlay", "off")
		view := startBinary(b, bw, bin, testkit.NewProject(b), testkit.ServerEnv(), "--overlay", "on")
		args := map[string]any{"argv": []string{"/bin/true"}}
		plain.Exec(args)
		view.Exec(args)
		call := func(ts *testkit.Server) time.Duration {
			t0 := time.Now()
			res, err := ts.Call(context.Background(), "jailed_exec", args)
			d := time.Since(t0)
			if err != nil || res.IsError {
				b.Fatalf("jailed_exec: %v %v", err, res)
			}
			return d
		}
		tv, tp := alternate(b, func() time.Duration { return call(view) }, func() time.Duration { return call(plain) })
		b.ReportMetric(float64(tp.Microseconds())/float64(b.N)/1000, "plain-ms")
		b.ReportMetric(float64(tv)/float64(tp), "x-plain")
	})
	b.Run("go-test-first", goTestFirst)
	b.Run("diff-20k", func(b *testing.B) {
		// jail_diff of a layer of 20,000 files: node_modules/ (ignored,
		// 19,000 files in 1,000 packages) added whole, and 1,000 files of
		// src/ copied up, half of them edited (a tenth of each, short).
		n := 1000
		if benchShort {
			n = 100
		}
		project := testkit.NewProject(b)
		files := map[string]string{".gitignore": "node_modules/\n", "package.json": "{}\n"}
		for i := range n {
			files[fmt.Sprintf("src/f%04d.js", i)] = strings.Repeat("x", 1000) + "\n"
		}
		for name, body := range files {
			p := filepath.Join(project, name)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		ts := startBinary(b, bw, productBinary(b), project, testkit.ServerEnv(), "--overlay", "on", "--timeout", "5m")
		script := fmt.Sprintf(`set -e
for p in $(seq 1 %d); do mkdir -p node_modules/p$p/lib; for f in $(seq 1 19); do echo x > node_modules/p$p/lib/f$f.js; done; done
for i in $(seq 0 %d); do f=$(printf 'src/f%%04d.js' $i); if [ $((i %% 2)) = 0 ]; then echo edit >> $f; else cp $f $f.tmp && mv $f.tmp $f; fi; done`, n, n-1)
		if res, raw := ts.Exec(map[string]any{"command": script, "timeout_ms": 300000}); res.ExitCode != 0 {
			b.Fatalf("the layer: %s", testkit.ResultText(raw))
		}
		var first tools.DiffResult
		for b.Loop() {
			res, err := ts.Call(context.Background(), "jail_diff", map[string]any{})
			if err != nil || res.IsError {
				b.Fatalf("jail_diff: %v %s", err, testkit.ResultText(res))
			}
			if first.Session == "" {
				raw, _ := json.Marshal(res.StructuredContent)
				json.Unmarshal(raw, &first)
			}
		}
		// What it must have found: the 500 edits, node_modules/ summed up.
		if len(first.Changes) != n/2 || len(first.Ignored) != 1 || first.Ignored[0].Files != 19*n {
			b.Fatalf("jail_diff found %d changes and %+v", len(first.Changes), first.Ignored)
		}
	})
}

// goTestModule is a module with a few dependencies (the server's own, so
// that a machine that built the server has them), a package and a test.
var goTestModule = map[string]string{
	"go.mod": "module example.com/warm\n\ngo 1.22\n",
	"warm.go": "package warm\n\nimport (\n\t\"log/slog\"\n\t\"os\"\n\n\t\"github.com/google/uuid\"\n\t\"github.com/lmittmann/tint\"\n\t\"golang.org/x/sys/unix\"\n)\n\n" +
		"// ID is a new id, logged.\nfunc ID() string {\n\tid := uuid.NewString()\n\tslog.New(tint.NewHandler(os.Stderr, nil)).Info(\"id\", \"id\", id, \"pid\", unix.Getpid())\n\treturn id\n}\n",
	"warm_test.go": "package warm\n\nimport \"testing\"\n\nfunc TestID(t *testing.T) {\n\tif len(ID()) != 36 {\n\t\tt.Fatal(\"not a uuid\")\n\t}\n}\n",
}

// goTestFirst times the first go test -count=1 ./... of a fresh session
// with --overlay (the host's Go caches shown copy-on-write) against the
// host's own, one after the other (x-host: the ratio of their sums).
func goTestFirst(b *testing.B) {
	bw := testkit.Backends()[0]
	bin := productBinary(b)
	project := testkit.NewProject(b)
	for name, body := range goTestModule {
		if err := os.WriteFile(filepath.Join(project, name), []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	// Caches of the benchmark's own, where the sandbox sees them (a CI's
	// GOMODCACHE or GOCACHE may lie in /tmp, which it shows empty), filled
	// from the host's module cache first, then the proxy.
	userCache, err := os.UserCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	caches := filepath.Join(userCache, "jail-mcp-bench-go")
	modCache, buildCache := filepath.Join(caches, "mod"), filepath.Join(caches, "build")
	goenv, err := exec.Command("go", "env", "GOMODCACHE", "GOPROXY").Output()
	if err != nil {
		b.Fatal(err)
	}
	orig := strings.Fields(string(goenv))
	hostEnv := append(os.Environ(), "GOMODCACHE="+modCache, "GOCACHE="+buildCache, "GOFLAGS=-modcacherw",
		"GOPROXY=file://"+filepath.Join(orig[0], "cache", "download")+","+orig[1])
	host := func(args ...string) {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = project, hostEnv
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("go %v: %v\n%s", args, err, out)
		}
	}
	host("mod", "tidy")
	host("test", "-count=1", "./...") // the host's caches warm
	env := testkit.ServerEnv("GOMODCACHE="+modCache, "GOCACHE="+buildCache)
	args := map[string]any{"command": "go test -count=1 ./...", "timeout_ms": 600000}
	var tj, th time.Duration
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		ts := startBinary(b, bw, bin, project, env, "--overlay", "on", "--session", fmt.Sprintf("go-test-first-%d", i), "--timeout", "10m")
		b.StartTimer()
		t0 := time.Now()
		res, raw := ts.Exec(args)
		tj += time.Since(t0)
		b.StopTimer()
		if res.ExitCode != 0 {
			b.Fatalf("go test in a fresh session: %s", testkit.ResultText(raw))
		}
		ts.Client.Close()
		t0 = time.Now()
		host("test", "-count=1", "./...")
		th += time.Since(t0)
	}
	b.ReportMetric(float64(th.Milliseconds())/float64(b.N), "host-ms")
	b.ReportMetric(float64(tj)/float64(th), "x-host")
}

// alternate runs a and base in turn for as long as b loops, base untimed
// by b, and returns what each took in all: a figure and its baseline
// measured in the same run.
func alternate(b *testing.B, a, base func() time.Duration) (ta, tbase time.Duration) {
	for b.Loop() {
		ta += a()
		b.StopTimer()
		tbase += base()
		b.StartTimer()
	}
	return ta, tbase
}
