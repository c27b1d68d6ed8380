package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jail-mcp/jail-mcp/auth"
	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/cli"
	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// cfgResult is the outcome of one in-process run of the program.
type cfgResult struct {
	code           int
	stdout, stderr string
}

// runInProcess calls run as main does, with an empty standard input, and
// returns the exit status exitCode computes and what was written.
// exitTimedOut is the contract's status of a jail-mcp run that timed out.
const exitTimedOut = 124

func runInProcess(t *testing.T, args, environ []string) cfgResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := cli.Main(t.Context(), args, environ, strings.NewReader(""), &stdout, &stderr)
	code := cli.ExitCode(err, &stderr)
	return cfgResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// cfgEnv is the environment every test starts from: only PATH, so that a
// JAIL_MCP_* variable of the developer's shell cannot change the outcome.
func cfgEnv(kv ...string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return append([]string{"PATH=" + path}, kv...)
}

// cfgNeedBwrap fails tests that really run a command when bubblewrap cannot
// confine here.
func cfgNeedBwrap(t *testing.T) {
	t.Helper()
	res := runInProcess(t, []string{"doctor", "--backend", "bwrap"}, cfgEnv())
	if res.code != 0 {
		t.Fatalf("bwrap cannot confine here (the tests need it; see README): %s", res.stdout)
	}
}

// cfgOneLine fails unless s is exactly one newline-terminated line.
func cfgOneLine(t *testing.T, s string) {
	t.Helper()
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
		t.Errorf("stderr is not exactly one line:\n%s", s)
	}
}

func TestBadConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		flag  string // without the dashes
		env   string
		value func(t *testing.T, project string) string
		want  []string // more substrings of the message
		// noEnv: the variable cannot carry this value (empty means unset).
		noEnv bool
	}{
		{name: "backend nope", flag: "backend", env: "JAIL_MCP_BACKEND", value: cfgValue("nope"), want: []string{"auto, bwrap, landlock or sandbox-exec"}},
		{name: "fallback maybe", flag: "fallback", env: "JAIL_MCP_FALLBACK", value: cfgValue("maybe"), want: []string{"fail or warn"}},
		{name: "network yes", flag: "network", env: "JAIL_MCP_NETWORK", value: cfgValue("yes"), want: []string{"want on, off, or allow:"}},
		{name: "network empty allowlist", flag: "network", env: "JAIL_MCP_NETWORK", value: cfgValue("allow:"), want: []string{"empty allowlist"}},
		{name: "network allowlist of a TLD", flag: "network", env: "JAIL_MCP_NETWORK", value: cfgValue("allow:github.com,*.com"), want: []string{`"*.com"`, "want a host name"}},
		{name: "network allowlist port", flag: "network", env: "JAIL_MCP_NETWORK", value: cfgValue("allow:github.com:0"), want: []string{"port from 1 to 65535"}},
		{name: "auth bogus", flag: "auth", env: "JAIL_MCP_AUTH", value: cfgValue("bogus"), want: append([]string{"bogus"}, auth.Names()...)},
		{name: "session dotdot", flag: "session", env: "JAIL_MCP_SESSION", value: cfgValue("../x")},
		{name: "session dot", flag: "session", env: "JAIL_MCP_SESSION", value: cfgValue(".")},
		{name: "session too long", flag: "session", env: "JAIL_MCP_SESSION", value: cfgValue(strings.Repeat("a", 65))},
		{name: "session empty", flag: "session", env: "JAIL_MCP_SESSION", value: cfgValue(""), noEnv: true},
		{name: "timeout zero", flag: "timeout", env: "JAIL_MCP_TIMEOUT", value: cfgValue("0s"), want: []string{"positive"}},
		{name: "timeout negative", flag: "timeout", env: "JAIL_MCP_TIMEOUT", value: cfgValue("-1s"), want: []string{"positive"}},
		{name: "timeout abc", flag: "timeout", env: "JAIL_MCP_TIMEOUT", value: cfgValue("abc"), want: []string{"duration"}},
		{name: "timeout above max", flag: "timeout", env: "JAIL_MCP_TIMEOUT", value: cfgValue("20m"), want: []string{"max timeout"}},
		{name: "max-timeout x", flag: "max-timeout", env: "JAIL_MCP_MAX_TIMEOUT", value: cfgValue("x"), want: []string{"duration"}},
		{name: "max-timeout zero", flag: "max-timeout", env: "JAIL_MCP_MAX_TIMEOUT", value: cfgValue("0"), want: []string{"positive"}},
		{name: "max-output 10", flag: "max-output", env: "JAIL_MCP_MAX_OUTPUT", value: cfgValue("10"), want: []string{"256"}},
		{name: "max-output 1e3", flag: "max-output", env: "JAIL_MCP_MAX_OUTPUT", value: cfgValue("1e3")},
		{name: "max-output abc", flag: "max-output", env: "JAIL_MCP_MAX_OUTPUT", value: cfgValue("abc"), want: []string{"byte count"}},
		{name: "max-output 17MiB", flag: "max-output", env: "JAIL_MCP_MAX_OUTPUT", value: cfgValue("17MiB"), want: []string{"16MiB"}},
		{name: "max-output negative", flag: "max-output", env: "JAIL_MCP_MAX_OUTPUT", value: cfgValue("-1000")},
		{name: "pass-env HOME", flag: "pass-env", env: "JAIL_MCP_PASS_ENV", value: cfgValue("HOME"), want: []string{"set by the jail"}},
		{name: "pass-env A-B", flag: "pass-env", env: "JAIL_MCP_PASS_ENV", value: cfgValue("A-B"), want: []string{"variable name"}},
		{name: "pass-env the token", flag: "pass-env", env: "JAIL_MCP_PASS_ENV", value: cfgValue("PATH,JAIL_MCP_TOKEN"), want: []string{"never passed"}},
		{name: "pass-env star", flag: "pass-env", env: "JAIL_MCP_PASS_ENV", value: cfgValue("*"), want: []string{"allowlist"}},
		{name: "pass-env second entry", flag: "pass-env", env: "JAIL_MCP_PASS_ENV", value: cfgValue("GOPATH,XDG_CONFIG_HOME")},
		{name: "mask bogus", flag: "mask", env: "JAIL_MCP_MASK", value: cfgValue("bogus"), want: []string{`"bogus"`, "env:NAME"}},
		{name: "mask a host that is an address", flag: "mask", env: "JAIL_MCP_MASK", value: cfgValue("env:GH_TOKEN@10.0.0.1"), want: []string{"want a host name"}},
		{name: "mask a bad port", flag: "mask", env: "JAIL_MCP_MASK", value: cfgValue("claude@api.example.com:99999"), want: []string{"want a port from 1 to 65535"}},
		{name: "mask a variable not passed", flag: "mask", env: "JAIL_MCP_MASK", value: cfgValue("env:NOT_PASSED@api.example.com"), want: []string{"not passed to commands"}},
		{name: "overlay yes", flag: "overlay", env: "JAIL_MCP_OVERLAY", value: cfgValue("yes"), want: []string{"want auto, on or off"}},
		{name: "apply yes", flag: "apply", env: "JAIL_MCP_APPLY", value: cfgValue("yes"), want: []string{"want ask, allow or never"}},
		{name: "log-level loud", flag: "log-level", env: "JAIL_MCP_LOG_LEVEL", value: cfgValue("loud"), want: []string{"debug, info, warn or error"}},
		{name: "log-level offset", flag: "log-level", env: "JAIL_MCP_LOG_LEVEL", value: cfgValue("info+2")},
		{name: "project missing", flag: "project", env: "JAIL_MCP_PROJECT", value: cfgValue("/nonexistent"), want: []string{"/nonexistent"}},
		{name: "project is a file", flag: "project", env: "JAIL_MCP_PROJECT", value: func(t *testing.T, p string) string {
			f := filepath.Join(p, "file")
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			return f
		}, want: []string{"not a directory"}},
		{name: "root outside", flag: "root", env: "JAIL_MCP_ROOT", value: func(t *testing.T, p string) string { return t.TempDir() }, want: []string{".agent-home"}},
		{name: "root is project", flag: "root", env: "JAIL_MCP_ROOT", value: func(t *testing.T, p string) string { return p }},
		{name: "root escapes by dotdot", flag: "root", env: "JAIL_MCP_ROOT", value: func(t *testing.T, p string) string { return p + "/.agent-home/../x" }},
		{name: "root through symlinked agent-home", flag: "root", env: "JAIL_MCP_ROOT", value: func(t *testing.T, p string) string {
			if err := os.Symlink(t.TempDir(), filepath.Join(p, ".agent-home")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(p, ".agent-home", "x")
		}},
		{name: "writable .git", flag: "writable", env: "JAIL_MCP_WRITABLE", value: cfgValue("node_modules,.git"), want: []string{`".git"`, "protected path .git"}},
		{name: "writable in .claude", flag: "writable", env: "JAIL_MCP_WRITABLE", value: cfgValue(".claude/x"), want: []string{"protected path .claude"}},
		{name: "writable dotdot", flag: "writable", env: "JAIL_MCP_WRITABLE", value: cfgValue("a/../.."), want: []string{"not a clean path"}},
		{name: "writable absolute", flag: "writable", env: "JAIL_MCP_WRITABLE", value: cfgValue("/etc"), want: []string{"not a clean path"}},
		{name: "writable the project", flag: "writable", env: "JAIL_MCP_WRITABLE", value: cfgValue("."), want: []string{"the project itself"}},
		{name: "writable empty entry", flag: "writable", env: "JAIL_MCP_WRITABLE", value: cfgValue("a,,b"), want: []string{"not a clean path"}},
		{name: "writable outside through a symlink", flag: "writable", env: "JAIL_MCP_WRITABLE", value: func(t *testing.T, p string) string {
			if err := os.Symlink(testkit.HostDir(t), filepath.Join(p, "out")); err != nil {
				t.Fatal(err)
			}
			return "out/sub"
		}, want: []string{"outside the project"}},
		{name: "writable a regular file", flag: "writable", env: "JAIL_MCP_WRITABLE", value: func(t *testing.T, p string) string {
			if err := os.WriteFile(filepath.Join(p, "file"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			return "file"
		}, want: []string{"not a directory"}},
		{name: "writable the jail base", flag: "writable", env: "JAIL_MCP_WRITABLE", value: cfgValue(".agent-home"), want: []string{"protected path .agent-home"}},
		{name: "writable in the jail base", flag: "writable", env: "JAIL_MCP_WRITABLE", value: cfgValue(".agent-home/s"), want: []string{"protected path .agent-home"}},
		{name: "writable nested", flag: "writable", env: "JAIL_MCP_WRITABLE", value: cfgValue("node_modules,node_modules/x"), want: []string{"also writable"}},
		{name: "listen without port", flag: "listen", env: "JAIL_MCP_LISTEN", value: cfgValue("127.0.0.1"), want: []string{"want HOST:PORT"}},
		{name: "listen bad port", flag: "listen", env: "JAIL_MCP_LISTEN", value: cfgValue("127.0.0.1:99999"), want: []string{"want HOST:PORT"}},
		{name: "listen on every interface without token", flag: "listen", env: "JAIL_MCP_LISTEN", value: cfgValue(":8765"), want: []string{"not a loopback address", "JAIL_MCP_TOKEN or --token-file"}},
		{name: "listen on a LAN address without token", flag: "listen", env: "JAIL_MCP_LISTEN", value: cfgValue("192.0.2.1:8765"), want: []string{"not a loopback address"}},
		{name: "token on the command line", flag: "token", env: "JAIL_MCP_TOKEN", value: cfgValue("0123456789abcdef"), want: []string{"no value on the command line", "JAIL_MCP_TOKEN", "--token-file"}, noEnv: true},
		{name: "token-file without listen", flag: "token-file", env: "JAIL_MCP_TOKEN_FILE", value: cfgValue("/nonexistent"), want: []string{"set --listen too"}, noEnv: true},
		{name: "max-procs zero", flag: "max-procs", env: "JAIL_MCP_MAX_PROCS", value: cfgValue("0"), want: []string{"positive integer"}},
		{name: "max-procs word", flag: "max-procs", env: "JAIL_MCP_MAX_PROCS", value: cfgValue("many"), want: []string{"positive integer"}},
		{name: "max-memory word", flag: "max-memory", env: "JAIL_MCP_MAX_MEMORY", value: cfgValue("lots"), want: []string{"byte count"}},
		{name: "max-disk negative", flag: "max-disk", env: "JAIL_MCP_MAX_DISK", value: cfgValue("-1GiB"), want: []string{"byte count"}},
		{name: "max-files zero", flag: "max-files", env: "JAIL_MCP_MAX_FILES", value: cfgValue("0"), want: []string{"positive integer"}},
		{name: "max-files word", flag: "max-files", env: "JAIL_MCP_MAX_FILES", value: cfgValue("lots"), want: []string{"positive integer"}},
		{name: "max-sessions zero", flag: "max-sessions", env: "JAIL_MCP_MAX_SESSIONS", value: cfgValue("0"), want: []string{"positive integer"}},
		{name: "max-sessions negative", flag: "max-sessions", env: "JAIL_MCP_MAX_SESSIONS", value: cfgValue("-3"), want: []string{"positive integer"}},
		{name: "max-sessions word", flag: "max-sessions", env: "JAIL_MCP_MAX_SESSIONS", value: cfgValue("many"), want: []string{"positive integer"}},
		{name: "max-sessions fraction", flag: "max-sessions", env: "JAIL_MCP_MAX_SESSIONS", value: cfgValue("2.5"), want: []string{"positive integer"}},
		// The variable alone is not an error without --listen (see
		// TestMaxSessionsNeedsListen): only the flag is.
		{name: "max-sessions without listen", flag: "max-sessions", env: "JAIL_MCP_MAX_SESSIONS", value: cfgValue("5"), want: []string{"set --listen too"}, noEnv: true},
		{name: "max-conns zero", flag: "max-conns", env: "JAIL_MCP_MAX_CONNS", value: cfgValue("0"), want: []string{"positive integer"}},
		{name: "max-conns word", flag: "max-conns", env: "JAIL_MCP_MAX_CONNS", value: cfgValue("many"), want: []string{"positive integer"}},
		{name: "max-conns-per-addr zero", flag: "max-conns-per-addr", env: "JAIL_MCP_MAX_CONNS_PER_ADDR", value: cfgValue("0"), want: []string{"positive integer"}},
		{name: "max-conns without listen", flag: "max-conns", env: "JAIL_MCP_MAX_CONNS", value: cfgValue("5"), want: []string{"set --listen too"}, noEnv: true},
		{name: "max-conns-per-addr without listen", flag: "max-conns-per-addr", env: "JAIL_MCP_MAX_CONNS_PER_ADDR", value: cfgValue("5"), want: []string{"set --listen too"}, noEnv: true},
	}
	for _, tt := range tests {
		for _, by := range []string{"flag", "env"} {
			if by == "env" && tt.noEnv {
				continue
			}
			t.Run(tt.name+"/"+by, func(t *testing.T) {
				t.Parallel()
				p := testkit.NewProject(t)
				value := tt.value(t, p)
				var args, environ []string
				name := "--" + tt.flag
				if by == "flag" {
					if tt.flag != "project" {
						args = []string{"--project", p}
					}
					args = append(args, "--"+tt.flag, value)
					environ = cfgEnv()
				} else {
					if tt.flag != "project" {
						args = []string{"--project", p}
					}
					environ = cfgEnv(tt.env + "=" + value)
					name = tt.env
				}
				res := runInProcess(t, args, environ)
				if res.code != 2 {
					t.Fatalf("exit %d, want 2; stderr:\n%s", res.code, res.stderr)
				}
				cfgOneLine(t, res.stderr)
				if res.stdout != "" {
					t.Errorf("stdout is not empty:\n%s", res.stdout)
				}
				for _, w := range append([]string{name}, tt.want...) {
					if !strings.Contains(res.stderr, w) {
						t.Errorf("stderr does not mention %q:\n%s", w, res.stderr)
					}
				}
				if _, err := os.Lstat(filepath.Join(p, ".agent-home")); err == nil && !strings.Contains(tt.name, "symlink") {
					t.Errorf("a refused configuration created %s", filepath.Join(p, ".agent-home"))
				}
			})
		}
	}
}

// TestMaxSessionsNeedsListen: --max-sessions is for HTTP, so the flag
// without --listen is refused as a mistake, while the variable is ignored
// by stdio servers and by run, so that one exported for HTTP servers does
// not break them. A bad value is refused either way (TestBadConfig).
func TestMaxSessionsNeedsListen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		env  []string
		code int
	}{
		{"flag", []string{"--max-sessions", "5"}, nil, 2},
		{"flag of serve", []string{"serve", "--max-sessions", "5"}, nil, 2},
		{"variable", nil, []string{"JAIL_MCP_MAX_SESSIONS=5"}, 0},
		{"variable and run", []string{"run", "--", "true"}, []string{"JAIL_MCP_MAX_SESSIONS=5"}, 0},
		{"bad variable and run", []string{"run", "--", "true"}, []string{"JAIL_MCP_MAX_SESSIONS=many"}, 0},
		{"connections' variables", nil, []string{"JAIL_MCP_MAX_CONNS=5", "JAIL_MCP_MAX_CONNS_PER_ADDR=9"}, 0},
		{"per address above all", []string{"--listen", "127.0.0.1:0", "--max-conns", "10", "--max-conns-per-addr", "20"}, nil, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := testkit.NewProject(t)
			// The sub-command, if any, then the project, then the rest.
			args := append([]string{"--project", p}, tt.args...)
			if len(tt.args) > 0 && (tt.args[0] == "serve" || tt.args[0] == "run") {
				args = append([]string{tt.args[0], "--project", p}, tt.args[1:]...)
			}
			res := runInProcess(t, args, cfgEnv(tt.env...))
			if res.code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", res.code, tt.code, res.stderr)
			}
			if tt.code == 2 {
				cfgOneLine(t, res.stderr)
				if tt.name == "per address above all" {
					if !strings.Contains(res.stderr, "invalid --max-conns-per-addr 20: more than --max-conns 10") {
						t.Errorf("stderr:\n%s", res.stderr)
					}
				} else if !strings.Contains(res.stderr, "--max-sessions") || !strings.Contains(res.stderr, "--listen") {
					t.Errorf("stderr does not name --max-sessions and --listen:\n%s", res.stderr)
				}
			}
		})
	}
}

