//go:build linux

package jail_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-mcp/jail-mcp/jail"
)

// TestLandlockSeccompFilter pins the landlock backend's seccomp filters,
// per architecture, network setting and server uid, as hex.
func TestLandlockSeccompFilter(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		for _, network := range []string{"on", "off", "proxy"} {
			for _, root := range []bool{false, true} {
				// (on and off keep the names of their first golden files)
				net := map[string]string{"on": "true", "off": "false", "proxy": "proxy"}[network]
				name := fmt.Sprintf("landlock_seccomp_%s_net%s_root%t", arch, net, root)
				t.Run(name, func(t *testing.T) {
					got, err := jail.LandlockSeccomp(arch, network, root)
					if err != nil {
						t.Fatal(err)
					}
					golden(t, filepath.Join("testdata", name+".golden"), filterHex(t, got))
				})
			}
		}
	}
}

// TestOpenLandlockABI: below the minimum ABI, or without Landlock, the
// backend refuses with the reason and the fix; it never runs with fewer
// rights than it claims.
func TestOpenLandlockABI(t *testing.T) {
	for _, tt := range []struct {
		name       string
		abi        int
		err        error
		wantReason string
	}{
		{"disabled", 0, unix.EOPNOTSUPP, "Landlock is not enabled"},
		{"absent", 0, unix.ENOSYS, "Landlock is not enabled"},
		{"abi 4", 4, nil, "Landlock ABI 4 here; jail-mcp needs ABI 6"},
		{"abi 5", 5, nil, "Landlock ABI 5 here; jail-mcp needs ABI 6"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := jail.Options{LandlockABI: func() (int, error) { return tt.abi, tt.err }}
			b, err := jail.Open(t.Context(), "landlock", opts)
			if err == nil {
				t.Fatalf("Open(landlock) = %s, want error", b.Name())
			}
			var ue *jail.UnavailableError
			if !errors.As(err, &ue) || !errors.Is(err, jail.ErrUnavailable) {
				t.Fatalf("error %v is not an UnavailableError", err)
			}
			if !strings.Contains(ue.Reason, tt.wantReason) || !strings.Contains(ue.Hint, "bubblewrap") {
				t.Errorf("reason %q hint %q, want %q and a fix", ue.Reason, ue.Hint, tt.wantReason)
			}
			// auto without bwrap and without a usable Landlock fails
			// closed, saying why for both.
			opts.Getenv = func(k string) string { return map[string]string{"PATH": "/nonexistent"}[k] }
			b, err = jail.Open(t.Context(), "auto", opts)
			if err == nil {
				t.Fatalf("Open(auto) = %s, want error", b.Name())
			}
			if !errors.As(err, &ue) || ue.Backend != "bwrap" || !strings.Contains(ue.Reason, "landlock: "+tt.wantReason) {
				t.Errorf("auto: %v, want bwrap's reason and landlock's", err)
			}
		})
	}
}

// TestAutoPicksLandlockWithoutBwrap: with bubblewrap absent, auto is the
// landlock backend, which confines.
func TestAutoPicksLandlockWithoutBwrap(t *testing.T) {
	opts := jail.Options{Getenv: func(k string) string { return map[string]string{"PATH": "/nonexistent"}[k] }}
	b, err := jail.Open(t.Context(), "auto", opts)
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != "landlock" || !b.Confined() || b.Credentials() != jail.LinkCredentials {
		t.Fatalf("auto = %s confined %t credentials %d", b.Name(), b.Confined(), b.Credentials())
	}
	reports := jail.Detect(t.Context(), opts)
	if len(reports) != 3 || reports[0].Available || !reports[1].Available || reports[1].ABI < jail.MinLandlockABI {
		t.Errorf("reports %+v", reports)
	}
}

func openLandlock(t *testing.T) jail.Backend {
	t.Helper()
	return openBackend(t, "landlock", jail.Options{})
}

