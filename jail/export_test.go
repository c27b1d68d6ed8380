package jail

import "os"

// SeccompFilter exposes the filter builder to the golden test.
var SeccompFilter = seccompFilter

// LandlockSeccomp exposes the landlock backend's filter to the golden test.
// network: on, off, or proxy (held to a proxy: TCP only).
func LandlockSeccomp(goarch, network string, root bool) ([]byte, error) {
	return buildSeccomp(goarch, landlockPolicy(network != "off", network == "proxy", root))
}

// SBPLString exposes the SBPL string quoting to its test.
var SBPLString = sbplString

// NativeLayer gives o the layer of bubblewrap's own overlay, by files in
// the order BwrapArgs numbers them: the project's upper and work
// directories, then each cache's.
func NativeLayer(o *Overlay, files ...*os.File) {
	n := &nativeLayer{upper: files[0], work: files[1]}
	for i, c := range o.Caches {
		n.caches = append(n.caches, nativeCache{lower: c.Lower, target: c.Target, upper: files[2+2*i], work: files[3+2*i]})
	}
	o.native = n
}
