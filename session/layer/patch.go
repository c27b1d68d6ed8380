package layer

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/aymanbagabas/go-udiff"
)

const (
	// maxPatch bounds the whole patch; the files past it are counted in a
	// last line.
	maxPatch = 64 << 20
	// maxText is the largest file diffed line by line; a larger one is
	// shown as binary.
	maxText = 8 << 20
	// sniffLen is how much of a file git looks at for a NUL to call it
	// binary.
	sniffLen = 8000
)

// side is one side of a file's patch: absent (a file added or deleted, or
// not a regular file), or a regular file's bytes (up to maxText+1) and
// permission bits.
type side struct {
	present bool
	data    []byte
	perm    uint32
	size    int64
}

func binary(s side) bool {
	return s.size > maxText || bytes.IndexByte(s.data[:min(len(s.data), sniffLen)], 0) >= 0
}

// gitMode is the mode git records for a regular file.
func gitMode(perm uint32) string {
	if perm&0o100 != 0 {
		return "100755"
	}
	return "100644"
}

// filePatch is the git-style patch of one path, from the host's side to
// the view's; empty when they hold the same.
func filePatch(rel string, host, view side) (string, error) {
	a, b := shown("a/"+rel), shown("b/"+rel)
	var h strings.Builder
	fmt.Fprintf(&h, "diff --git %s %s\n", a, b)
	switch {
	case !host.present:
		fmt.Fprintf(&h, "new file mode %s\n", gitMode(view.perm))
		a = "/dev/null"
	case !view.present:
		fmt.Fprintf(&h, "deleted file mode %s\n", gitMode(host.perm))
		b = "/dev/null"
	default:
		if gitMode(host.perm) != gitMode(view.perm) {
			fmt.Fprintf(&h, "old mode %s\nnew mode %s\n", gitMode(host.perm), gitMode(view.perm))
		}
	}
	if binary(host) || binary(view) {
		if host.size == view.size && bytes.Equal(host.data, view.data) && host.present && view.present {
			return modeOnly(&h, host, view), nil
		}
		fmt.Fprintf(&h, "Binary files %s and %s differ\n", a, b)
		return h.String(), nil
	}
	old, new := string(host.data), string(view.data)
	if old == new {
		if host.present && view.present {
			return modeOnly(&h, host, view), nil
		}
		return h.String(), nil // an empty file added or deleted
	}
	d, err := udiff.ToUnified(a, b, old, udiff.Lines(old, new), udiff.DefaultContextLines)
	if err != nil {
		return "", fmt.Errorf("diffing %s: %w", shown(rel), err)
	}
	h.WriteString(d)
	return h.String(), nil
}

// modeOnly is the patch of a file whose bytes are the same on both sides:
// its header when git records a change of mode, nothing otherwise.
func modeOnly(h *strings.Builder, host, view side) string {
	if gitMode(host.perm) == gitMode(view.perm) {
		return ""
	}
	return h.String()
}

// patcher gathers the files' patches up to maxPatch: past it, each file
// left out is counted for the last line, so that a truncated patch is a
// prefix of the whole.
type patcher struct {
	buf     bytes.Buffer
	omitted int
}

// full reports whether patches are no longer added.
func (p *patcher) full() bool { return p.omitted > 0 }

func (p *patcher) add(s string) {
	if s == "" {
		return
	}
	if p.omitted > 0 || p.buf.Len()+len(s) > maxPatch {
		p.omitted++
		return
	}
	p.buf.WriteString(s)
}

func (p *patcher) bytes() []byte {
	if p.omitted > 0 {
		fmt.Fprintf(&p.buf, "# patch cut at %d MiB: %d more files left out\n", maxPatch>>20, p.omitted)
	}
	return p.buf.Bytes()
}
