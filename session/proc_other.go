//go:build !linux && !darwin

package session

import "syscall"

// No backend confines on this OS, so Exec refuses before a process starts;
// these exist so that the refusal compiles.
func signalName(sig syscall.Signal) string { return sig.String() }

// closeInheritedFDs has nothing to do here: no command is ever started.
func closeInheritedFDs() error { return nil }

const fileSizeSignal = -1