// TestTokenNeedsListen: a token (JAIL_MCP_TOKEN, JAIL_MCP_TOKEN_FILE)
// inherited by a stdio server (a client passing its whole environment,
// exported for an HTTP server) is ignored with a warning, and the file is
// not even read.
func TestTokenNeedsListen(t *testing.T) {
	t.Parallel()
	p := testkit.NewProject(t)
	for _, v := range []string{"JAIL_MCP_TOKEN=0123456789abcdef", "JAIL_MCP_TOKEN_FILE=/nonexistent"} {
		name, _, _ := strings.Cut(v, "=")
		for _, args := range [][]string{{"--project", p}, {"run", "--project", p, "--", "true"}} {
			res := runInProcess(t, args, cfgEnv(v))
			if res.code != 0 {
				t.Errorf("%v with %s: exit %d, stderr:\n%s", args, name, res.code, res.stderr)
			}
			if args[0] != "run" && !strings.Contains(res.stderr, name+" is set but this server serves stdio") {
				t.Errorf("no warning on stderr:\n%s", res.stderr)
			}
		}
	}
}

// TestTokenNotOnCommandLine: the bearer token is refused as a flag, in
// either form and wherever it stands, before anything starts, and the
// refusal never repeats it; -h does not show the variable's value as the
// flag's default either. Every local process can read a command line
// (/proc/PID/cmdline), and under the landlock backend so can a jailed
// command.
func TestTokenNotOnCommandLine(t *testing.T) {
	t.Parallel()
	const secret = "jail-mcp-secret-0123456789"
	p := testkit.NewProject(t)
	for _, args := range [][]string{
		{"--token", secret},
		{"--token=" + secret},
		{"--listen", "127.0.0.1:0", "--token", secret},
		{"serve", "--listen", "127.0.0.1:0", "--token=" + secret},
		{"--listen", "0.0.0.0:0", "--token", secret},
	} {
		res := runInProcess(t, append(args, "--project", p), cfgEnv())
		if res.code != 2 {
			t.Fatalf("%v: exit %d, want 2; stderr:\n%s", args, res.code, res.stderr)
		}
		cfgOneLine(t, res.stderr)
		for _, w := range []string{"--token takes no value on the command line", "JAIL_MCP_TOKEN", "--token-file PATH"} {
			if !strings.Contains(res.stderr, w) {
				t.Errorf("%v: stderr does not say %q:\n%s", args, w, res.stderr)
			}
		}
		if strings.Contains(res.stderr, secret) {
			t.Errorf("%v: the refusal repeats the token:\n%s", args, res.stderr)
		}
	}
	res := runInProcess(t, []string{"serve", "-h"}, cfgEnv("JAIL_MCP_TOKEN="+secret))
	if res.code != 0 || !strings.Contains(res.stdout, "-token-file") || strings.Contains(res.stdout, secret) {
		t.Errorf("serve -h with JAIL_MCP_TOKEN set: exit %d, shows the token %t:\n%s", res.code, strings.Contains(res.stdout, secret), res.stdout)
	}
}

