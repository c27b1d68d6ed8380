// Package output keeps what commands print: each stream captured in
// bounded memory (its head and tail once it is cut) and kept whole, up to
// a bound, in an output directory of the jail; a call's two streams, and
// a job's, read window by window.
package output

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"
)

// maxKept is how many bytes of one stream are kept on disk under the jail;
// bytes beyond it are counted, not kept.
const maxKept = 64 << 20

// capture keeps one output stream in bounded memory: the whole stream while
// it fits inline, then its head and tail, with everything (up to maxKept)
// spilled to a file opened on demand. Memory never exceeds about twice the
// inline limit whatever the command prints.
type capture struct {
	limit int                            // inline bytes kept (head + tail)
	spill func() (io.WriteCloser, error) // opens the file for the whole stream

	mu        sync.Mutex
	total     int64
	all       []byte // the whole stream while total <= limit
	head      []byte // first limit/2 bytes, once cut
	tail      ring   // last limit-limit/2 bytes, once cut
	file      io.WriteCloser
	keepMax   int64 // bytes kept in the file at most: maxKept, or less under a small --max-disk
	kept      int64
	spillErr  error
	lastLine  []byte // the latest non-empty line, complete or partial, for progress
	lineEnded bool   // the stream's last byte ended a line
}

func newCapture(limit int, spill func() (io.WriteCloser, error)) *capture {
	return &capture{limit: limit, spill: spill, keepMax: maxKept}
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.noteLine(p)
	c.total += int64(len(p))
	if c.head == nil && len(c.all)+len(p) <= c.limit {
		c.all = append(c.all, p...)
		return len(p), nil
	}
	if c.head == nil {
		c.cut()
	}
	c.keep(p)
	headCap := c.limit / 2
	if n := headCap - len(c.head); n > 0 {
		c.head = append(c.head, p[:min(n, len(p))]...)
	}
	c.tail.write(p)
	return len(p), nil
}

// cut switches from keeping everything to keeping head and tail, and opens
// the spill file with what was kept so far.
func (c *capture) cut() {
	headCap := c.limit / 2
	c.tail = ring{buf: make([]byte, 0, c.limit-headCap)}
	c.head = make([]byte, 0, headCap)
	c.head = append(c.head, c.all[:min(headCap, len(c.all))]...)
	c.tail.write(c.all)
	if c.spill != nil {
		c.file, c.spillErr = c.spill()
	}
	c.keep(c.all)
	c.all = nil
}

func (c *capture) keep(p []byte) {
	if c.file == nil || c.kept >= c.keepMax {
		return
	}
	p = p[:min(int64(len(p)), c.keepMax-c.kept)]
	n, err := c.file.Write(p)
	c.kept += int64(n)
	if err != nil && c.spillErr == nil {
		c.spillErr = err
	}
}

func (c *capture) noteLine(p []byte) {
	const maxLine = 200
	text := bytes.TrimRight(p, "\r\n")
	ended := len(text) < len(p)
	if len(text) == 0 {
		c.lineEnded = c.lineEnded || ended
		return
	}
	// Only the last maxLine bytes of the latest line are kept, so only
	// the last maxLine+1 bytes need a look for where it starts: when none
	// of them ends a line, the line is longer than what is kept anyway.
	// (Scanning whole chunks byte by byte capped output at ~1 GB/s.)
	window := text[max(0, len(text)-maxLine-1):]
	if i := bytes.LastIndexAny(window, "\r\n"); i >= 0 {
		// A new line starts inside p: it alone is the latest.
		text = window[i+1:]
		c.lastLine = c.lastLine[:0]
	} else if c.lineEnded || len(window) < len(text) {
		c.lastLine = c.lastLine[:0]
	}
	if len(text) >= maxLine {
		c.lastLine = append(c.lastLine[:0], text[len(text)-maxLine:]...)
	} else {
		c.lastLine = append(c.lastLine, text...)
		if n := len(c.lastLine); n > maxLine {
			c.lastLine = append(c.lastLine[:0], c.lastLine[n-maxLine:]...)
		}
	}
	c.lineEnded = ended
}

// LastLine returns the latest line the stream printed.
func (c *capture) LastLine() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(bytes.ToValidUTF8(c.lastLine, nil))
}

