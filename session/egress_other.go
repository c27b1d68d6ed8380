//go:build !unix

package session

import (
	"errors"
	"os"
)

// dial: no backend here forwards to a proxy.
func (e *agentEgress) dial() (*os.File, error) {
	return nil, errors.ErrUnsupported
}
