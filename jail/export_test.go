package jail

// SeccompFilter exposes the filter builder to the golden test.
var SeccompFilter = seccompFilter

// LandlockSeccomp exposes the landlock backend's filter to the golden test.
func LandlockSeccomp(goarch string, network, root bool) ([]byte, error) {
	return buildSeccomp(goarch, landlockPolicy(network, root))
}

// SBPLString exposes the SBPL string quoting to its test.
var SBPLString = sbplString
