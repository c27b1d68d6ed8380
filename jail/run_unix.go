//go:build linux || darwin

package jail

import (
	"context"
	"errors"
	"os/exec"
	"strings"
)

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
