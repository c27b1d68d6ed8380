package output

import (
	"io"
	"path/filepath"
	"sync"
)

// Call is where a call's output goes: two captures, head and tail
// inline, the whole stream spilled to one directory per call, made on
// demand.
type Call struct {
	dirs           Dirs
	stdout, stderr *capture
	once           sync.Once
	dir            string
	err            error
}

// NewCall keeps limit bytes of each stream inline and up to keepMax of
// each in an output directory of dirs, made once a stream is cut.
func NewCall(dirs Dirs, limit int, keepMax int64) *Call {
	o := &Call{dirs: dirs}
	id := NewID()
	spill := func(name string) func() (io.WriteCloser, error) {
		return func() (io.WriteCloser, error) {
			o.once.Do(func() { o.dir, o.err = dirs.Make(id) })
			if o.err != nil {
				return nil, o.err
			}
			return dirs.Create(o.dir, name)
		}
	}
	o.stdout = newCapture(limit, spill("stdout"))
	o.stderr = newCapture(limit, spill("stderr"))
	o.stdout.keepMax = keepMax
	o.stderr.keepMax = o.stdout.keepMax
	return o
}

// Writers are where the command's stdout and stderr go.
func (o *Call) Writers() (stdout, stderr io.Writer) { return o.stdout, o.stderr }

// LastLine is the latest line the call printed: stderr's, when it printed
// one, else stdout's.
func (o *Call) LastLine() string {
	line := o.stdout.LastLine()
	if l := o.stderr.LastLine(); l != "" {
		line = l
	}
	return line
}

// Finish renders both streams once the command is over; jail is the
// jail's path on the host. When a stream was cut, where is the output
// directory on the host, completed with the stream that was not.
func (o *Call) Finish(jail string) (stdout, stderr Stream, where string) {
	where = filepath.Join(jail, o.dir)
	stdout, _ = o.stdout.finish(filepath.Join(where, "stdout"))
	stderr, _ = o.stderr.finish(filepath.Join(where, "stderr"))
	if o.dir == "" || o.err != nil {
		return stdout, stderr, ""
	}
	o.complete()
	return stdout, stderr, where
}

// complete writes the stream that was not cut into the output directory
// too, so it holds the whole output of the call.
func (o *Call) complete() {
	for i, c := range []*capture{o.stdout, o.stderr} {
		all, whole := c.inline()
		if !whole {
			continue
		}
		name := [2]string{"stdout", "stderr"}[i]
		if f, err := o.dirs.Create(o.dir, name); err == nil {
			f.Write(all)
			f.Close()
		}
	}
}