// TestTokenFileRefused: --token-file (and JAIL_MCP_TOKEN_FILE) is refused,
// in one line and before the server listens, unless it names a regular
// file only its owner may access that holds a token.
func TestTokenFileRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "jail-mcp-token-0123456789\n", 0o600)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		env  []string
		want string
	}{
		{"group-readable", write("group", "jail-mcp-token-0123456789\n", 0o640), nil, "group or others may access it (mode 0640): chmod 600 it"},
		{"world-readable", write("world", "jail-mcp-token-0123456789\n", 0o604), nil, "mode 0604"},
		{"group-writable", write("gw", "jail-mcp-token-0123456789\n", 0o620), nil, "mode 0620"},
		{"directory", dir, nil, "not a regular file"},
		{"fifo", fifo, nil, "not a regular file"},
		{"missing", filepath.Join(dir, "missing"), nil, "no such file or directory"},
		{"empty", write("empty", "\n", 0o600), nil, "empty"},
		{"short", write("short", "short\n", 0o600), nil, "at least 16 printable characters"},
		{"two lines", write("lines", "jail-mcp-token-0123456789\nmore\n", 0o600), nil, "at least 16 printable characters, no spaces"},
		{"too long", write("long", strings.Repeat("x", 5000), 0o600), nil, "longer than 4096 bytes"},
		{"and the variable", good, []string{"JAIL_MCP_TOKEN=jail-mcp-token-0123456789"}, "JAIL_MCP_TOKEN and --token-file both set: set one"},
	}
	if os.Geteuid() != 0 {
		// (Root reads a file of mode 0000 all the same.)
		tests = append(tests, struct {
			name string
			path string
			env  []string
			want string
		}{"unreadable", write("none", "jail-mcp-token-0123456789\n", 0o000), nil, "permission denied"})
	}
	for _, tt := range tests {
		for _, by := range []string{"flag", "env"} {
			t.Run(tt.name+"/"+by, func(t *testing.T) {
				t.Parallel()
				args := []string{"--project", testkit.NewProject(t), "--listen", "127.0.0.1:0"}
				env := cfgEnv(tt.env...)
				name := "--token-file"
				if by == "flag" {
					args = append(args, "--token-file", tt.path)
				} else {
					env = append(env, "JAIL_MCP_TOKEN_FILE="+tt.path)
					name = "JAIL_MCP_TOKEN_FILE"
				}
				want := tt.want
				if by == "env" && strings.Contains(want, "--token-file") {
					want = strings.ReplaceAll(want, "--token-file", name)
				}
				res := runInProcess(t, args, env)
				if res.code != 2 {
					t.Fatalf("exit %d, want 2; stderr:\n%s", res.code, res.stderr)
				}
				cfgOneLine(t, res.stderr)
				if !strings.Contains(res.stderr, name) || !strings.Contains(res.stderr, want) {
					t.Errorf("stderr does not name %s and say %q:\n%s", name, want, res.stderr)
				}
				if strings.Contains(res.stderr, "jail-mcp-token-0123456789") {
					t.Errorf("the refusal shows the token:\n%s", res.stderr)
				}
			})
		}
	}
}

func cfgValue(v string) func(*testing.T, string) string {
	return func(*testing.T, string) string { return v }
}

