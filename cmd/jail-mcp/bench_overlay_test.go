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

	"github.com/mark3labs/mcp-go/mcp"

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
		tv, tp := alternate(b, func() time.Duration { return timedCall(b, view, args) }, func() time.Duration { return timedCall(b, plain, args) })
		b.ReportMetric(float64(tp.Microseconds())/float64(b.N)/1000, "plain-ms")
		b.ReportMetric(float64(tv)/float64(tp), "x-plain")
	})
	b.Run("after-change", func(b *testing.B) {
		// jailed_exec /bin/true right after the host made a file in the
		// project (a new view: made by the agent, or, with bubblewrap's own
		// overlay, a new agent) against one with nothing changed, the
		// calls alternating (x-steady: the ratio of their sums).
		project := testkit.NewProject(b)
		ts := startBinary(b, bw, productBinary(b), project, testkit.ServerEnv(), "--overlay", "on")
		args := map[string]any{"argv": []string{"/bin/true"}}
		ts.Exec(args)
		call := func() time.Duration { return timedCall(b, ts, args) }
		n := 0
		changed := func() time.Duration {
			n++
			if err := os.WriteFile(filepath.Join(project, fmt.Sprintf("f%d", n)), nil, 0o644); err != nil {
				b.Fatal(err)
			}
			// The server's watch numbers the change once the project is
			// quiet: the call comes after that.
			time.Sleep(benchAfterChange)
			return call()
		}
		tc, ts0 := alternate(b, changed, call)
		b.ReportMetric(float64(ts0.Microseconds())/float64(b.N)/1000, "steady-ms")
		b.ReportMetric(float64(tc)/float64(ts0), "x-steady")
	})
	b.Run("go-test-first", goTestFirst)
	b.Run("idle-20k", func(b *testing.B) { idleCall(b, bw, 0) })
	b.Run("idle-layer-20k", func(b *testing.B) { idleCall(b, bw, 20000) })
	// The first call of a new session under the view against its
	// second (firstCall): at once after initialize, and after tools/list
	// and a model's turn (200 ms), where the agent's spares wait armed
	// in a view of the project's number.
	b.Run("first", func(b *testing.B) { firstCall(b, bw, 0, "--overlay", "on") })
	b.Run("first-listed", func(b *testing.B) { firstCall(b, bw, 200*time.Millisecond, "--overlay", "on") })
	b.Run("work", func(b *testing.B) {
		if benchShort {
			b.Skip("real work: full runs only")
		}
		for _, fx := range benchWork() {
			b.Run(fx.name, func(b *testing.B) { overlayWork(b, fx) })
		}
	})
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

// benchGoCaches are Go caches of the benchmarks' own, where the sandbox
// sees them (a CI's GOMODCACHE or GOCACHE may lie in /tmp, which it
// shows empty): host is what the environment of a go command run on the
// host adds (the caches filled from the host's module cache first, then
// the proxy), server what a server's environment adds to show them.
func benchGoCaches(b *testing.B) (host, server []string) {
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
	host = []string{"GOMODCACHE=" + modCache, "GOCACHE=" + buildCache, "GOFLAGS=-modcacherw",
		"GOPROXY=file://" + filepath.Join(orig[0], "cache", "download") + "," + orig[1]}
	return host, []string{"GOMODCACHE=" + modCache, "GOCACHE=" + buildCache}
}

// goTestFirst times the first go test -count=1 ./... of a fresh session
// with --overlay (the host's Go caches shown copy-on-write) against the
// host's own, one after the other (x-host: the ratio of their sums).
func goTestFirst(b *testing.B) {
	b.StopTimer() // the set-up untimed
	bw := testkit.Backends()[0]
	bin := productBinary(b)
	project := testkit.NewProject(b)
	writeFiles(b, project, goTestModule)
	goHost, goServer := benchGoCaches(b)
	hostEnv := append(os.Environ(), goHost...)
	host := func(args ...string) {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = project, hostEnv
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("go %v: %v\n%s", args, err, out)
		}
	}
	host("mod", "tidy")
	host("test", "-count=1", "./...") // the host's caches warm
	env := testkit.ServerEnv(goServer...)
	args := map[string]any{"command": "go test -count=1 ./...", "timeout_ms": 600000}
	var tj, th time.Duration
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

