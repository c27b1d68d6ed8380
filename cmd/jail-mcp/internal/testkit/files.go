//go:build unix

package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/jail"
)

// Tail is the end of s, for a failure message.
func Tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}

// Python3 is the interpreter the attacks use: the system one, so that no
// shim (pyenv, say) writes into a home it expects to own.
func Python3(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("the escape suite needs python3")
	}
	return p
}

// Within reports whether path is dir or below it: jail.Within, by a name
// the suite's tests can reach where a variable of theirs is called jail.
func Within(path, dir string) bool { return jail.Within(path, dir) }

// WaitFor polls cond every 20 ms until it holds or d has passed.
func WaitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

// FileExists reports whether path exists (a link counts as itself).
func FileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// MustRead is the content of path; the test fails without it.
func MustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// HostDir is a fresh directory of the host in plain view of every
// backend's jail: not under the directories bubblewrap shadows (/tmp,
// /var/tmp, /run), where an attack aimed at it would fail for the wrong
// reason. It is under the tester's cache directory.
func HostDir(t *testing.T) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("no cache directory for the suite's host directories: %v", err)
	}
	base = filepath.Join(base, "jail-mcp-test")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	// A tester's HOME in /tmp (a throw-away CI user's, say) puts the
	// cache where every jail hides it: the attacks would fail for that.
	if real, err := filepath.EvalSymlinks(base); err == nil {
		for _, d := range jail.ShadowDirs {
			if rd, err := filepath.EvalSymlinks(d); err == nil && Within(real, rd) {
				t.Fatalf("the suite's host directories would be in %s, under %s, which every jail hides: set XDG_CACHE_HOME (or HOME) to a directory outside %s", base, d, strings.Join(jail.ShadowDirs, ", "))
			}
		}
	}
	dir, err := os.MkdirTemp(base, "host-")
	if err != nil {
		t.Fatal(err)
	}
	// World-searchable like /tmp's, so that an unprivileged jail reaches
	// what a root test put there.
	os.Chmod(dir, 0o755)
	dir, err = filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { RemoveAllForce(dir) })
	return dir
}

// RemoveAllForce removes dir even where an attack left directories
// without rights.
func RemoveAllForce(dir string) {
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	os.RemoveAll(dir)
}
