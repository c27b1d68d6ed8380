package session

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/output"
)

// stdinFile is the command's standard input as a file: the caller's own
// file (jail-mcp run), /dev/null, or a pipe fed from r. release closes
// what the server holds of it once the command has it; stop, once the
// command is gone, ends the feeding that a command which never read would
// otherwise hold up; feed starts the feeding, once the command started, so
// that a call run again on a new agent reads r whole. All are idempotent.
func stdinFile(r io.Reader) (f *os.File, release, stop, feed func(), err error) {
	nothing := func() {}
	switch in := r.(type) {
	case *os.File:
		return in, nothing, nothing, nothing, nil
	case nil:
		f, err := os.Open(os.DevNull)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		return f, sync.OnceFunc(func() { f.Close() }), nothing, nothing, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	feed = sync.OnceFunc(func() {
		go func() {
			io.Copy(pw, r)
			pw.Close()
		}()
	})
	return pr, sync.OnceFunc(func() { pr.Close() }), sync.OnceFunc(func() { pw.Close() }), feed, nil
}

// callStreams are a call's standard streams as the server holds them:
// pipes of the command's own, never the server's stdin or stdout (or the
// caller's terminal), and only fds 0-2.
type callStreams struct {
	readers []*os.File
	copies  sync.WaitGroup
	counted [2]*counter
	// started closes the server's copies of what the command now holds;
	// stopStdin ends the feeding of a command that never read, once it is
	// gone; feed starts the feeding once it started; closeStdin is both.
	started, stopStdin, feed func()
}

func (c *callStreams) closeStdin() { c.started(); c.stopStdin() }

// drain waits for the output copies to end; when something outside the
// jail's control still holds a pipe open, the pipes are closed after grace.
func (c *callStreams) drain() { drain(&c.copies, c.readers) }

// attachStreams gives call its standard streams, per req: the terminal's
// far end, or pipes whose output goes to out (or req's own writers) and
// the input req gives.
func attachStreams(call *jail.Call, req Request, out *output.Call) (*callStreams, error) {
	nothing := func() {}
	c := &callStreams{started: nothing, stopStdin: nothing, feed: nothing}
	outW, errW := out.Writers()
	if req.Stdout != nil {
		outW = req.Stdout
	}
	if req.Stderr != nil {
		errW = req.Stderr
	}
	c.counted = [2]*counter{{w: outW}, {w: errW}}
	if req.TTY != nil {
		// The caller reads the terminal: the output goes through it.
		call.Stdin, call.Stdout, call.Stderr, call.TTY = req.TTY, req.TTY, req.TTY, true
		return c, nil
	}
	var ws []*os.File
	fail := func(err error) (*callStreams, error) {
		closeAll(ws)
		closeAll(c.readers)
		return nil, err
	}
	for _, dst := range c.counted {
		r, w, err := os.Pipe()
		if err != nil {
			return fail(fmt.Errorf("create pipe: %w", err))
		}
		c.readers, ws = append(c.readers, r), append(ws, w)
		c.copies.Go(func() { io.Copy(dst, r) })
	}
	stdin, release, stop, feed, err := stdinFile(req.Stdin)
	if err != nil {
		return fail(err)
	}
	c.started = sync.OnceFunc(func() { closeAll(ws); release() })
	c.stopStdin, c.feed = stop, feed
	call.Stdin, call.Stdout, call.Stderr = stdin, ws[0], ws[1]
	return c, nil
}

// drain waits for the output copies to end; when something outside the
// jail's control still holds a pipe open, the pipes are closed after grace.
func drain(copies *sync.WaitGroup, readers []*os.File) {
	done := make(chan struct{})
	go func() { copies.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		closeAll(readers)
		<-done
	}
	closeAll(readers)
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// counter counts the bytes passed to w.
type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	// A failed write is dropped: the pipe keeps draining, so that the
	// command never blocks on output nobody reads.
	c.w.Write(p)
	return len(p), nil
}
