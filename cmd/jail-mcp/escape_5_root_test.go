//go:build linux

package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// Promise 5: root is not special. Every attack above ran through the same
// servers; as root they must have failed all the same, but for the known
// gaps of the backend, which knownGaps says when they show.
func (fx *escapeFixture) rootIsNotSpecial(t *testing.T) {
	fx.vector(t, "root", func(t *testing.T) {
		res := fx.attack(t, fx.a, `echo "uid $(id -u)"; grep CapEff /proc/self/status`, nil)
		if want := fmt.Sprintf("uid %d\n", os.Geteuid()); !strings.HasPrefix(res.Stdout, want) {
			t.Errorf("uid in the jail: %q, want %q", res.Stdout, want)
		}
		if !strings.Contains(res.Stdout, "CapEff:\t0000000000000000") {
			fx.escape(t, "capabilities in the jail: %q", res.Stdout)
		}
		if os.Geteuid() == 0 && fx.unexpected > 0 {
			t.Errorf("the server runs as root (uid 0 in the jail too) and %d attacks above succeeded", fx.unexpected)
		}
	})
}