// TestBackendValues: landlock is a backend of Linux, named by the flag or
// the variable; sandbox-exec, macOS's, is a valid name that fails closed
// here: nothing runs, and doctor says why.
func TestBackendValues(t *testing.T) {
	t.Parallel()
	for _, by := range []string{"flag", "env"} {
		t.Run("landlock/"+by, func(t *testing.T) {
			t.Parallel()
			p := testkit.NewProject(t)
			args := []string{"run", "--project", p, "--session", "s", "--log-level", "debug"}
			environ := cfgEnv()
			if by == "flag" {
				args = append(args, "--backend", "landlock")
			} else {
				environ = cfgEnv("JAIL_MCP_BACKEND=landlock")
			}
			res := runInProcess(t, append(args, "--", "sh", "-c", `echo hi > "$HOME/f" && cat "$HOME/f"`), environ)
			if res.code != 0 || res.stdout != "hi\n" {
				t.Fatalf("exit %d, stdout %q; stderr:\n%s", res.code, res.stdout, res.stderr)
			}
			if !strings.Contains(res.stderr, "backend=landlock") {
				t.Errorf("stderr does not say the backend is landlock:\n%s", res.stderr)
			}
		})
	}
	t.Run("doctor landlock", func(t *testing.T) {
		t.Parallel()
		res := runInProcess(t, []string{"doctor", "--backend", "landlock"}, cfgEnv())
		if res.code != 0 || !strings.Contains(res.stdout, "landlock: commands run confined by landlock") {
			t.Errorf("exit %d; stdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
		}
	})
	t.Run("sandbox-exec", func(t *testing.T) {
		t.Parallel()
		p := testkit.NewProject(t)
		res := runInProcess(t, []string{"run", "--project", p, "--backend", "sandbox-exec", "--", "sh", "-c", "touch " + p + "/ran"}, cfgEnv())
		if res.code != 125 || !strings.Contains(res.stderr, "sandbox-exec exists only on macOS") {
			t.Errorf("exit %d, want 125 and the reason; stderr:\n%s", res.code, res.stderr)
		}
		if _, err := os.Stat(p + "/ran"); err == nil {
			t.Error("the command ran")
		}
		res = runInProcess(t, []string{"doctor", "--backend", "sandbox-exec"}, cfgEnv())
		if res.code != 1 || !strings.Contains(res.stdout, "sandbox-exec exists only on macOS") {
			t.Errorf("doctor: exit %d, want 1 and the reason; stdout:\n%s", res.code, res.stdout)
		}
	})
}

// TestBadConfigDefaultRoot: without --root, a symlinked .agent-home is
// refused too, never followed.
func TestBadConfigDefaultRoot(t *testing.T) {
	t.Parallel()
	p := testkit.NewProject(t)
	if err := os.Symlink(t.TempDir(), filepath.Join(p, ".agent-home")); err != nil {
		t.Fatal(err)
	}
	res := runInProcess(t, []string{"--project", p}, cfgEnv())
	if res.code != 2 {
		t.Fatalf("exit %d, want 2; stderr:\n%s", res.code, res.stderr)
	}
	cfgOneLine(t, res.stderr)
	if !strings.Contains(res.stderr, "root") {
		t.Errorf("stderr does not name the root:\n%s", res.stderr)
	}
}

// TestBadInvocation covers what is wrong with the command line itself.
func TestBadInvocation(t *testing.T) {
	t.Parallel()
	p := testkit.NewProject(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--project", p, "--bogus"}, "-bogus"},
		{"unknown flag of serve", []string{"serve", "--project", p, "--bogus=1"}, "-bogus"},
		{"unknown flag of run", []string{"run", "--project", p, "--bogus", "--", "true"}, "-bogus"},
		{"listen is not a flag of run", []string{"run", "--project", p, "--listen", "127.0.0.1:1", "--", "true"}, "-listen"},
		{"unknown flag of doctor", []string{"doctor", "--bogus"}, "-bogus"},
		{"flag without value", []string{"--project", p, "--timeout"}, "-timeout"},
		{"unknown sub-command", []string{"frobnicate"}, "frobnicate"},
		{"serve argument", []string{"serve", "--project", p, "extra"}, "extra"},
		{"version argument", []string{"version", "extra"}, "version"},
		{"doctor argument", []string{"doctor", "extra"}, "extra"},
		{"doctor backend", []string{"doctor", "--backend", "nope"}, "--backend"},
		{"run without command", []string{"run", "--project", p}, "no command"},
		{"run without command after dashes", []string{"run", "--project", p, "--"}, "no command"},
		{"run bad config", []string{"run", "--project", p, "--network", "yes", "--", "true"}, "--network"},
		{"run not supported", []string{"run", "--project", p, "--listen", "127.0.0.1:1", "--", "true"}, "flag provided but not defined"},
		{"max-sessions is not a flag of run", []string{"run", "--project", p, "--max-sessions", "3", "--", "true"}, "-max-sessions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := runInProcess(t, tt.args, cfgEnv())
			if res.code != 2 {
				t.Fatalf("exit %d, want 2; stderr:\n%s", res.code, res.stderr)
			}
			cfgOneLine(t, res.stderr)
			if !strings.Contains(res.stderr, tt.want) {
				t.Errorf("stderr does not mention %q:\n%s", tt.want, res.stderr)
			}
			if res.stdout != "" {
				t.Errorf("stdout is not empty:\n%s", res.stdout)
			}
		})
	}
}

func TestCLIVersion(t *testing.T) {
	t.Parallel()
	res := runInProcess(t, []string{"version"}, cfgEnv())
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	re := regexp.MustCompile(`^jail-mcp \S+ go1\.\S+ ` + runtime.GOOS + `/` + runtime.GOARCH + `( commit [0-9a-f]{40}( \(modified\))?)?\n$`)
	if !re.MatchString(res.stdout) {
		t.Errorf("version prints %q, want one line matching %s", res.stdout, re)
	}
}

func TestCLIHelp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "-h"}, []string{"Usage: jail-mcp [serve]", "-project", "JAIL_MCP_MAX_TIMEOUT", "-listen", "JAIL_MCP_TOKEN"}},
		{[]string{"--help"}, []string{"jail-mcp run [flags] -- CMD", "jail-mcp doctor", "jail-mcp version", "Usage: jail-mcp [serve]", "-listen"}},
		{[]string{"run", "-h"}, []string{"Usage: jail-mcp run", "-cwd", "-timeout"}},
		{[]string{"doctor", "-h"}, []string{"Usage: jail-mcp doctor", "-json"}},
		{[]string{"help"}, []string{"jail-mcp run [flags] -- CMD"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			res := runInProcess(t, tt.args, cfgEnv())
			if res.code != 0 {
				t.Fatalf("exit %d, want 0; stderr:\n%s", res.code, res.stderr)
			}
			if res.stderr != "" {
				t.Errorf("help wrote to stderr:\n%s", res.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.stdout, w) {
					t.Errorf("stdout does not contain %q:\n%s", w, res.stdout)
				}
			}
		})
	}
}

