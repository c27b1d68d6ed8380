package jail

import (
	"os"
	"os/exec"
	"testing"
)

// testBwrapEnv names a bubblewrap of 0.9 or later, built by hand, that the
// tests of bubblewrap's own overlay run with (the machine's may be older).
const testBwrapEnv = "JAIL_MCP_TEST_BWRAP"

// TestBwrapFeaturesOf: the machine's bubblewrap says what it can do,
// once per binary.
func TestBwrapFeaturesOf(t *testing.T) {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal("bubblewrap is not installed:", err)
	}
	got := bwrapFeaturesOf(path)
	if !got.Size {
		t.Errorf("%s: no --size found: %+v", path, got)
	}
	if again := bwrapFeaturesOf(path); again != got {
		t.Errorf("asked again: %+v, then %+v", got, again)
	}
	if f := bwrapFeaturesOf("/nonexistent/bwrap"); f != (BwrapFeatures{}) {
		t.Errorf("a missing binary: %+v", f)
	}
}

// TestBwrapFeaturesNewer: a bubblewrap of 0.9 or later, when given,
// mounts the overlay itself.
func TestBwrapFeaturesNewer(t *testing.T) {
	newer := os.Getenv(testBwrapEnv)
	if newer == "" {
		t.Skipf("%s unset: no bubblewrap 0.9 or later to read", testBwrapEnv)
	}
	if f := bwrapFeaturesOf(newer); !f.Overlay || !f.Size {
		t.Errorf("%s: %+v, want the overlay and --size", newer, f)
	}
}
