//go:build linux || darwin

package jail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// probeRun runs argv once under b in a fresh temporary jail, for at most
// 10 s. It returns "" when the command ran, else what went wrong: the
// command's or the sandbox tool's complaint on stderr, or the error.
func probeRun(ctx context.Context, b Backend, argv ...string) string {
	dir, err := os.MkdirTemp("", "jail-mcp-probe-")
	if err != nil {
		return fmt.Sprintf("create probe directory: %v", err)
	}
	defer os.Remove(dir)
	cmd, err := b.Command(Spec{Argv: argv, Dir: dir, Jail: dir, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		return err.Error()
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := runContext(ctx, b, cmd); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return msg
		}
		return err.Error()
	}
	return ""
}

// runContext starts cmd on b and waits for it or for ctx.
func runContext(ctx context.Context, b Backend, cmd *exec.Cmd) error {
	p, err := b.Start(cmd, nil)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- p.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return errors.Join(ctx.Err(), <-done)
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