// TestFlagWinsOverVariable: a variable supplies the default only, so a bad
// variable under a good flag is never looked at, and a bad flag under a good
// variable is named as the flag.
func TestFlagWinsOverVariable(t *testing.T) {
	cfgNeedBwrap(t)
	t.Parallel()
	tests := []struct {
		name    string
		env     string
		args    []string
		code    int
		mention string
	}{
		{"network", "JAIL_MCP_NETWORK=bogus", []string{"--network", "on"}, 0, ""},
		{"timeout", "JAIL_MCP_TIMEOUT=abc", []string{"--timeout", "5s"}, 0, ""},
		{"backend", "JAIL_MCP_BACKEND=nope", []string{"--backend", "bwrap"}, 0, ""},
		{"session", "JAIL_MCP_SESSION=../x", []string{"--session", "ok"}, 0, ""},
		{"auth", "JAIL_MCP_AUTH=bogus", []string{"--auth", "none"}, 0, ""},
		{"max-output", "JAIL_MCP_MAX_OUTPUT=10", []string{"--max-output", "64KiB"}, 0, ""},
		{"bad flag over good variable", "JAIL_MCP_NETWORK=off", []string{"--network", "yes"}, 2, "--network"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := testkit.NewProject(t)
			args := append(append([]string{"run", "--project", p}, tt.args...), "--", "true")
			res := runInProcess(t, args, cfgEnv(tt.env))
			if res.code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", res.code, tt.code, res.stderr)
			}
			if tt.mention != "" {
				cfgOneLine(t, res.stderr)
				if !strings.Contains(res.stderr, tt.mention) || strings.Contains(res.stderr, "JAIL_MCP_") {
					t.Errorf("stderr should name %s and no variable:\n%s", tt.mention, res.stderr)
				}
			}
		})
	}
	t.Run("project", func(t *testing.T) {
		t.Parallel()
		p := testkit.NewProject(t)
		res := runInProcess(t, []string{"run", "--project", p, "--", "true"}, cfgEnv("JAIL_MCP_PROJECT=/nonexistent"))
		if res.code != 0 {
			t.Fatalf("exit %d, want 0; stderr:\n%s", res.code, res.stderr)
		}
	})
}

func TestRootInsideAgentHome(t *testing.T) {
	cfgNeedBwrap(t)
	t.Parallel()
	for _, by := range []string{"flag", "env"} {
		t.Run(by, func(t *testing.T) {
			t.Parallel()
			p := testkit.NewProject(t)
			root := filepath.Join(p, ".agent-home", "nested")
			args := []string{"run", "--project", p, "--session", "s"}
			environ := cfgEnv()
			if by == "flag" {
				args = append(args, "--root", root)
			} else {
				environ = cfgEnv("JAIL_MCP_ROOT=" + root)
			}
			res := runInProcess(t, append(args, "--", "sh", "-c", `echo hi > "$HOME/f"`), environ)
			if res.code != 0 {
				t.Fatalf("exit %d, want 0; stderr:\n%s", res.code, res.stderr)
			}
			if b, err := os.ReadFile(filepath.Join(root, "s", "f")); err != nil || string(b) != "hi\n" {
				t.Errorf("the jail is not under the nested root: %q, %v", b, err)
			}
		})
	}
	t.Run("root is agent-home", func(t *testing.T) {
		t.Parallel()
		p := testkit.NewProject(t)
		res := runInProcess(t, []string{"run", "--project", p, "--root", filepath.Join(p, ".agent-home"), "--", "true"}, cfgEnv())
		if res.code != 0 {
			t.Fatalf("exit %d, want 0; stderr:\n%s", res.code, res.stderr)
		}
	})
}

