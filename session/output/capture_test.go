package output

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// spillBuffer is a spill file in memory.
type spillBuffer struct {
	bytes.Buffer
	opened int
	closed bool
}

func (b *spillBuffer) Close() error { b.closed = true; return nil }

func (b *spillBuffer) open() (io.WriteCloser, error) {
	b.opened++
	return b, nil
}

// countingSink keeps nothing and counts what it is given.
type countingSink struct{ n int64 }

func (c *countingSink) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }
func (c *countingSink) Close() error                { return nil }

const where = "/p/.agent-home/s/.jail-mcp/output/x/stdout"

// checkCut verifies a cut stream's inline text: at most limit bytes, a
// prefix of the stream, a marker that counts what was left out, a suffix of
// the stream, and head and tail filling what the marker leaves of the limit
// (less at most a partial rune each).
func checkCut(t *testing.T, stream string, s Stream, limit int) (head, marker, tail string) {
	t.Helper()
	if !s.Truncated || s.Bytes != int64(len(stream)) {
		t.Errorf("Truncated %t Bytes %d, want true %d", s.Truncated, s.Bytes, len(stream))
	}
	if len(s.Text) > limit {
		t.Errorf("inline text is %d bytes, more than the limit %d", len(s.Text), limit)
	}
	if !utf8.ValidString(s.Text) && utf8.ValidString(stream) {
		t.Errorf("inline text is not valid UTF-8")
	}
	head, rest, ok := strings.Cut(s.Text, "\n[... ")
	i := strings.Index(rest, " ...]\n")
	if !ok || i < 0 {
		t.Fatalf("no marker in %q", s.Text)
	}
	tail = rest[i+len(" ...]\n"):]
	marker = s.Text[len(head) : len(s.Text)-len(tail)]
	if !strings.HasPrefix(stream, head) || !strings.HasSuffix(stream, tail) {
		t.Errorf("head %q or tail %q is not from the stream", head, tail)
	}
	left := len(stream) - len(head) - len(tail)
	if !strings.HasPrefix(marker, fmt.Sprintf("\n[... %d bytes left out; ", left)) {
		t.Errorf("marker %q does not count %d bytes left out", marker, left)
	}
	budget := limit - (len(marker) - len(strconv.Itoa(left)) + len(strconv.Itoa(len(stream))))
	if len(head) < budget/2-(utf8.UTFMax-1) || len(tail) < budget-budget/2-(utf8.UTFMax-1) {
		t.Errorf("head %d and tail %d bytes leave more than a partial rune of the %d-byte budget unused", len(head), len(tail), budget)
	}
	return head, marker, tail
}

func TestCaptureFinish(t *testing.T) {
	tests := []struct {
		name      string
		limit     int
		writes    []string
		want      string
		truncated bool
		spilled   bool
	}{
		{name: "empty", limit: 10, writes: nil, want: ""},
		{name: "small kept whole", limit: 10, writes: []string{"hello"}, want: "hello"},
		{name: "exactly at limit", limit: 10, writes: []string{"0123456789"}, want: "0123456789"},
		{name: "exactly at limit in pieces", limit: 10, writes: []string{"0123", "", "456", "789"}, want: "0123456789"},
		{name: "limit plus one", limit: 300, writes: []string{strings.Repeat("0123456789", 30) + "X"}, truncated: true, spilled: true},
		{name: "limit plus one in pieces", limit: 300, writes: []string{strings.Repeat("0123456789", 30), "X"}, truncated: true, spilled: true},
		{name: "odd limit", limit: 301, writes: []string{strings.Repeat("abcdefghijklmnopqrstuvwxyz", 100)}, truncated: true, spilled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var spill spillBuffer
			c := newCapture(tt.limit, spill.open)
			var all string
			for _, w := range tt.writes {
				if n, err := c.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
				all += w
			}
			s, err := c.finish(where)
			if err != nil {
				t.Fatalf("finish: %v", err)
			}
			if tt.truncated {
				_, marker, _ := checkCut(t, all, s, tt.limit)
				if !strings.Contains(marker, "the whole output is in "+where) {
					t.Errorf("marker %q does not name %s", marker, where)
				}
			} else if s.Text != tt.want {
				t.Errorf("Text:\n got %q\nwant %q", s.Text, tt.want)
			}
			if s.Bytes != int64(len(all)) || s.Truncated != tt.truncated {
				t.Errorf("Bytes %d Truncated %t, want %d %t", s.Bytes, s.Truncated, len(all), tt.truncated)
			}
			if got := spill.opened > 0; got != tt.spilled {
				t.Fatalf("spill opened %d times, want spilled %t", spill.opened, tt.spilled)
			}
			if tt.spilled {
				if spill.opened != 1 || !spill.closed || spill.String() != all || s.Kept != int64(len(all)) {
					t.Errorf("spill opened %d closed %t kept %d holds %q, want once, closed, %q", spill.opened, spill.closed, s.Kept, spill.String(), all)
				}
			}
			whole, ok := c.inline()
			if ok != !tt.truncated || (ok && string(whole) != all) {
				t.Errorf("inline() = %q, %t", whole, ok)
			}
		})
	}
}