// openBackend is the backend name with opts; the test fails when it
// cannot be opened.
func openBackend(t *testing.T, name string, opts jail.Options) jail.Backend {
	t.Helper()
	b, err := jail.Open(t.Context(), name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runLandlock runs script in a fresh jail under b and returns its output.
func runLandlock(t *testing.T, b jail.Backend, network bool, script string, env ...string) (jailDir, stdout, stderr string, err error) {
	t.Helper()
	jailDir = canonTemp(t)
	spec := jail.Spec{
		Argv:    []string{"/bin/sh", "-c", script},
		Dir:     jailDir,
		Env:     append([]string{"PATH=/usr/bin:/bin", "HOME=" + jailDir}, env...),
		Jail:    jailDir,
		Network: network,
	}
	stdout, stderr, exit, err := runSpec(t, b, spec)
	if err == nil && exit.Code != 0 {
		err = fmt.Errorf("exit %+v", exit)
	}
	return jailDir, stdout, stderr, err
}

func canonTemp(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestLandlockConfines runs real commands under the landlock backend.
func TestLandlockConfines(t *testing.T) {
	b := openLandlock(t)
	outside := canonTemp(t)
	if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("writes only in the jail", func(t *testing.T) {
		jailDir, out, _, err := runLandlock(t, b, true, `
echo ok > "$HOME/f" && mkdir "$HOME/d" && mv "$HOME/f" "$HOME/d/g" && ln -s g "$HOME/d/l" && cat "$HOME/d/l"
for f in "$OUTSIDE/keep" "$OUTSIDE/new" /etc/jail-mcp-test /tmp/jail-mcp-test-$$ /dev/shm/jail-mcp-test-$$; do
	if (echo bad > "$f") 2>/dev/null; then echo "ESCAPED $f"; fi
done
mv "$HOME/d/g" "$OUTSIDE/moved" 2>/dev/null && echo "ESCAPED rename out"
: > /dev/null && echo devnull
`, "OUTSIDE="+outside)
		if err != nil || strings.Contains(out, "ESCAPED") || !strings.Contains(out, "ok\n") || !strings.Contains(out, "devnull") {
			t.Fatalf("err %v, output %q", err, out)
		}
		if b, _ := os.ReadFile(filepath.Join(jailDir, "d", "g")); string(b) != "ok\n" {
			t.Errorf("jail file %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(outside, "keep")); string(b) != "keep\n" {
			t.Errorf("outside file changed: %q", b)
		}
	})

	t.Run("no privileges", func(t *testing.T) {
		_, out, _, err := runLandlock(t, b, true, `grep -E '^(CapEff|CapPrm|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status; cat /proc/self/stat | cut -d' ' -f6; echo sid; (ps -o sid= -p $$ 2>/dev/null || true)`)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
			if !strings.Contains(out, want) {
				t.Errorf("missing %q in %q", want, out)
			}
		}
	})

	t.Run("sockets and ipc", func(t *testing.T) {
		_, out, _, err := runLandlock(t, b, true, `python3 -c '
import socket, ctypes, os
def try_(name, f):
    try:
        f()
        print("ESCAPED", name)
    except OSError as e:
        print("denied", name, e.errno)
try_("unix socket", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
libc = ctypes.CDLL(None, use_errno=True)
for name, r in (("shmget", libc.shmget(0, 4096, 0o1600)), ("msgget", libc.msgget(0, 0o1600)), ("semget", libc.semget(0, 1, 0o1600))):
    print("ESCAPED" if r >= 0 else "denied", name, ctypes.get_errno())
print("ESCAPED" if libc.unshare(0x10000000) == 0 else "denied", "unshare user")
a, b = socket.socketpair()
print("socketpair ok")
'`)
		if err != nil || strings.Contains(out, "ESCAPED") || !strings.Contains(out, "socketpair ok") {
			t.Fatalf("err %v output %q", err, out)
		}
	})

	t.Run("network off", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		script := `python3 -c '
import socket, sys
port = int(sys.argv[1])
for name, f in (("tcp", lambda: socket.create_connection(("127.0.0.1", port), timeout=2)),
                ("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", port)))):
    try:
        f()
        print("reached", name)
    except OSError as e:
        print("cut", name)
' ` + strconv.Itoa(port)
		_, out, _, err := runLandlock(t, b, false, script)
		if err != nil || strings.Contains(out, "reached") || strings.Count(out, "cut") != 2 {
			t.Errorf("network off: err %v output %q", err, out)
		}
		_, out, _, err = runLandlock(t, b, true, script)
		if err != nil || strings.Count(out, "reached") != 2 {
			t.Errorf("network on: err %v output %q", err, out)
		}
	})

	t.Run("signals fenced", func(t *testing.T) {
		host := exec.Command("sleep", "60")
		if err := host.Start(); err != nil {
			t.Fatal(err)
		}
		defer host.Process.Kill()
		_, out, _, err := runLandlock(t, b, true, `kill -9 `+strconv.Itoa(host.Process.Pid)+` 2>&1; kill -9 -1 2>&1; echo done`)
		if err != nil || !strings.Contains(out, "done") {
			t.Fatalf("err %v output %q", err, out)
		}
		if err := host.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("the host process was killed from the jail: %v", err)
		}
	})

	t.Run("nothing outlives the call", func(t *testing.T) {
		marker := fmt.Sprintf("jail-mcp-landlock-%d", time.Now().UnixNano())
		_, _, _, err := runLandlock(t, b, true, `
setsid sh -c 'exec sleep 600 '`+marker+` >/dev/null 2>&1 &
(sleep 601 `+marker+` >/dev/null 2>&1 &) &
nohup sh -c 'trap "" HUP TERM; exec sleep 602 `+marker+`' >/dev/null 2>&1 &
sleep 0.2`)
		if err != nil {
			t.Fatal(err)
		}
		// Wait returned: everything is gone already, no grace needed.
		if left := withMarker(marker); len(left) > 0 {
			t.Errorf("processes outlived the call: %v", left)
		}
	})

	t.Run("tree counted", func(t *testing.T) {
		dir := canonTemp(t)
		s := start(t, b, jail.Spec{Argv: []string{"/bin/sh", "-c", "for i in 1 2 3 4; do setsid sleep 30 & done; sleep 30"}, Dir: dir, Jail: dir, Env: []string{"PATH=/usr/bin:/bin"}})
		deadline := time.Now().Add(5 * time.Second)
		procs := 0
		for time.Now().Before(deadline) {
			if procs = s.p.Tree().Tasks; procs >= 6 { // sh and 5 sleeps
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		s.p.Kill()
		s.wait()
		if procs != 6 {
			t.Errorf("Tree counted %d processes, want 6", procs)
		}
	})
}

// withMarker lists live processes whose command line holds marker.
func withMarker(marker string) []string {
	var out []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) {
			out = append(out, d.Name()+" "+string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	return out
}
