package egress

import (
	"bytes"
	"io"
	"slices"
	"strings"
)

// Issue 31, masked credentials: the jail holds placeholders, the proxy
// the real values. A CONNECT to a host a Secret is bound to is not
// tunnelled but ended here: the proxy speaks TLS to the command with a
// leaf of Masks.CA and to the host over TLS of its own, reads each
// HTTP/1.1 request, puts the real values where that host is to get them
// (its authentication headers, the bodies of its token endpoints), and
// turns every real value it knows in the answer back into its
// placeholder. Every other CONNECT stays a blind tunnel, and a plain
// HTTP request is never given a secret.

// minSecret is the shortest value looked for in answers: auth.Placeholder
// makes none shorter, and a short value would match ordinary text.
const minSecret = 8

// scrubber replaces real values by their placeholders in an answer as it
// streams: a tail that may begin a value is held back until the next read
// shows whether it does, so that a value split across reads is caught,
// and nothing more is held (an event stream's events go on as they come).
type scrubber struct {
	pairs      []scrubPair
	next       []int
	longest    int
	sameLength bool // every placeholder as long as its value: lengths hold
}

type scrubPair struct {
	value       string
	valueB      []byte
	placeholder string
}

func (s *scrubber) reset() {
	s.pairs, s.longest, s.sameLength = s.pairs[:0], 0, true
}

// add has value replaced by placeholder.
func (s *scrubber) add(value, placeholder string) {
	if len(value) < minSecret || value == placeholder || s.has(value) {
		return
	}
	s.pairs = append(s.pairs, scrubPair{value, []byte(value), placeholder})
	s.longest = max(s.longest, len(value))
	s.sameLength = s.sameLength && len(value) == len(placeholder)
}

func (s *scrubber) has(value string) bool {
	return slices.ContainsFunc(s.pairs, func(p scrubPair) bool { return p.value == value })
}

// text is v with every value replaced.
func (s *scrubber) text(v string) string {
	for _, p := range s.pairs {
		if strings.Contains(v, p.value) {
			v = strings.ReplaceAll(v, p.value, p.placeholder)
		}
	}
	return v
}

// write writes data to w with every value replaced, but for a tail that
// may begin a value (none when final); it returns that tail's length.
// Each value is looked for once per call (bytes.Index), and again only
// past a replacement: linear in data.
func (s *scrubber) write(w io.Writer, data []byte, final bool) (int, error) {
	put := func(b []byte) error {
		if len(b) == 0 {
			return nil
		}
		_, err := w.Write(b)
		return err
	}
	s.next = slices.Grow(s.next[:0], len(s.pairs))[:len(s.pairs)]
	for i := range s.next {
		s.next[i] = -1 // not looked for yet
	}
	pos := 0
	for {
		at, which := len(data), -1
		for i, p := range s.pairs {
			if s.next[i] < pos {
				if j := bytes.Index(data[pos:], p.valueB); j >= 0 {
					s.next[i] = pos + j
				} else {
					s.next[i] = len(data)
				}
			}
			if s.next[i] < at {
				at, which = s.next[i], i
			}
		}
		if which < 0 {
			break
		}
		if err := put(data[pos:at]); err != nil {
			return 0, err
		}
		if _, err := io.WriteString(w, s.pairs[which].placeholder); err != nil {
			return 0, err
		}
		pos = at + len(s.pairs[which].value)
	}
	held := 0
	if !final {
		held = s.tail(data[pos:])
	}
	return held, put(data[pos : len(data)-held])
}

// tail is the length of the longest end of data that begins a value.
func (s *scrubber) tail(data []byte) int {
	held := 0
	for _, p := range s.pairs {
		v := p.valueB
		for i := max(0, len(data)-len(v)+1); i < len(data)-held; i++ {
			j := bytes.IndexByte(data[i:len(data)-held], v[0])
			if j < 0 {
				break
			}
			i += j
			if bytes.HasPrefix(v, data[i:]) {
				held = len(data) - i
				break
			}
		}
	}
	return held
}

// flusher is a writer that passes on what it holds.
type flusher interface {
	io.Writer
	Flush() error
}

// stream writes ahead then body to w, values replaced, a read at a time,
// flushing after each.
func (s *scrubber) stream(w flusher, ahead []byte, body io.Reader) error {
	bp := smallPool.Get().(*[]byte)
	defer smallPool.Put(bp)
	buf := *bp
	if len(buf) < 4*s.longest {
		buf = make([]byte, 4*s.longest)
	}
	held := 0
	if len(ahead) > 0 {
		h, err := s.write(w, ahead, false)
		if err != nil {
			return err
		}
		held = copy(buf, ahead[len(ahead)-h:])
	}
	for {
		n, rerr := body.Read(buf[held:])
		data := buf[:held+n]
		h, err := s.write(w, data, rerr != nil)
		if err != nil {
			return err
		}
		held = copy(buf, data[len(data)-h:])
		if err := w.Flush(); err != nil {
			return err
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}