func TestRunCommand(t *testing.T) {
	cfgNeedBwrap(t)
	t.Parallel()
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		t.Parallel()
		// runOn is "jail-mcp run" on b: b's flags first, its environment
		// over cfgEnv's.
		runOn := func(t *testing.T, args ...string) cfgResult {
			t.Helper()
			return runInProcess(t, append(append([]string{"run"}, b.Args...), args...), cfgEnv(b.Env...))
		}

		t.Run("backend", func(t *testing.T) {
			t.Parallel()
			res := runOn(t, "--project", testkit.NewProject(t), "--log-level", "debug", "--", "true")
			if res.code != 0 || !strings.Contains(res.stderr, "backend="+b.Name) {
				t.Errorf("exit %d, want 0 and backend=%s on stderr:\n%s", res.code, b.Name, res.stderr)
			}
		})

		t.Run("exit status", func(t *testing.T) {
			t.Parallel()
			res := runOn(t, "--project", testkit.NewProject(t), "--", "sh", "-c", "exit 7")
			if res.code != 7 {
				t.Errorf("exit %d, want 7; stderr:\n%s", res.code, res.stderr)
			}
			if res.stderr != "" {
				t.Errorf("stderr:\n%s", res.stderr)
			}
		})

		t.Run("output streams through", func(t *testing.T) {
			t.Parallel()
			res := runOn(t, "--project", testkit.NewProject(t), "--", "sh", "-c", "echo out; echo err >&2")
			if res.code != 0 || res.stdout != "out\n" || res.stderr != "err\n" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 0, %q, %q", res.code, res.stdout, res.stderr, "out\n", "err\n")
			}
		})

		t.Run("write to HOME", func(t *testing.T) {
			t.Parallel()
			p := testkit.NewProject(t)
			res := runOn(t, "--project", p, "--session", "t", "--", "sh", "-c", `echo x > "$HOME/f" && cat "$HOME/f" && echo "$HOME"`)
			if res.code != 0 {
				t.Fatalf("exit %d, want 0; stderr:\n%s", res.code, res.stderr)
			}
			jail := filepath.Join(p, ".agent-home", "t")
			if want := "x\n" + jail + "\n"; res.stdout != want {
				t.Errorf("stdout %q, want %q", res.stdout, want)
			}
			if got, err := os.ReadFile(filepath.Join(jail, "f")); err != nil || string(got) != "x\n" {
				t.Errorf("host sees %q, %v in the jail, want %q", got, err, "x\n")
			}
			if got, err := os.ReadFile(filepath.Join(p, ".agent-home", ".gitignore")); err != nil || string(got) != "*\n" {
				t.Errorf(".gitignore is %q, %v; want %q", got, err, "*\n")
			}
		})

		t.Run("write to project", func(t *testing.T) {
			t.Parallel()
			// The read-only project (--overlay off), then the defaults:
			// under bubblewrap the project view takes the write into the
			// session's layer, under Landlock the project is read-only.
			for _, view := range []bool{false, true} {
				p := testkit.NewProject(t)
				target := filepath.Join(p, "g")
				args := []string{"--project", p, "--", "sh", "-c", "echo y > " + target + " && cat " + target}
				if !view {
					args = append([]string{"--overlay", "off"}, args...)
				}
				res := runOn(t, args...)
				if wrote := view && b.Name == "bwrap"; (res.code == 0) != wrote || wrote && res.stdout != "y\n" {
					t.Errorf("view %t: writing to the project exited %d (stdout %q), want success %t:\n%s", view, res.code, res.stdout, wrote, res.stderr)
				}
				if _, err := os.Lstat(target); err == nil {
					t.Errorf("view %t: the jailed command created %s", view, target)
				}
			}
		})

		t.Run("not found", func(t *testing.T) {
			t.Parallel()
			res := runOn(t, "--project", testkit.NewProject(t), "--", "/nonexistent/cmd")
			if res.code == 0 {
				t.Errorf("running a missing program exited 0")
			}
		})

		t.Run("timeout", func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			res := runOn(t, "--project", testkit.NewProject(t), "--timeout", "1s", "--", "sleep", "5")
			if d := time.Since(start); d > 4*time.Second {
				t.Errorf("took %v, want about 1s", d)
			}
			if res.code != exitTimedOut {
				t.Fatalf("exit %d, want %d; stderr:\n%s", res.code, exitTimedOut, res.stderr)
			}
			cfgOneLine(t, res.stderr)
			if !strings.Contains(res.stderr, "timed out") {
				t.Errorf("stderr does not say it timed out:\n%s", res.stderr)
			}
		})

		t.Run("nothing outlives", func(t *testing.T) {
			t.Parallel()
			marker := fmt.Sprintf("432109.%d%d", os.Getpid(), len(b.Name))
			res := runOn(t, "--project", testkit.NewProject(t), "--", "sh", "-c", fmt.Sprintf("setsid sleep %s & (sleep %s &); echo started", marker, marker))
			if res.code != 0 || res.stdout != "started\n" {
				t.Errorf("exit %d, stdout %q; stderr:\n%s", res.code, res.stdout, res.stderr)
			}
			if !testkit.WaitFor(2*time.Second, func() bool { return len(testkit.ProcessesWith(marker)) == 0 }) {
				t.Errorf("left running after run returned: %v", testkit.ProcessesWith(marker))
			}
		})

		t.Run("killed by a signal", func(t *testing.T) {
			t.Parallel()
			res := runOn(t, "--project", testkit.NewProject(t), "--", "sh", "-c", "kill -TERM $$")
			if res.code != 128+15 {
				t.Errorf("exit %d, want %d; stderr:\n%s", res.code, 128+15, res.stderr)
			}
		})
	})
}

