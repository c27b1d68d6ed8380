//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"golang.org/x/sys/unix"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/jail"
)

// BenchmarkPerCall measures one /bin/true per iteration, in one run so
// that the ratios compare like with like: plain exec; the bare bwrap line
// (bareBwrap); the round trip of a tool call that runs nothing
// (mcp-floor); on each backend, a call to a warm session agent in process
// (agent: Runner.Run, no MCP), the full round trip of jailed_exec
// {"argv": ["/bin/true"]} over stdio through the real server with its
// agent warm (server), and the first call of a new session, which starts
// its agent (first: only the call is timed, not the server's start).
//
//	go test ./cmd/jail-mcp -run '^$' -bench PerCall -count 5
func BenchmarkPerCall(b *testing.B) {
	b.Run("exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bare-bwrap", func(b *testing.B) {
		// The bare line: what any bwrap jail costs.
		bare := bareBwrap(b)
		for b.Loop() {
			bare()
		}
	})
	b.Run("mcp-floor", func(b *testing.B) {
		// A jailed_exec the server refuses at once: the round trip of one
		// tool call over stdio, client included, with nothing run.
		ts := testkit.Backends()[0].Start(b, testkit.NewProject(b), testkit.ServerEnv())
		args := map[string]any{"argv": []string{""}}
		for b.Loop() {
			res, err := ts.Call(context.Background(), "jailed_exec", args)
			if err != nil || !res.IsError {
				b.Fatalf("an empty argv[0] was not refused: %v %v", err, res)
			}
		}
	})
	for _, tb := range testkit.Backends() {
		b.Run(tb.Name+"-agent", func(b *testing.B) {
			// Calls of a warm session agent, in process: no MCP, no session.
			be, spec, devnull := agentBench(b, tb)
			r, err := be.Runner(spec, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			call := jail.Call{Argv: spec.Argv, Env: spec.Env, Dir: spec.Dir, Stdin: devnull, Stdout: devnull, Stderr: devnull}
			for b.Loop() {
				p, err := r.Run(call)
				if err != nil {
					b.Fatal(err)
				}
				if e, err := p.Wait(); err != nil || e.Code != 0 {
					b.Fatalf("/bin/true: %+v %v", e, err)
				}
			}
		})
		b.Run(tb.Name+"-agent-start", func(b *testing.B) {
			// A session agent started, one /bin/true run in it, and the
			// agent stopped, in process: what the first call of a session
			// adds, by phase.
			be, spec, devnull := agentBench(b, tb)
			call := jail.Call{Argv: spec.Argv, Env: spec.Env, Dir: spec.Dir, Stdin: devnull, Stdout: devnull, Stderr: devnull}
			var ts, tr, tc time.Duration
			n := 0
			for b.Loop() {
				t0 := time.Now()
				r, err := be.Runner(spec, nil)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				p, err := r.Run(call)
				if err != nil {
					b.Fatal(err)
				}
				p.Wait()
				t2 := time.Now()
				r.Close()
				tc += time.Since(t2)
				ts += t1.Sub(t0)
				tr += t2.Sub(t1)
				n++
			}
			b.ReportMetric(float64(ts.Microseconds())/float64(n)/1000, "start-ms")
			b.ReportMetric(float64(tr.Microseconds())/float64(n)/1000, "run-ms")
			b.ReportMetric(float64(tc.Microseconds())/float64(n)/1000, "close-ms")
		})
		b.Run(tb.Name+"-server", func(b *testing.B) {
			ts := startBinary(b, tb, productBinary(b), testkit.NewProject(b), testkit.ServerEnv())
			serverCalls(b, ts)
		})
		// As on a developer's machine: the operator's HOME holds the
		// credentials of claude, codex and gemini, which the default
		// --auth shows to every call (under landlock placed in the jail
		// for the call and taken out after it).
		b.Run(tb.Name+"-server-creds", func(b *testing.B) {
			env := testkit.ServerEnv("HOME="+fakeHome(b), "CLAUDE_CONFIG_DIR=", "CODEX_HOME=")
			ts := startBinary(b, tb, productBinary(b), testkit.NewProject(b), env)
			serverCalls(b, ts)
		})
		// The first call of a new session against its second, called at
		// once after initialize (-first: it then waits for the start of
		// the agent, which began when the session opened), and the way a
		// client calls (-first-listed: tools/list, then the pause of a
		// model reading it, 200 ms, shorter than any model's turn; the
		// second call after the same pause).
		b.Run(tb.Name+"-first", func(b *testing.B) { firstCall(b, tb, 0) })
		b.Run(tb.Name+"-first-listed", func(b *testing.B) { firstCall(b, tb, 200*time.Millisecond) })
	}
}

// timedCall makes the jailed_exec call args on ts and returns how long
// it took; a failed call ends the benchmark.
func timedCall(b *testing.B, ts *testkit.Server, args map[string]any) time.Duration {
	t0 := time.Now()
	res, err := ts.Call(context.Background(), "jailed_exec", args)
	d := time.Since(t0)
	if err != nil || res.IsError {
		b.Fatalf("jailed_exec: %v %s", err, testkit.ResultText(res))
	}
	return d
}

// serverCalls times jailed_exec {"argv": ["/bin/true"]} on ts, its agent
// warm, as ns/op; and each call against a bare bwrap spawn made right
// after it, untimed (x-bare: the ratio of their sums), so that the two
// are compared under the same load of this machine, whose speed drifts
// by a fifth within a minute (a VM).
func serverCalls(b *testing.B, ts *testkit.Server) {
	args := map[string]any{"argv": []string{"/bin/true"}}
	ts.Exec(args) // the agent, the jail's skeleton and first state copies
	bare := bareBwrap(b)
	var calls, base time.Duration
	for b.Loop() {
		calls += timedCall(b, ts, args)
		b.StopTimer()
		t0 := time.Now()
		bare()
		base += time.Since(t0)
		b.StartTimer()
	}
	b.ReportMetric(float64(base.Microseconds())/float64(b.N)/1000, "bare-ms")
	b.ReportMetric(float64(calls)/float64(base), "x-bare")
}

// firstCall times the first call of new sessions of tb (servers started
// with flags), made pause after initialize (and, with a pause, after
// tools/list), against each one's second call made pause after the
// first, and against a bare bwrap spawn.
func firstCall(b *testing.B, tb testkit.Backend, pause time.Duration, flags ...string) {
	// Each first call is followed by one bare bwrap spawn, untimed, so
	// that x-bare, the ratio of their sums, compares the two under the
	// same load of this machine (a VM's speed drifts between two
	// benchmarks run minutes apart).
	project := testkit.NewProject(b)
	args := map[string]any{"argv": []string{"/bin/true"}}
	bare := bareBwrap(b)
	var first, warm, base time.Duration
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		ts := startBinary(b, tb, productBinary(b), project, testkit.ServerEnv(), append([]string{"--session", fmt.Sprintf("first-%d-%d", pause.Milliseconds(), i)}, flags...)...)
		if pause > 0 {
			if _, err := ts.Client.ListTools(b.Context(), mcp.ListToolsRequest{}); err != nil {
				b.Fatal(err)
			}
			time.Sleep(pause)
		}
		t0 := time.Now()
		b.StartTimer()
		res, err := ts.Call(context.Background(), "jailed_exec", args)
		b.StopTimer()
		first += time.Since(t0)
		if err != nil || res.IsError {
			b.Fatalf("jailed_exec: %v %v", err, res)
		}
		// The same session's next call, warm, after the same pause: a
		// call after an idle moment costs more than one right after
		// another (caches, parked threads), whether first or not.
		time.Sleep(pause)
		t0 = time.Now()
		if res, err := ts.Call(context.Background(), "jailed_exec", args); err != nil || res.IsError {
			b.Fatalf("jailed_exec: %v %v", err, res)
		}
		warm += time.Since(t0)
		ts.Client.Close()
		t0 = time.Now()
		bare()
		base += time.Since(t0)
	}
	b.ReportMetric(float64(base.Microseconds())/float64(b.N)/1000, "bare-ms")
	b.ReportMetric(float64(first)/float64(base), "x-bare")
	b.ReportMetric(float64(warm.Microseconds())/float64(b.N)/1000, "warm-ms")
	b.ReportMetric(float64(first)/float64(warm), "x-warm")
}

