//go:build !linux

package creds

import "os"

// openHostPath returns no descriptor: no backend of this OS binds paths,
// so the session copies credentials instead.
func openHostPath(name string) (*os.File, error) { return nil, nil }
