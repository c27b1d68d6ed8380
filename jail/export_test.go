package jail

// SeccompFilter exposes the filter builder to the golden test.
var SeccompFilter = seccompFilter