// bareBwrap returns a function that runs /bin/true in the bare bwrap
// line, the baseline of every jail's cost: namespaces, the host read-only
// and one directory writable, nothing else.
func bareBwrap(b *testing.B) func() {
	b.Helper()
	dir, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	args := []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", dir, dir, "/bin/true"}
	return func() {
		if err := exec.Command("bwrap", args...).Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// agentBench opens tb's backend as the server would, with the Spec of a
// new session's agent and /dev/null for the streams of its calls.
func agentBench(b *testing.B, tb testkit.Backend) (jail.Backend, jail.Spec, *os.File) {
	b.Helper()
	env := map[string]string{}
	for _, kv := range tb.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	be, err := jail.Open(b.Context(), tb.Name, jail.Options{Getenv: func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}})
	if err != nil {
		b.Fatal(err)
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { devnull.Close() })
	return be, serverSpec(b, be), devnull
}

// serverSpec is the Spec the server builds for the session agent of a new
// session of a new project with an empty HOME, and its call of
// jailed_exec {"argv": ["/bin/true"]}: the same jail layout, working
// directory, environment, jail bound by descriptor and, where credentials
// are bound, the hidden state directory.
func serverSpec(b *testing.B, be jail.Backend) jail.Spec {
	b.Helper()
	project := testkit.NewProject(b)
	dir := filepath.Join(project, ".agent-home", "bench")
	for _, d := range []string{".tmp", ".config", ".cache", ".local/share", ".local/state", ".runtime", ".jail-mcp/state"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			b.Fatal(err)
		}
	}
	jf, err := os.OpenFile(dir, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { jf.Close() })
	spec := jail.Spec{
		Argv: []string{"/bin/true"}, Dir: project, Jail: dir, JailFile: jf, Network: true,
		Env: []string{
			"HOME=" + dir, "LANG=C.UTF-8", "PATH=" + os.Getenv("PATH"), "SHELL=/bin/sh", "TERM=dumb",
			"TMPDIR=" + dir + "/.tmp", "XDG_CACHE_HOME=" + dir + "/.cache", "XDG_CONFIG_HOME=" + dir + "/.config",
			"XDG_DATA_HOME=" + dir + "/.local/share", "XDG_RUNTIME_DIR=" + dir + "/.runtime", "XDG_STATE_HOME=" + dir + "/.local/state",
		},
	}
	if be.Credentials() == jail.BindCredentials {
		spec.Hide = []string{filepath.Join(dir, ".jail-mcp/state")}
	}
	return spec
}

