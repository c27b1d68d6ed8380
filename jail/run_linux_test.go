package jail_test

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/jail-mcp/jail-mcp/jail"
)

// started is a command started under a backend by runSpec's parts.
type started struct {
	r              jail.Runner
	p              jail.Process
	stdout, stderr *bytes.Buffer
	copies         sync.WaitGroup
}

// start starts spec under b: a runner of its own (an agent where b has
// them), its output collected.
func start(t *testing.T, b jail.Backend, spec jail.Spec) *started {
	t.Helper()
	if spec.JailFile == nil {
		jf, err := os.OpenFile(spec.Jail, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { jf.Close() })
		spec.JailFile = jf
	}
	r, err := b.Runner(spec, nil)
	if err != nil {
		t.Fatalf("Runner(%s): %v", spec, err)
	}
	t.Cleanup(r.Close)
	s := &started{r: r, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	pipe := func(dst *bytes.Buffer) *os.File {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		s.copies.Go(func() { io.Copy(dst, pr); pr.Close() })
		return pw
	}
	wout, werr := pipe(s.stdout), pipe(s.stderr)
	s.p, err = r.Run(jail.Call{Argv: spec.Argv, Env: spec.Env, Dir: spec.Dir, Stdin: devnull, Stdout: wout, Stderr: werr})
	wout.Close()
	werr.Close()
	if err != nil {
		t.Fatalf("Run %q: %v", spec.Argv, err)
	}
	return s
}

// wait waits for the command and its output.
func (s *started) wait() (jail.Exit, error) {
	e, err := s.p.Wait()
	s.copies.Wait()
	return e, err
}

// runSpec runs spec under b to its end.
func runSpec(t *testing.T, b jail.Backend, spec jail.Spec) (stdout, stderr string, exit jail.Exit, err error) {
	t.Helper()
	s := start(t, b, spec)
	exit, err = s.wait()
	return s.stdout.String(), s.stderr.String(), exit, err
}

// TestSelfBinaryTakenOver: when the descriptor a backend holds the
// server's binary by refers to another file (closed by mistake elsewhere
// in the server, its number reused), an agent's start says so instead of
// failing with a bare "permission denied" or running that file.
func TestSelfBinaryTakenOver(t *testing.T) {
	for _, name := range []string{"bwrap", "landlock"} {
		t.Run(name, func(t *testing.T) {
			b, err := jail.Open(t.Context(), name, jail.Options{})
			if err != nil {
				t.Fatalf("open %s: %v", name, err)
			}
			fd := jail.SelfBinaryFd(b)
			if fd < 0 {
				t.Fatalf("%s holds no binary for agents: Landlock ABI 6 or later is needed", name)
			}
			null, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			defer null.Close()
			if err := unix.Dup3(int(null.Fd()), fd, unix.O_CLOEXEC); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			jf, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer jf.Close()
			_, err = b.Runner(jail.Spec{Argv: []string{"/bin/true"}, Dir: dir, Jail: dir, JailFile: jf, Env: []string{"PATH=/bin"}}, nil)
			if err == nil || !strings.Contains(err.Error(), "is not any more (now /dev/null)") {
				t.Fatalf("start with the binary's descriptor taken over: %v", err)
			}
		})
	}
}
