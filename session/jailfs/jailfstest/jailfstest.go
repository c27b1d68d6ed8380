// Package jailfstest holds what tests of a jail on disk share across
// packages: trees made and removed the way a hostile command leaves them
// (chains deeper than a path may be), and the host's own count of a tree
// to hold a jail's counting against. It imports nothing of the server, so
// the packages it helps test may use it from their own tests.
package jailfstest

import (
	"os"
	"testing"
)

// Mkdirs makes each of dirs with its parents; the test fails on an error.
func Mkdirs(t testing.TB, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// Symlink makes link point to target; the test fails on an error.
func Symlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