// TestServeInProcess: a good configuration serves, stdout carries JSON-RPC
// only, and the end of standard input is a clean stop.
func TestServeInProcess(t *testing.T) {
	cfgNeedBwrap(t)
	p := testkit.NewProject(t)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	}, "\n") + "\n"
	var stdout, stderr bytes.Buffer
	err := cli.Main(t.Context(), []string{"--project", p, "--session", "s", "--log-level", "debug"}, cfgEnv(), strings.NewReader(in), &stdout, &stderr)
	if code := cli.ExitCode(err, &stderr); code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr.String())
	}
	ids := map[float64]bool{}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var msg struct {
			JSONRPC string  `json:"jsonrpc"`
			ID      float64 `json:"id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil || msg.JSONRPC != "2.0" {
			t.Errorf("stdout line is not JSON-RPC: %q", sc.Text())
			continue
		}
		ids[msg.ID] = true
	}
	if !ids[1] || !ids[2] {
		t.Errorf("responses to ids 1 and 2 missing; stdout:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "starting") {
		t.Errorf("no starting line on stderr:\n%s", stderr.String())
	}
	if fi, err := os.Stat(filepath.Join(p, ".agent-home", "s", ".tmp")); err != nil || !fi.IsDir() {
		t.Errorf("session jail skeleton missing: %v", err)
	}
}

// TestRunBrokenBwrap: jail-mcp run starts its one command without a trial
// run first, so a bubblewrap that passes the cheap checks but cannot set up
// its sandbox is recognised afterwards: exit 125 with the reason, nothing
// ran, and under auto the hint that Landlock confines here. A command that
// itself prints a bwrap-like line and exits 1 keeps its status.
func TestRunBrokenBwrap(t *testing.T) {
	cfgNeedBwrap(t)
	t.Parallel()
	fake := t.TempDir()
	script := "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(fake, "bwrap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{"bwrap", "auto"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			p := testkit.NewProject(t)
			env := cfgEnv()
			env[0] = "PATH=" + fake + ":" + strings.TrimPrefix(env[0], "PATH=")
			res := runInProcess(t, []string{"run", "--project", p, "--backend", backend, "--", "sh", "-c", "touch " + p + "/ran"}, env)
			if res.code != 125 || !strings.Contains(res.stderr, "bubblewrap cannot create its sandbox here: bwrap: setting up uid map: Permission denied") {
				t.Errorf("exit %d, want 125 and the reason; stderr:\n%s", res.code, res.stderr)
			}
			if hint := strings.Contains(res.stderr, "--backend landlock confines here"); hint != (backend == "auto") {
				t.Errorf("landlock hint given: %v, want %v; stderr:\n%s", hint, backend == "auto", res.stderr)
			}
			if _, err := os.Stat(p + "/ran"); err == nil {
				t.Error("the command ran")
			}
		})
	}
	t.Run("a command that looks like bwrap", func(t *testing.T) {
		t.Parallel()
		res := runInProcess(t, []string{"run", "--project", testkit.NewProject(t), "--backend", "bwrap", "--", "sh", "-c", "echo 'bwrap: not really' >&2; exit 1"}, cfgEnv())
		if res.code != 1 || res.stderr != "bwrap: not really\n" {
			t.Errorf("exit %d, stderr %q; want 1 and the command's own line", res.code, res.stderr)
		}
	})
}

// TestBadConfigReachesTheClient: a stdio server started by a client with a
// bad configuration completes the handshake and answers every tool call
// with the reason and the fix, and says it on stderr; it exits 2.
func TestBadConfigReachesTheClient(t *testing.T) {
	project := testkit.NewProject(t)
	for _, args := range [][]string{
		{"--project", "/path/to/your/project"},
		{"--max-timeout", "forever"},
		{"--no-such-flag"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			ts := testkit.StartServerCmd(t, project, testkit.ServerEnv(), nil, args...)
			list, err := ts.Client.ListTools(t.Context(), mcp.ListToolsRequest{})
			if err != nil || len(list.Tools) != 4 {
				t.Fatalf("tools/list: %v %+v", err, list)
			}
			for _, tool := range []string{"jailed_exec", "jail_status", "jail_reset", "jail_job"} {
				res, err := ts.Call(t.Context(), tool, map[string]any{"command": "true"})
				if err != nil || !res.IsError {
					t.Fatalf("%s: %v %+v", tool, err, res)
				}
				msg := testkit.ResultText(res)
				if !strings.Contains(msg, "configuration is bad") || !strings.Contains(msg, strings.TrimLeft(args[0], "-")) || !strings.Contains(msg, "restart the server") || strings.Contains(msg, "\n") {
					t.Errorf("%s: %q", tool, msg)
				}
			}
			ts.Client.Close()
			if err := ts.Cmd.Wait(); err == nil || ts.Cmd.ProcessState.ExitCode() != 2 {
				t.Errorf("exit: %v", err)
			}
			if !strings.Contains(ts.Stderr.String(), strings.TrimLeft(args[0], "-")) {
				t.Errorf("stderr does not say why:\n%s", ts.Stderr)
			}
			if _, err := os.Lstat(filepath.Join(project, ".agent-home")); err == nil {
				t.Errorf("a bad configuration created the jail base")
			}
		})
	}
}

// TestBadConfigOnATerminal: run by hand (a terminal on stdin), a server
// with a bad configuration exits 2 at once, saying why in one line.
func TestBadConfigOnATerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	cmd := exec.Command(os.Args[0], "--project", "/path/to/your/project")
	cmd.Env = testkit.ServerEnv()
	cmd.Stdin = tty
	var stderr strings.Builder
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("still running with a bad configuration on a terminal")
	}
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(stderr.String(), "--project") || strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("exit %d, stderr %q", cmd.ProcessState.ExitCode(), stderr.String())
	}
}

// TestWritableMadeAtStart: the --writable paths missing at start are made
// as directories, and nothing else; a refused value makes none.
func TestWritableMadeAtStart(t *testing.T) {
	t.Parallel()
	cfgNeedBwrap(t)
	p := testkit.NewProject(t)
	res := runInProcess(t, []string{"run", "--project", p, "--writable", "node_modules,web/dist/assets", "--", "true"}, cfgEnv())
	if res.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", res.code, res.stderr)
	}
	for _, d := range []string{"node_modules", "web/dist/assets"} {
		if fi, err := os.Lstat(filepath.Join(p, d)); err != nil || !fi.IsDir() {
			t.Errorf("%s not made: %v", d, err)
		}
	}
	res = runInProcess(t, []string{"run", "--project", p, "--writable", "made,.git", "--", "true"}, cfgEnv())
	if res.code != 2 || testkit.FileExists(filepath.Join(p, "made")) {
		t.Errorf("refused value: exit %d, made exists %t; stderr:\n%s", res.code, testkit.FileExists(filepath.Join(p, "made")), res.stderr)
	}
}

// TestDoctorWritable: doctor says which directories of the project
// commands write in place, in text and JSON, checks them as the server
// does, and makes none of them.
func TestDoctorWritable(t *testing.T) {
	t.Parallel()
	cfgNeedBwrap(t)
	p := testkit.NewProject(t)
	res := runInProcess(t, []string{"doctor", "--backend", "bwrap", "--project", p}, cfgEnv("JAIL_MCP_WRITABLE=node_modules,build"))
	want := "WARNING: commands write these directories of the project in place, on the host (--writable): " + filepath.Join(p, "node_modules") + ", " + filepath.Join(p, "build") + "\n"
	if res.code != 0 || !strings.Contains(res.stdout, want) {
		t.Errorf("doctor: exit %d, no line %q:\n%s%s", res.code, want, res.stdout, res.stderr)
	}
	res = runInProcess(t, []string{"doctor", "--json", "--backend", "bwrap", "--project", p, "--writable", "node_modules"}, cfgEnv())
	var r cli.DoctorReport
	if err := json.Unmarshal([]byte(res.stdout), &r); err != nil || !slices.Equal(r.Writable, []string{filepath.Join(p, "node_modules")}) {
		t.Errorf("doctor --json: writable %q (%v):\n%s", r.Writable, err, res.stdout)
	}
	res = runInProcess(t, []string{"doctor", "--json", "--backend", "bwrap", "--project", p}, cfgEnv())
	if !strings.Contains(res.stdout, `"writable": []`) {
		t.Errorf("doctor --json without --writable:\n%s", res.stdout)
	}
	res = runInProcess(t, []string{"doctor", "--backend", "bwrap", "--project", p}, cfgEnv())
	if !strings.Contains(res.stdout, "writes in place in the project: none") {
		t.Errorf("doctor without --writable:\n%s", res.stdout)
	}
	res = runInProcess(t, []string{"doctor", "--project", p, "--writable", ".git"}, cfgEnv())
	if res.code != 2 || !strings.Contains(res.stderr, "protected path .git") {
		t.Errorf("doctor --writable .git: exit %d:\n%s", res.code, res.stderr)
	}
	for _, d := range []string{"node_modules", "build"} {
		if testkit.FileExists(filepath.Join(p, d)) {
			t.Errorf("doctor made %s", d)
		}
	}
}
