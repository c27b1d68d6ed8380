//go:build linux

package jail_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jail-mcp/jail-mcp/jail"
)

// BenchmarkBackends measures one /bin/true per iteration, side by side in
// one run: plain exec (the floor), the bare bubblewrap line of
// PERFORMANCE.md, and each backend's full policy through Command, Start
// and Wait. Compare the ratios, not the times.
//
//	go test ./jail -run '^$' -bench Backends -count 5
func BenchmarkBackends(b *testing.B) {
	dir, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bare-bwrap", func(b *testing.B) {
		path, err := exec.LookPath("bwrap")
		if err != nil {
			b.Fatal(err)
		}
		args := []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session",
			"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", dir, dir, "/bin/true"}
		for b.Loop() {
			if err := exec.Command(path, args...).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, name := range []string{"bwrap", "landlock"} {
		b.Run(name, func(b *testing.B) {
			be, err := jail.Open(b.Context(), name, jail.Options{})
			if err != nil {
				b.Fatal(err)
			}
			spec := jail.Spec{Argv: []string{"/bin/true"}, Dir: dir, Jail: dir, Env: []string{"PATH=/usr/bin:/bin"}}
			for b.Loop() {
				cmd, err := be.Command(spec)
				if err != nil {
					b.Fatal(err)
				}
				p, err := be.Start(cmd, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Wait(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
