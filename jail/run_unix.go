//go:build linux || darwin

package jail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// probeRun runs argv once under b in a fresh temporary jail, for at most
// 10 s: the whole path of a call, the session agent included. It returns
// "" when the command ran, else what went wrong: the command's or the
// sandbox tool's complaint on stderr, or the error.
func probeRun(ctx context.Context, b Backend, argv ...string) string {
	dir, err := os.MkdirTemp("", "jail-mcp-probe-")
	if err != nil {
		return fmt.Sprintf("create probe directory: %v", err)
	}
	defer os.Remove(dir)
	jf, err := openDir(dir)
	if err != nil {
		return err.Error()
	}
	if jf != nil {
		defer jf.Close()
	}
	env := []string{"PATH=/usr/bin:/bin"}
	// With a memory bound, as the server's: bubblewrap then sizes its
	// /dev/shm, which a bubblewrap that cannot would refuse here.
	r, err := b.Runner(Spec{Argv: argv, Dir: dir, Jail: dir, JailFile: jf, Env: env, MaxMemory: 64 << 20}, nil)
	if line := startLine(err); line != "" {
		return line // what bwrap or the agent said
	}
	if err != nil {
		return err.Error()
	}
	defer r.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err.Error()
	}
	defer devnull.Close()
	er, ew, err := os.Pipe()
	if err != nil {
		return err.Error()
	}
	var stderr bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&stderr, io.LimitReader(er, 64<<10)); close(copied) }()
	p, err := r.Run(Call{Argv: argv, Env: env, Dir: dir, Stdin: devnull, Stdout: devnull, Stderr: ew})
	ew.Close()
	if err != nil {
		er.Close()
		return err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	type result struct {
		exit Exit
		err  error
	}
	done := make(chan result, 1)
	go func() { e, err := p.Wait(); done <- result{e, err} }()
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		p.Kill()
		res = <-done
		res.err = errors.Join(ctx.Err(), res.err)
	}
	select {
	case <-copied:
	case <-time.After(time.Second):
	}
	er.Close()
	if res.err == nil && res.exit.Code == 0 {
		return ""
	}
	if msg := strings.TrimSpace(stderr.String()); msg != "" {
		return msg
	}
	if res.err != nil {
		return res.err.Error()
	}
	return fmt.Sprintf("exit %d, signal %v", res.exit.Code, res.exit.Signal)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
