//go:build !linux

package ledger

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"runtime"
)

// The layer exists only under the project view, which needs Linux.

var errUnsupported = fmt.Errorf("the session's layer on %s: %w", runtime.GOOS, errors.ErrUnsupported)

func walkLayer(string) (map[string]entry, bool, error) { return nil, false, errUnsupported }

type dirs struct{}

type hostDirs = dirs

func newHostDirs(string) *dirs                 { return &dirs{} }
func newLayerDirs(string) *dirs                { return &dirs{} }
func (*dirs) dir(string) *os.File              { return nil }
func (*dirs) close()                           {}
func (*dirs) stat(string) (ident, kind, error) { return ident{}, kindNone, errUnsupported }
func (*dirs) isDir(string) bool                { return false }
func (*dirs) sum(string, ident, bool) ([sha256.Size]byte, []byte, bool) {
	return [sha256.Size]byte{}, nil, false
}
func bornOf(*dirs, string, entry) int64       { return 0 }
func statAt(int, string) (ident, kind, error) { return ident{}, kindNone, errUnsupported }
func removeAt(*os.File, string, int) error    { return errUnsupported }
func unlinkAt(*os.File, string) error         { return errUnsupported }
func parentOf(string) string                  { return "" }
