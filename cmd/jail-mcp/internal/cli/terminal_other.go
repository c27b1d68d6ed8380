//go:build !linux && !darwin

package cli

import "io"

// terminalState is empty where no backend confines: no command runs.
type terminalState struct{}

func saveTerminal(io.Reader) (*terminalState, error) { return nil, nil }

func (*terminalState) restore() error { return nil }

// IsTerminal is false here: no terminal is told apart.
func IsTerminal(io.Reader) bool { return false }
