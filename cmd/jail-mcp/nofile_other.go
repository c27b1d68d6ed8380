//go:build !unix

package main

// descriptorLimit is unknown here.
func descriptorLimit() (int, bool) { return 0, false }
