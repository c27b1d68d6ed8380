package jail

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestBwrapFilterErrorNamed: when the seccomp filter cannot be built for
// this machine, bubblewrap is unavailable and says why, rather than
// starting with no filter and letting bwrap blame the kernel
// ("CONFIG_SECCOMP").
func TestBwrapFilterErrorNamed(t *testing.T) {
	if _, err := lookPath("bwrap", os.Getenv("PATH")); err != nil {
		t.Skip("bwrap is not installed")
	}
	saved := seccompArches[runtime.GOARCH]
	delete(seccompArches, runtime.GOARCH)
	t.Cleanup(func() { seccompArches[runtime.GOARCH] = saved })
	r := probeBwrap(context.Background(), Options{Getenv: os.Getenv})
	if r.Available {
		t.Fatalf("bwrap available without a seccomp filter: %+v", r)
	}
	if strings.Contains(r.Reason, "CONFIG_SECCOMP") || !strings.Contains(r.Reason, "no seccomp filter for "+runtime.GOARCH) {
		t.Errorf("the reason does not name the filter's error: %q", r.Reason)
	}
}