// benchShort is set by `.ci/bench --short`: every benchmark runs once, on
// smaller sizes, only to prove that it works.
var benchShort = os.Getenv("JAIL_MCP_BENCH_SHORT") == "1"

// benchEnv is the environment of a process started by a benchmark: the
// test's own without JAIL_MCP_* settings, HOME the empty test HOME.
func benchEnv(extra ...string) []string {
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JAIL_MCP_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+testkit.TestHome)
	return append(env, extra...)
}

// product is the real binary, built once as the README installs it
// (CGO_ENABLED=0: a static binary, which its agents start faster in a
// sandbox): the per-call benchmarks run it as the server, and so as its
// agents, and BenchmarkRun runs it; the test binary carries the tests'
// packages and would time their start-up too.
var product struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func productBinary(b *testing.B) string {
	b.Helper()
	product.once.Do(func() {
		product.dir, product.err = os.MkdirTemp("", "jail-mcp-bench-")
		if product.err != nil {
			return
		}
		testkit.AfterTests = append(testkit.AfterTests, func() { os.RemoveAll(product.dir) })
		product.bin = filepath.Join(product.dir, "jail-mcp")
		cmd := exec.Command("go", "build", "-o", product.bin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			product.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if product.err != nil {
		b.Fatal(product.err)
	}
	return product.bin
}

// installSRT installs @anthropic-ai/sandbox-runtime under a temporary
// startBinary is start with bin, the real binary, as the server.
func startBinary(b *testing.B, tb testkit.Backend, bin, project string, env []string, args ...string) *testkit.Server {
	b.Helper()
	return tb.StartWith(b, project, env, func(cmd *exec.Cmd) { cmd.Path, cmd.Args[0] = bin, bin }, args...)
}

// prefix that outlives the run, once, and returns the path of srt.
func installSRT(b *testing.B) string {
	b.Helper()
	const pkg = "@anthropic-ai/sandbox-runtime@0.0.83"
	prefix := filepath.Join(os.TempDir(), fmt.Sprintf("jail-mcp-bench-srt-%d", os.Getuid()))
	srt := filepath.Join(prefix, "node_modules", ".bin", "srt")
	if testkit.FileExists(srt) {
		return srt
	}
	for _, p := range []string{"npm", "socat", "rg"} {
		if _, err := exec.LookPath(p); err != nil {
			b.Fatalf("srt needs %s: not found in PATH (.ci/bench installs it)", p)
		}
	}
	ctx, cancel := context.WithTimeout(b.Context(), 150*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--prefix", prefix, "--no-audit", "--no-fund", "--loglevel=error", "--prefer-offline", pkg)
	cmd.Env = append(os.Environ(),
		"npm_config_cache="+filepath.Join(os.TempDir(), fmt.Sprintf("jail-mcp-npm-cache-%d", os.Getuid())),
		"npm_config_update_notifier=false",
	)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("npm install %s: %v\n%s", pkg, err, out)
	}
	return srt
}

// BenchmarkRun measures one `/bin/true` from the command line: `jail-mcp
// run` (the real binary, on each backend) against Anthropic's
// sandbox-runtime `srt true` with writes allowed to the project only, and
// against the bare bwrap line (bareBwrap).
//
//	go test ./cmd/jail-mcp -run '^$' -bench '^BenchmarkRun$' -count 5
func BenchmarkRun(b *testing.B) {
	bin := productBinary(b)
	for _, tb := range testkit.Backends() {
		b.Run("jail-mcp-"+tb.Name, func(b *testing.B) {
			project := testkit.NewProject(b)
			args := append([]string{"run", "--project", project}, tb.Args...)
			args = append(args, "--", "/bin/true")
			env := benchEnv(tb.Env...)
			for b.Loop() {
				cmd := exec.Command(bin, args...)
				cmd.Env, cmd.Dir = env, project
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("jail-mcp run: %v\n%s", err, out)
				}
			}
		})
	}
	b.Run("srt", func(b *testing.B) {
		srt := installSRT(b)
		project := testkit.NewProject(b)
		settings := filepath.Join(b.TempDir(), "srt-settings.json")
		conf := fmt.Sprintf(`{"filesystem":{"denyRead":[],"allowWrite":[%q],"denyWrite":[]},"network":{"allowedDomains":[],"deniedDomains":[]}}`, project)
		if err := os.WriteFile(settings, []byte(conf), 0o600); err != nil {
			b.Fatal(err)
		}
		env := benchEnv()
		// The settings must take: a write to the project succeeds, one
		// beside it fails.
		probe := exec.Command(srt, "--settings", settings, "sh", "-c", "touch "+project+"/ok && ! touch "+filepath.Dir(project)+"/escaped 2>/dev/null")
		probe.Env, probe.Dir = env, project
		if out, err := probe.CombinedOutput(); err != nil || !testkit.FileExists(filepath.Join(project, "ok")) {
			b.Fatalf("srt does not confine as configured: %v\n%s", err, out)
		}
		for b.Loop() {
			cmd := exec.Command(srt, "--settings", settings, "true")
			cmd.Env, cmd.Dir = env, project
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("srt true: %v\n%s", err, out)
			}
		}
	})
	b.Run("bare-bwrap", func(b *testing.B) {
		dir := testkit.NewProject(b)
		args := []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session",
			"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", dir, dir, "/bin/true"}
		for b.Loop() {
			if err := exec.Command("bwrap", args...).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// procStatusMB is a field of /proc/<pid>/status ("VmRSS", "VmHWM") in MiB.
func procStatusMB(b *testing.B, pid int, field string) float64 {
	b.Helper()
	v := testkit.StatusField(b, pid, field)
	var kb float64
	if _, err := fmt.Sscanf(v, "%f kB", &kb); err != nil {
		b.Fatalf("%s of /proc/%d/status: %q: %v", field, pid, v, err)
	}
	return kb / 1024
}

// benchOutputBytes is what the output benchmarks print: 1 GiB, 64 MiB
// in short mode.
func benchOutputBytes() int64 {
	if benchShort {
		return 64 << 20
	}
	return 1 << 30
}

// BenchmarkMemory measures the server's memory and output path on each
// backend: idle-MB is its resident set (VmRSS) right after initialize;
// print reports, while one jailed_exec prints 1 GiB of zeros, the
// throughput (MB/s) and the server's peak resident set (peak-MB, VmHWM,
// its whole life); direct-pipe is the same output read straight from a
// pipe, the throughput baseline.
//
//	go test ./cmd/jail-mcp -run '^$' -bench '^BenchmarkMemory$' -benchtime 1x -count 5
func BenchmarkMemory(b *testing.B) {
	n := benchOutputBytes()
	for _, tb := range testkit.Backends() {
		b.Run(tb.Name+"-idle", func(b *testing.B) {
			var rss float64
			for b.Loop() {
				ts := testkit.StartServer(b, testkit.NewProject(b), testkit.ServerEnv(tb.Env...), tb.Args...)
				time.Sleep(200 * time.Millisecond) // let start-up garbage settle
				rss = max(rss, procStatusMB(b, ts.Cmd.Process.Pid, "VmRSS"))
				ts.Client.Close()
			}
			b.ReportMetric(rss, "idle-MB")
		})
		b.Run(tb.Name+"-print", func(b *testing.B) {
			ts := tb.Start(b, testkit.NewProject(b), testkit.ServerEnv())
			args := map[string]any{"command": fmt.Sprintf("head -c %d /dev/zero", n), "timeout_ms": 600000}
			ts.Exec(map[string]any{"argv": []string{"/bin/true"}})
			b.SetBytes(n)
			for b.Loop() {
				res, _ := ts.Exec(args)
				if res.ExitCode != 0 || res.Signal != "" || res.Limit != "" {
					b.Fatalf("head: %+v", res)
				}
			}
			b.ReportMetric(procStatusMB(b, ts.Cmd.Process.Pid, "VmHWM"), "peak-MB")
		})
	}
	b.Run("direct-pipe", func(b *testing.B) {
		b.SetBytes(n)
		for b.Loop() {
			cmd := exec.Command("head", "-c", fmt.Sprint(n), "/dev/zero")
			out, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			got, err := io.Copy(io.Discard, out)
			if err != nil || got != n {
				b.Fatalf("read %d of %d: %v", got, n, err)
			}
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkJobWait measures how soon a waiting jail_job returns a line a
// job printed: the job prints the wall clock's time every 100 ms, and each
// iteration waits (wait_ms 5000) for the next line; latency-ms is the
// median from the time in the line to the call's return, p90-ms its 90th
// percentile.
//
//	go test ./cmd/jail-mcp -run '^$' -bench '^BenchmarkJobWait$'
func BenchmarkJobWait(b *testing.B) {
	for _, tb := range testkit.Backends() {
		b.Run(tb.Name, func(b *testing.B) {
			ts := startBinary(b, tb, productBinary(b), testkit.NewProject(b), testkit.ServerEnv())
			out, res := ts.Exec(map[string]any{"background": true, "argv": []string{"python3", "-u", "-c",
				"import time\nwhile True:\n time.sleep(0.1)\n print(time.time_ns(), flush=True)"}})
			if res.IsError || out.JobID == "" {
				b.Fatalf("background: %+v %s", out, testkit.ResultText(res))
			}
			args := map[string]any{"job_id": out.JobID, "wait_ms": 5000}
			ts.Job(args) // the first line, and python's start
			var lat []float64
			for b.Loop() {
				r, res := ts.Job(args)
				now := time.Now()
				lines := strings.Fields(r.Stdout)
				if res.IsError || len(lines) == 0 {
					b.Fatalf("jail_job: %+v %s", r, testkit.ResultText(res))
				}
				ns, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
				if err != nil {
					b.Fatalf("line %q: %v", lines[len(lines)-1], err)
				}
				lat = append(lat, float64(now.UnixNano()-ns)/1e6)
			}
			slices.Sort(lat)
			b.ReportMetric(lat[len(lat)/2], "latency-ms")
			b.ReportMetric(lat[len(lat)*9/10], "p90-ms")
		})
	}
}

// BenchmarkConcurrent measures the wall time of a batch of 16 concurrent
// jailed_exec calls of `sleep 0.3` in one session; direct is the same
// batch as 16 plain processes, the floor.
//
//	go test ./cmd/jail-mcp -run '^$' -bench '^BenchmarkConcurrent$' -count 5
func BenchmarkConcurrent(b *testing.B) {
	const calls = 16
	for _, tb := range testkit.Backends() {
		b.Run(tb.Name, func(b *testing.B) {
			ts := tb.Start(b, testkit.NewProject(b), testkit.ServerEnv())
			args := map[string]any{"argv": []string{"sleep", "0.3"}}
			ts.Exec(map[string]any{"argv": []string{"/bin/true"}})
			for b.Loop() {
				var wg sync.WaitGroup
				errs := make(chan error, calls)
				for range calls {
					wg.Go(func() {
						res, err := ts.Call(b.Context(), "jailed_exec", args)
						if err == nil && res.IsError {
							err = fmt.Errorf("%s", testkit.ResultText(res))
						}
						if err != nil {
							errs <- err
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					b.Fatalf("jailed_exec sleep 0.3: %v", err)
				}
			}
		})
	}
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			var wg sync.WaitGroup
			for range calls {
				wg.Go(func() {
					if err := exec.Command("sleep", "0.3").Run(); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
		}
	})
}

// benchFiles is how many files the reset benchmark's tree holds: 100,000,
// 5,000 in short mode.
func benchFiles() int {
	if benchShort {
		return 5000
	}
	return 100000
}

// makeTree fills dir with n small files, 1,000 to a directory.
func makeTree(b *testing.B, dir string, n int) {
	b.Helper()
	for i := range n {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", i/1000))
		if i%1000 == 0 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%04d.txt", i%1000)), []byte("small file\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReset measures jail_reset of a jail holding 100,000 small files
// (ns/op) against `rm -rf` of an identical tree (rm-rf-ms). Both are timed
// in the same iteration, on the same state of the file system, and the
// trees are made outside the timed part. Deleting files on ext4 costs
// more the more deletes and writes are still pending (and, on a disk
// mounted with discard, each delete waits on the device), so before each
// timed part everything is flushed with sync, and the two take turns at
// going first.
//
//	go test ./cmd/jail-mcp -run '^$' -bench '^BenchmarkReset$' -benchtime 2x -count 1
func BenchmarkReset(b *testing.B) {
	n := benchFiles()
	sync := func() {
		if out, err := exec.Command("sync").CombinedOutput(); err != nil {
			b.Fatalf("sync: %v\n%s", err, out)
		}
	}
	for _, tb := range testkit.Backends() {
		b.Run(tb.Name, func(b *testing.B) {
			ts := tb.Start(b, testkit.NewProject(b), testkit.ServerEnv())
			ts.Exec(map[string]any{"argv": []string{"/bin/true"}})
			jailDir := ts.Status().Jail
			base := testkit.NewProject(b)
			var rm time.Duration
			rmrf := func() {
				dir := filepath.Join(base, "tree")
				sync()
				start := time.Now()
				if out, err := exec.Command("rm", "-rf", dir).CombinedOutput(); err != nil {
					b.Fatalf("rm -rf: %v\n%s", err, out)
				}
				rm += time.Since(start)
			}
			reset := func() {
				sync()
				b.StartTimer()
				res, err := ts.Call(b.Context(), "jail_reset", nil)
				b.StopTimer()
				if err != nil || res.IsError {
					b.Fatalf("jail_reset: %v %v", err, res)
				}
				if testkit.FileExists(filepath.Join(jailDir, "tree")) {
					b.Fatal("jail_reset left the tree")
				}
			}
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				makeTree(b, filepath.Join(jailDir, "tree"), n)
				makeTree(b, filepath.Join(base, "tree"), n)
				if i%2 == 0 {
					rmrf()
					reset()
				} else {
					reset()
					rmrf()
				}
			}
			b.ReportMetric(float64(rm.Microseconds())/1000/float64(b.N), "rm-rf-ms")
		})
	}
}

// BenchmarkDisk measures what the disk bound costs a call in a big jail:
// jailed_exec of a command that appends a line to a file, over stdio, in a
// jail holding 100,000 small files (5,000 in short mode) against the same
// in a jail holding nothing (ns/op of <backend>-big and -empty), and the
// walk of the big jail that a count of it takes (walk-ms: what a call would
// pay if it counted the jail). The usage watch counts what a call changed,
// not the jail.
//
//	go test ./cmd/jail-mcp -run '^$' -bench '^BenchmarkDisk$' -count 5
func BenchmarkDisk(b *testing.B) {
	n := benchFiles()
	args := map[string]any{"argv": []string{"/bin/sh", "-c", `echo x >> "$HOME/log"`}}
	for _, tb := range testkit.Backends() {
		for _, size := range []string{"empty", "big"} {
			b.Run(tb.Name+"-"+size, func(b *testing.B) {
				ts := tb.Start(b, testkit.NewProject(b), testkit.ServerEnv())
				ts.Exec(args)
				jailDir := ts.Status().Jail
				var walk time.Duration
				if size == "big" {
					makeTree(b, filepath.Join(jailDir, "tree"), n)
					// The first look after the tree was made reads its events
					// (or scans it again, past the kernel's queue).
					ts.Exec(args)
					start := time.Now()
					files := 0
					filepath.WalkDir(jailDir, func(p string, d os.DirEntry, err error) error {
						if err == nil && !d.IsDir() {
							if _, err := d.Info(); err == nil {
								files++
							}
						}
						return nil
					})
					walk = time.Since(start)
					if files < n {
						b.Fatalf("walked %d files, made %d", files, n)
					}
					// Writing the tree back to disk would otherwise take
					// turns with the calls timed.
					if out, err := exec.Command("sync").CombinedOutput(); err != nil {
						b.Fatalf("sync: %v\n%s", err, out)
					}
				}
				for b.Loop() {
					res, err := ts.Call(context.Background(), "jailed_exec", args)
					if err != nil || res.IsError {
						b.Fatalf("jailed_exec: %v %v", err, res)
					}
				}
				if st := ts.Status(); st.Usage.Files < int64(map[string]int{"empty": 1, "big": n}[size]) {
					b.Fatalf("usage %+v", st.Usage)
				}
				if walk > 0 {
					b.ReportMetric(float64(walk.Microseconds())/1000, "walk-ms")
				}
			})
		}
	}
}

// egressLatencyScript times n new connections from inside the jail to a
// loopback server: through the HTTP proxy (a GET) and through a CONNECT
// tunnel, taking turns, where the call has a proxy, else direct; it
// prints the medians in milliseconds: direct, GET, CONNECT (0: not made).
const egressLatencyScript = `
import http.client, os, socket, statistics, sys, time, urllib.parse
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
name = sys.argv[4]
p = urllib.parse.urlparse(os.environ.get("HTTP_PROXY", ""))
def direct():
    c = http.client.HTTPConnection(host, port); c.request("GET", "/small"); c.getresponse().read(); c.close()
def get():
    c = http.client.HTTPConnection(p.hostname, p.port); c.request("GET", "http://%s:%d/small" % (name, port))
    r = c.getresponse(); r.read(); c.close()
    if r.status != 200: raise SystemExit("GET through the proxy: %d" % r.status)
def tunnel():
    c = http.client.HTTPConnection(p.hostname, p.port); c.set_tunnel(name, port); c.request("GET", "/small"); c.getresponse().read(); c.close()
t = {direct: [], get: [], tunnel: []}
for i in range(n):
    for f in (get, tunnel) if p.hostname else (direct,):
        t0 = time.perf_counter(); f(); t[f].append((time.perf_counter() - t0) * 1000)
print(" ".join("%.4f" % (statistics.median(v) if v else 0) for v in (t[direct], t[get], t[tunnel])))
`

// BenchmarkEgress measures an allowlist's proxy from inside the jail: the
// throughput of a large download from a loopback server through it (a
// plain GET, and a CONNECT tunnel) against the same download direct, and
// the time a new connection takes through it against one made direct.
// One server with network on: the direct calls use it as it is, the
// proxied ones narrow it to the download's host.
//
//	go test ./cmd/jail-mcp -run '^$' -bench '^BenchmarkEgress$' -count 5
func BenchmarkEgress(b *testing.B) {
	size := int64(256 << 20)
	if os.Getenv("JAIL_MCP_BENCH_SHORT") != "" {
		size = 32 << 20
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	zeros := make([]byte, 1<<20)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			fmt.Fprint(w, "ok")
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		for n := size; n > 0; n -= int64(len(zeros)) {
			w.Write(zeros[:min(n, int64(len(zeros)))])
		}
	})}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	allow := []string{"big.test:" + port}
	speed := func(b *testing.B, ts *testkit.Server, url, flags string, narrow bool) float64 {
		args := map[string]any{"command": "curl -sS " + flags + " -o /dev/null -w '%{http_code} %{size_download} %{speed_download}' " + url}
		if narrow {
			args["allow"] = allow
		}
		res, raw := ts.Exec(args)
		f := strings.Fields(res.Stdout)
		if raw.IsError || len(f) != 3 || f[0] != "200" || f[1] != strconv.FormatInt(size, 10) {
			b.Fatalf("curl: %+v %s", res, testkit.ResultText(raw))
		}
		return parseFloat(f[2]) / (1 << 20)
	}
	for _, tb := range testkit.Backends() {
		// The test binary as the server: its proxies resolve big.test.
		ts := tb.Start(b, testkit.NewProject(b), testkit.ServerEnv(testkit.TestHosts+"=big.test=127.0.0.1"), "--auth", "none")
		b.Run(tb.Name+"-transfer", func(b *testing.B) {
			// Each proxied download against the direct one just before
			// it: the direct speed drifts from one to the next more than
			// the proxied one does.
			var direct, get, tunnel, xGet, xTunnel []float64
			for b.Loop() {
				d := speed(b, ts, "http://127.0.0.1:"+port+"/big", "", false)
				g := speed(b, ts, "http://big.test:"+port+"/big", "", true)
				c := speed(b, ts, "http://big.test:"+port+"/big", "-p", true)
				direct, get, tunnel = append(direct, d), append(get, g), append(tunnel, c)
				xGet, xTunnel = append(xGet, g/d), append(xTunnel, c/d)
			}
			b.ReportMetric(median(direct), "direct-MB/s")
			b.ReportMetric(median(get), "get-MB/s")
			b.ReportMetric(median(tunnel), "connect-MB/s")
			b.ReportMetric(median(xGet), "x-get")
			b.ReportMetric(median(xTunnel), "x-connect")
		})
		b.Run(tb.Name+"-connection", func(b *testing.B) {
			var direct, get, tunnel []float64
			for b.Loop() {
				res, raw := ts.Exec(map[string]any{"argv": []string{"python3", "-c", egressLatencyScript, "127.0.0.1", port, "100", "big.test"}, "allow": allow})
				f := strings.Fields(res.Stdout)
				if raw.IsError || len(f) != 3 {
					b.Fatalf("latency: %+v %s", res, testkit.ResultText(raw))
				}
				// A proxied call cannot connect direct: those connections
				// come from a call of its own, right after.
				d, _ := ts.Exec(map[string]any{"argv": []string{"python3", "-c", egressLatencyScript, "127.0.0.1", port, "100", "big.test"}})
				df := strings.Fields(d.Stdout)
				if len(df) != 3 {
					b.Fatalf("direct latency: %+v", d)
				}
				direct = append(direct, parseFloat(df[0]))
				get = append(get, parseFloat(f[1]))
				tunnel = append(tunnel, parseFloat(f[2]))
			}
			b.ReportMetric(median(direct), "direct-ms")
			b.ReportMetric(median(get), "get-ms")
			b.ReportMetric(median(tunnel), "connect-ms")
			b.ReportMetric(median(get)-median(direct), "get-added-ms")
			b.ReportMetric(median(tunnel)-median(direct), "connect-added-ms")
		})
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func parseFloat(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v
}
