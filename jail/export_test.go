package jail

// SeccompFilter exposes the filter builder to the golden test.
var SeccompFilter = seccompFilter

// LandlockSeccomp exposes the landlock backend's filter to the golden test.
// network: on, off, or proxy (held to a proxy: TCP only).
func LandlockSeccomp(goarch, network string, root bool) ([]byte, error) {
	return buildSeccomp(goarch, landlockPolicy(network != "off", network == "proxy", root))
}

// SBPLString exposes the SBPL string quoting to its test.
var SBPLString = sbplString