// TestCaptureChunking feeds the same stream in one write and in many small
// ones: the result must not depend on how the pipe delivered it.
func TestCaptureChunking(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	stream := make([]byte, 10000)
	for i := range stream {
		stream[i] = byte('a' + r.IntN(26))
	}
	tests := []struct {
		name     string
		limit    int
		maxChunk int
	}{
		{"byte at a time", 300, 1},
		{"small chunks", 300, 7},
		{"chunks around the limit", 300, 450},
		{"odd limit", 333, 64},
		{"limit above stream", 20000, 13},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var oneSpill, manySpill spillBuffer
			one := newCapture(tt.limit, oneSpill.open)
			one.Write(stream)
			many := newCapture(tt.limit, manySpill.open)
			for p := stream; len(p) > 0; {
				n := min(1+r.IntN(tt.maxChunk), len(p))
				many.Write(p[:n])
				p = p[n:]
			}
			a, _ := one.finish(where)
			b, _ := many.finish(where)
			if a != b {
				t.Errorf("one write gave %+v\nmany writes gave %+v", a, b)
			}
			if !bytes.Equal(oneSpill.Bytes(), manySpill.Bytes()) {
				t.Errorf("spill files differ: %d and %d bytes", oneSpill.Len(), manySpill.Len())
			}
			if tt.limit < len(stream) {
				checkCut(t, string(stream), a, tt.limit)
			}
		})
	}
}

func TestCaptureUTF8Boundaries(t *testing.T) {
	tests := []struct {
		name string
		unit string // repeated to make the stream
	}{
		{"two-byte runes", "é"},
		{"three-byte runes", "€"},
		{"four-byte runes", "😀"},
		{"mixed", "a€é😀"},
	}
	for _, tt := range tests {
		stream := strings.Repeat(tt.unit, 200)
		// Twenty consecutive limits put the cuts at every offset inside a
		// rune of up to four bytes, at the head and at the tail.
		for limit := 300; limit <= 320; limit++ {
			t.Run(fmt.Sprintf("%s/limit=%d", tt.name, limit), func(t *testing.T) {
				c := newCapture(limit, (&spillBuffer{}).open)
				c.Write([]byte(stream))
				s, _ := c.finish(where)
				if !utf8.ValidString(s.Text) {
					t.Fatalf("Text is not valid UTF-8: %q", s.Text)
				}
				checkCut(t, stream, s, limit)
			})
		}
	}
}

func TestCaptureSpill(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	stream := make([]byte, 1<<20)
	for i := range stream {
		stream[i] = byte(r.Uint32())
	}
	var spill spillBuffer
	c := newCapture(65536, spill.open)
	for p := stream; len(p) > 0; {
		n := min(1+r.IntN(40000), len(p))
		c.Write(p[:n])
		p = p[n:]
	}
	s, err := c.finish(where)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(spill.Bytes(), stream) {
		t.Errorf("spill file (%d bytes) is not the stream (%d bytes)", spill.Len(), len(stream))
	}
	if s.Bytes != int64(len(stream)) || s.Kept != int64(len(stream)) || !s.Truncated {
		t.Errorf("Bytes %d Kept %d Truncated %t, want %d %d true", s.Bytes, s.Kept, s.Truncated, len(stream), len(stream))
	}
	if !strings.Contains(s.Text, "the whole output is in "+where) {
		t.Errorf("marker does not point at %s: %q", where, s.Text[32768:32768+200])
	}
}

func TestCaptureBeyondMaxKept(t *testing.T) {
	var sink countingSink
	c := newCapture(300, func() (io.WriteCloser, error) { return &sink, nil })
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	total := int64(maxKept + 3*len(chunk)/2)
	for n := int64(0); n < total; {
		k := min(int64(len(chunk)), total-n)
		c.Write(chunk[:k])
		n += k
	}
	s, err := c.finish(where)
	if err != nil {
		t.Fatal(err)
	}
	if sink.n != maxKept || s.Kept != maxKept || s.Bytes != total {
		t.Errorf("spilled %d, Kept %d, Bytes %d; want %d, %d, %d", sink.n, s.Kept, s.Bytes, maxKept, maxKept, total)
	}
	_, marker, _ := checkCut(t, strings.Repeat("x", int(total)), s, 300)
	if want := fmt.Sprintf("the first %d bytes of the output are in %s ...]", maxKept, where); !strings.Contains(marker, want) {
		t.Errorf("marker %q lacks %q", marker, want)
	}
}

