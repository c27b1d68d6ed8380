//go:build unix && !linux

package testkit

import "errors"

// TestSeccomp: see seccomp_linux.go; no seccomp here.
const TestSeccomp = "JAIL_MCP_TEST_SECCOMP"

func loadSeccomp(string) error { return errors.New("seccomp is Linux's") }