// Stream is the outcome of one captured output stream.
type Stream struct {
	Text      string // inline text, with a marker where bytes were left out
	Bytes     int64  // total bytes the command wrote
	Truncated bool
	Kept      int64 // bytes kept in the spill file, when truncated
}

// finish closes the spill file and renders the inline text; where says
// where the whole output is, for the marker.
func (c *capture) finish(where string) (Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.file != nil {
		if err := c.file.Close(); err != nil && c.spillErr == nil {
			c.spillErr = err
		}
		c.file = nil
	}
	if c.head == nil {
		return Stream{Text: string(c.all), Bytes: c.total}, nil
	}
	var mark string
	switch {
	case c.spillErr != nil:
		mark = fmt.Sprintf("\n[... %%d bytes left out; the whole output could not be kept: %v ...]\n", c.spillErr)
	case c.kept < c.total:
		mark = fmt.Sprintf("\n[... %%d bytes left out; the first %d bytes of the output are in %s ...]\n", c.kept, where)
	default:
		mark = fmt.Sprintf("\n[... %%d bytes left out; the whole output is in %s ...]\n", where)
	}
	return Stream{
		Text:      c.render(mark),
		Bytes:     c.total,
		Truncated: true,
		Kept:      c.kept,
	}, c.spillErr
}

// render is the head and the tail of a cut stream around mark, a format
// whose one %d is the count of bytes left out. c.mu is held.
func (c *capture) render(mark string) string {
	// Head, marker and tail together stay within the inline limit; the
	// count left out is at most the total, so sizing the marker with the
	// total leaves room for it.
	budget := max(0, c.limit-len(fmt.Sprintf(mark, c.total)))
	head := trimRuneEnd(c.head[:min(len(c.head), budget/2)])
	tail := c.tail.bytes()
	tail = trimRuneStart(tail[len(tail)-min(len(tail), budget-budget/2):])
	return string(head) + fmt.Sprintf(mark, c.total-int64(len(head))-int64(len(tail))) + string(tail)
}

// text is the stream's inline text: the whole stream when it was never
// cut, else its head and tail around the marker mark gives (as for
// render); cut says which.
func (c *capture) text(mark func() string) (text string, cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.head == nil {
		return string(c.all), false
	}
	return c.render(mark()), true
}

// Inline returns the whole stream when it was never cut.
func (c *capture) inline() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.all, c.head == nil
}

// ring keeps the last cap(buf) bytes written to it.
type ring struct {
	buf  []byte
	next int // where the next byte goes once buf is full
}

func (r *ring) write(p []byte) {
	n := cap(r.buf)
	if n == 0 {
		return
	}
	if len(p) >= n {
		r.buf = append(r.buf[:0], p[len(p)-n:]...)
		r.next = 0
		return
	}
	for len(p) > 0 {
		if len(r.buf) < n {
			k := min(n-len(r.buf), len(p))
			r.buf = append(r.buf, p[:k]...)
			p = p[k:]
			continue
		}
		k := copy(r.buf[r.next:], p)
		r.next = (r.next + k) % n
		p = p[k:]
	}
}

func (r *ring) bytes() []byte {
	out := make([]byte, 0, len(r.buf))
	if len(r.buf) < cap(r.buf) {
		return append(out, r.buf...)
	}
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// CutHead cuts text to at most limit bytes: its head, cut at a line's end
// (inside a line longer than the bound, at a character), then the line
// mark makes of the count of bytes left out.
func CutHead(text []byte, limit int, mark func(left int) string) string {
	// Head and marker stay within the bound; sizing the marker with the
	// whole count leaves room for the count it will say.
	head := text[:max(0, limit-len(mark(len(text)))-1)]
	if i := bytes.LastIndexByte(head, '\n'); i >= 0 {
		head = head[:i+1]
		return string(head) + mark(len(text)-len(head))
	}
	// One line longer than the bound: cut inside it, at a character.
	head = trimRuneEnd(head)
	return string(head) + "\n" + mark(len(text)-len(head))
}

// trimRuneEnd drops a partial UTF-8 sequence at the end of b.
func trimRuneEnd(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}

// trimRuneStart drops continuation bytes at the start of b.
func trimRuneStart(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && i < len(b); i++ {
		if utf8.RuneStart(b[i]) {
			return b[i:]
		}
	}
	return b
}