func TestCaptureSpillError(t *testing.T) {
	errDisk := errors.New("disk on fire")
	c := newCapture(300, func() (io.WriteCloser, error) { return nil, errDisk })
	stream := strings.Repeat("0123456789abcdef", 40)
	c.Write([]byte(stream))
	s, err := c.finish(where)
	if !errors.Is(err, errDisk) {
		t.Errorf("finish error %v, want %v", err, errDisk)
	}
	_, marker, _ := checkCut(t, stream, s, 300)
	if !strings.Contains(marker, "the whole output could not be kept: disk on fire") || s.Kept != 0 {
		t.Errorf("marker %q, kept %d", marker, s.Kept)
	}
}

// TestRing checks the ring against the obvious reference: the last cap
// bytes of everything written.
func TestRing(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, size := range []int{0, 1, 2, 3, 7, 16, 100} {
		for trial := range 20 {
			t.Run(fmt.Sprintf("cap=%d/trial=%d", size, trial), func(t *testing.T) {
				rg := ring{buf: make([]byte, 0, size)}
				var all []byte
				for range 1 + r.IntN(30) {
					p := make([]byte, r.IntN(2*size+4))
					for i := range p {
						p[i] = byte(r.Uint32())
					}
					rg.write(p)
					all = append(all, p...)
					want := all[max(0, len(all)-size):]
					if got := rg.bytes(); !bytes.Equal(got, want) {
						t.Fatalf("after %d bytes: got %x, want %x", len(all), got, want)
					}
				}
			})
		}
	}
}

func TestCaptureLastLine(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"nothing", nil, ""},
		{"one partial line", []string{"building"}, "building"},
		{"latest complete line", []string{"one\ntwo\nthree\n"}, "three"},
		{"partial after complete", []string{"one\ntwo"}, "two"},
		{"line split across writes", []string{"comp", "iling", " x"}, "compiling x"},
		{"new line in next write", []string{"one\n", "two"}, "two"},
		{"one line per write", []string{"1\n", "2\n", "3\n"}, "3"},
		{"carriage return progress", []string{"10%\r20%\r30%"}, "30%"},
		{"carriage return across writes", []string{"10%\r", "20%\r"}, "20%"},
		{"crlf", []string{"a\r\nb\r\n"}, "b"},
		{"blank lines keep the last text", []string{"done\n", "\n", "\r\n"}, "done"},
		{"truncated to 200 bytes", []string{strings.Repeat("x", 150) + strings.Repeat("y", 150)}, strings.Repeat("x", 50) + strings.Repeat("y", 150)},
		{"truncated across writes", []string{strings.Repeat("x", 150), strings.Repeat("y", 100)}, strings.Repeat("x", 100) + strings.Repeat("y", 100)},
		// 300 bytes of three-byte runes: the last 200 bytes start inside a
		// rune, which is dropped rather than returned broken.
		{"truncation keeps UTF-8 valid", []string{strings.Repeat("€", 100)}, strings.Repeat("€", 66)},
		{"line break far before a long line", []string{"a\n" + strings.Repeat("y", 300)}, strings.Repeat("y", 200)},
		{"line break just before the kept bytes", []string{"a\n" + strings.Repeat("y", 200)}, strings.Repeat("y", 200)},
		{"line break one before the kept bytes", []string{"a\n" + strings.Repeat("y", 201)}, strings.Repeat("y", 200)},
		{"short line after a long one", []string{strings.Repeat("x", 5000) + "\nok"}, "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCapture(1<<20, nil)
			for _, w := range tt.writes {
				c.Write([]byte(w))
			}
			if got := c.LastLine(); got != tt.want {
				t.Errorf("LastLine() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCaptureLastLineModel compares LastLine with its definition (the last
// 200 bytes of the latest non-empty line of everything written) over
// random writes of text rich in line breaks and long lines.
func TestCaptureLastLineModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab\n\r") // text, then line breaks
	for round := range 2000 {
		c := newCapture(1<<20, nil)
		var all []byte
		for range rng.IntN(6) {
			p := make([]byte, rng.IntN(600))
			breaks := 1 + rng.IntN(400) // one line break in this many bytes
			for i := range p {
				p[i] = alphabet[rng.IntN(2)]
				if rng.IntN(breaks) == 0 {
					p[i] = alphabet[2+rng.IntN(2)]
				}
			}
			all = append(all, p...)
			c.Write(p)
		}
		want := ""
		fields := strings.FieldsFunc(string(all), func(r rune) bool { return r == '\n' || r == '\r' })
		if len(fields) > 0 {
			last := fields[len(fields)-1]
			want = last[max(0, len(last)-200):]
		}
		if got := c.LastLine(); got != want {
			t.Fatalf("round %d: LastLine() = %q, want %q (written %q)", round, got, want, all)
		}
	}
}

// BenchmarkCaptureWrite is the server's own cost per chunk of a command's
// output (32 KiB, what io.Copy reads), once the stream is past the inline
// limit: line tracking, head, tail and the spill file (here discarded).
func BenchmarkCaptureWrite(b *testing.B) {
	c := newCapture(100000, func() (io.WriteCloser, error) { return nopWriteCloser{io.Discard}, nil })
	p := bytes.Repeat([]byte("0123456789abcdef"), 2048)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		c.Write(p)
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
