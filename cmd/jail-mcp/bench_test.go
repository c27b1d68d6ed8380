//go:build linux

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jail-mcp/jail-mcp/jail"
)

// BenchmarkPerCall measures one /bin/true per iteration, in one run so
// that the ratios compare like with like: plain exec; the bare bwrap line
// of PERFORMANCE.md; each backend's own
// line spawned directly (Command, Start, Wait on the same Spec shape the
// server builds); and the full round trip of jailed_exec {"argv":
// ["/bin/true"]} over stdio through the real server on that backend.
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
		// The bare line of PERFORMANCE.md: what any bwrap jail costs.
		dir, err := filepath.EvalSymlinks(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		args := []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session",
			"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", dir, dir, "/bin/true"}
		for b.Loop() {
			if err := exec.Command("bwrap", args...).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, tb := range testBackends() {
		b.Run(tb.name+"-line", func(b *testing.B) {
			env := map[string]string{}
			for _, kv := range tb.env {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			be, err := jail.Open(b.Context(), tb.name, jail.Options{Getenv: func(k string) string {
				if v, ok := env[k]; ok {
					return v
				}
				return os.Getenv(k)
			}})
			if err != nil {
				b.Fatal(err)
			}
			dir, err := filepath.EvalSymlinks(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			spec := jail.Spec{
				Argv: []string{"/bin/true"}, Dir: dir, Jail: dir, Network: true,
				Env: []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "TMPDIR=" + dir + "/.tmp", "LANG=C.UTF-8"},
			}
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
		b.Run(tb.name+"-server", func(b *testing.B) {
			ts := tb.start(b, newProject(b), serverEnv())
			args := map[string]any{"argv": []string{"/bin/true"}}
			ts.exec(args) // the jail's skeleton and first state copies
			for b.Loop() {
				res, err := ts.call(context.Background(), "jailed_exec", args)
				if err != nil || res.IsError {
					b.Fatalf("jailed_exec: %v %v", err, res)
				}
			}
		})
	}
}