// idleCall times jailed_exec /bin/true under the view in a project of
// 20,000 files (100 directories), after a call that copied 10 of them
// into the layer and added layerFiles more there: what every call's
// look at the layer (its changes, its conflicts) costs an idle call.
func idleCall(b *testing.B, bw testkit.Backend, layerFiles int) {
	project := testkit.NewProject(b)
	for d := range 100 {
		dir := filepath.Join(project, fmt.Sprintf("d%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 200 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", f)), []byte("x\n"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	ts := startBinary(b, bw, productBinary(b), project, testkit.ServerEnv(), "--overlay", "on", "--timeout", "5m")
	script := fmt.Sprintf(`set -e
for d in $(seq 0 9); do echo y >> d00$d/f000; done
mkdir -p layer && cd layer && seq 1 %d | xargs -r touch`, layerFiles)
	if res, raw := ts.Exec(map[string]any{"command": script, "timeout_ms": 300000}); res.ExitCode != 0 {
		b.Fatalf("the layer: %s", testkit.ResultText(raw))
	}
	args := map[string]any{"argv": []string{"/bin/true"}}
	ts.Exec(args)
	var total time.Duration
	for b.Loop() {
		total += timedCall(b, ts, args)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "call-ms")
}

// benchAfterChange is how long after the host's change the call of
// BenchmarkOverlay/after-change comes: an assistant's next command comes
// a few tenths of a second after its own edit at the soonest.
var benchAfterChange = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("JAIL_MCP_BENCH_AFTER_CHANGE")); err == nil {
		return d
	}
	return 300 * time.Millisecond
}()

// benchWork are the real work BenchmarkOverlay/work times: npm ci and
// npm test, go test of a module with dependencies, pytest, each a fixture
// of TestOverlayRealWork's table (go's, goTestModule).
func benchWork() []workFixture {
	var out []workFixture
	for _, fx := range workFixtures {
		switch fx.name {
		case "npm-ci":
			out = append(out, fx)
		case "pytest-filterwarnings-error":
			fx.name = "pytest"
			out = append(out, fx)
		}
	}
	// -count=1: a test result cached would time nothing.
	goTest := workFixture{name: "go-test", files: goTestModule, setup: "go mod tidy", command: "go test -count=1 ./...", want: []string{"ok"}, needs: []string{"go"}}
	return append(out[:1], append([]workFixture{goTest}, out[1:]...)...)
}

// overlayWork times fx's command in a fresh session under the view, its
// first call made as a client makes it (tools/list, then 200 ms), against
// the same command run directly on the host in a copy of the project,
// alternating (x-direct: the ratio of their sums); each run has a fresh
// copy of the project, and the host caches (npm's, Go's) were warmed by a
// run on the host first. The session's calls see them copy-on-write.
func overlayWork(b *testing.B, fx workFixture) {
	b.StopTimer() // the set-up untimed
	for _, p := range fx.needs {
		if _, err := exec.LookPath(p); err != nil {
			b.Fatalf("%s is not installed here (.ci/deps installs what the benchmarks need): %v", p, err)
		}
	}
	bw := testkit.Backends()[0]
	bin := productBinary(b)
	userCache, err := os.UserCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	// A HOME where the sandbox sees it (not /tmp), for npm's cache.
	home := filepath.Join(userCache, "jail-mcp-bench-work")
	if err := os.MkdirAll(home, 0o755); err != nil {
		b.Fatal(err)
	}
	goHost, goServer := benchGoCaches(b)
	hostEnv := append(benchEnv(goHost...), "HOME="+home)
	serverEnv := testkit.ServerEnv(append(goServer, "HOME="+home)...)
	sh := func(dir, script string) time.Duration {
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir, cmd.Env = dir, hostEnv
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(t0)
		if err != nil {
			b.Fatalf("%s on the host: %v\n%s", script, err, out)
		}
		return d
	}
	template := testkit.NewProject(b)
	writeFiles(b, template, fx.files)
	if fx.setup != "" {
		sh(template, fx.setup)
	}
	fresh := func() string {
		dir := testkit.NewProject(b)
		if err := os.CopyFS(dir, os.DirFS(template)); err != nil {
			b.Fatal(err)
		}
		return dir
	}
	sh(fresh(), fx.command) // the host's caches warm
	args := map[string]any{"command": fx.command, "timeout_ms": (10 * time.Minute).Milliseconds()}
	var tv, td time.Duration
	for i := 0; i < b.N; i++ {
		ts := startBinary(b, bw, bin, fresh(), serverEnv, "--overlay", "on", "--timeout", "10m", "--max-output", "1048576")
		if _, err := ts.Client.ListTools(b.Context(), mcp.ListToolsRequest{}); err != nil {
			b.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		b.StartTimer()
		t0 := time.Now()
		res, raw := ts.Exec(args)
		tv += time.Since(t0)
		b.StopTimer()
		if res.ExitCode != 0 {
			b.Fatalf("%s in a fresh session: %s", fx.command, testkit.ResultText(raw))
		}
		if err := fx.check(res); err != nil {
			b.Fatal(err)
		}
		ts.Client.Close()
		td += sh(fresh(), fx.command)
	}
	b.ReportMetric(float64(td.Milliseconds())/float64(b.N), "direct-ms")
	b.ReportMetric(float64(tv)/float64(td), "x-direct")
}
