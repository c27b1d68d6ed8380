package jail

import "strings"

// BwrapFeatures are what the bubblewrap in use can do beyond the options
// every supported version has. Options a setuid bubblewrap refuses are
// never reported for one.
type BwrapFeatures struct {
	// Size: it can bound a tmpfs (--size, 0.7 and later).
	Size bool
	// Overlay: it mounts overlayfs itself (--overlay-src and --overlay,
	// 0.9 and later): the project view needs no user namespace nested in
	// the sandbox's (NativeOverlay).
	Overlay bool
}

// parseBwrapHelp reads the features off bwrap --help: each option it
// parses is listed there, one a line, in every version since 0.1. A
// distribution's backport is found as well as a release.
func parseBwrapHelp(help string, setuid bool) BwrapFeatures {
	if setuid {
		// bwrap refuses --size and the overlay options when setuid.
		return BwrapFeatures{}
	}
	has := map[string]bool{}
	for _, line := range strings.Split(help, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "--") {
			has[f[0]] = true
		}
	}
	return BwrapFeatures{
		Size:    has["--size"],
		Overlay: has["--overlay-src"] && has["--overlay"],
	}
}
