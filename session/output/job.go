package output

import (
	"fmt"
	"io"
	"path/filepath"
	"sync"
)

// JobStream is one output stream of a job: all of it kept in the jail (up
// to a bound), and what was printed since the last read kept in memory,
// head and tail, like a call's output.
type JobStream struct {
	name    string
	limit   int
	onWrite func()

	mu      sync.Mutex
	file    io.WriteCloser
	keepMax int64
	kept    int64
	fileErr error
	total   int64
	win     *capture // since the last read
	from    int64    // total at the last read
}

// NewJobStream keeps the stream name in the output directory dir of dirs,
// up to keepMax bytes, and limit bytes of each read inline; onWrite is
// called after each write.
func NewJobStream(dirs Dirs, dir, name string, limit int, keepMax int64, onWrite func()) (*JobStream, error) {
	f, err := dirs.Create(dir, name)
	if err != nil {
		return nil, err
	}
	return &JobStream{name: name, limit: limit, onWrite: onWrite, file: f, keepMax: keepMax, win: newCapture(limit, nil)}, nil
}

// Write keeps p, counts it, and wakes whoever waits for the job.
func (st *JobStream) Write(p []byte) (int, error) {
	st.mu.Lock()
	st.total += int64(len(p))
	if st.file != nil && st.kept < st.keepMax {
		q := p[:min(int64(len(p)), st.keepMax-st.kept)]
		n, err := st.file.Write(q)
		st.kept += int64(n)
		if err != nil && st.fileErr == nil {
			st.fileErr = err
		}
	}
	st.win.Write(p)
	st.mu.Unlock()
	st.onWrite()
	return len(p), nil
}

// LastLine is the latest line the stream printed since the last read.
func (st *JobStream) LastLine() string {
	st.mu.Lock()
	w := st.win
	st.mu.Unlock()
	return w.LastLine()
}

// Close closes the file that keeps the stream: what follows is counted,
// and read, but no longer kept.
func (st *JobStream) Close() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.file != nil {
		st.file.Close()
		st.file = nil
	}
}

// Unread reports whether the stream printed something since the last read.
func (st *JobStream) Unread() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.total > st.from
}

// Bytes is how many bytes the stream printed.
func (st *JobStream) Bytes() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.total
}

// Read returns what was printed since the last read, head and tail when it
// is over the inline bound, and starts a new window; where is the output
// directory on the host. Bytes is the stream's total so far.
func (st *JobStream) Read(where string) Stream {
	st.mu.Lock()
	defer st.mu.Unlock()
	w := st.win
	st.win = newCapture(st.limit, nil)
	from := st.from
	st.from = st.total
	text, cut := w.text(func() string {
		file := filepath.Join(where, st.name)
		switch {
		case st.fileErr != nil:
			return fmt.Sprintf("\n[... %%d bytes of this read left out; the output could not be kept: %v ...]\n", st.fileErr)
		case st.total > st.kept && from+int64(st.limit) > st.kept:
			return fmt.Sprintf("\n[... %%d bytes of this read left out; %s keeps the first %d bytes of the output only ...]\n", file, st.kept)
		default:
			return fmt.Sprintf("\n[... %%d bytes of this read left out; they are in %s, bytes %d to %d ...]\n", file, from, st.total)
		}
	})
	if !cut {
		return Stream{Text: text, Bytes: st.total}
	}
	return Stream{Text: text, Bytes: st.total, Truncated: true, Kept: st.kept}
}
