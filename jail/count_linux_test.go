package jail_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/jail"
)

// countScript holds what a call's resident sets do not show, and waits:
// 40 threads, 24 MiB in a memfd written with write(2), and where it may
// (bwrap's own /dev/shm and IPC namespace), 20 MiB in a file of /dev/shm
// and 16 MiB in a System V segment it no longer maps.
const countScript = `
import ctypes, os, threading, time
stop = threading.Event()
for _ in range(40):
    threading.Thread(target=stop.wait, daemon=True).start()
fd = os.memfd_create("count")
for _ in range(24):
    os.write(fd, b"m" * (1 << 20))
if os.environ.get("SHARED"):
    with open("/dev/shm/count", "wb") as f:
        f.write(b"s" * (20 << 20))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    libc.shmdt.argtypes = [ctypes.c_void_p]
    id = libc.shmget(0, 16 << 20, 0o1600)
    p = libc.shmat(id, None, 0)
    ctypes.memset(p, 1, 16 << 20)
    libc.shmdt(p)
time.sleep(60)
`

// TestCount runs a call that holds memory no resident set shows, under a
// session agent of each backend: the agent counts its threads as tasks,
// its memfds, and under bwrap the sandbox's /dev/shm and System V
// segments, which outlive the call: over Spec.MaxMemory, the agent starts
// no call.
func TestCount(t *testing.T) {
	const mib = 1 << 20
	for _, name := range []string{"bwrap", "landlock"} {
		t.Run(name, func(t *testing.T) {
			b, err := jail.Open(t.Context(), name, jail.Options{})
			if err != nil {
				t.Fatal(err)
			}
			shared := name == "bwrap"
			dir := canonTemp(t)
			env := []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
			if shared {
				env = append(env, "SHARED=1")
			}
			spec := jail.Spec{Argv: []string{"python3", "-c", countScript}, Dir: dir, Env: env, Jail: dir, MaxMemory: 32 * mib}
			s := start(t, b, spec)
			want := jail.Count{Tasks: 41, Memory: 24 * mib}
			if shared {
				want.Shared = 36 * mib
				want.Memory += want.Shared
			}
			var c jail.Count
			// Until the agent has seen it all (it looks every
			// TreeInterval, the memfds when the host's shared memory grew).
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if c = s.p.Tree(); c.Tasks >= want.Tasks && c.Memory >= want.Memory && c.Shared >= want.Shared {
					break
				}
			}
			s.p.Kill()
			s.wait()
			t.Logf("counted %+v", c)
			if c.Tasks < want.Tasks || c.Memory < want.Memory || c.Shared < want.Shared || c.Shared > want.Shared+mib || c.Memory > want.Memory+200*mib {
				t.Fatalf("counted %+v, want %+v (stdout %q, stderr %q)", c, want, s.stdout, s.stderr)
			}

			// What the sandbox's shared memory holds outlived the call,
			// in the same agent.
			devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer devnull.Close()
			p, err := s.r.Run(jail.Call{Argv: []string{"/bin/true"}, Env: env, Dir: dir, Stdin: devnull, Stdout: devnull, Stderr: devnull})
			if err == nil {
				_, err = p.Wait()
			}
			var held *jail.SharedMemoryError
			if shared != errors.As(err, &held) || shared && held.Bytes < want.Shared {
				t.Fatalf("the call after: %v", err)
			}
		})
	}
}
