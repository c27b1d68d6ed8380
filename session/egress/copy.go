package egress

import (
	"cmp"
	"io"
	"net"
	"sync"
)

// The proxy moves bytes between sockets through buffers it holds only
// while it has bytes in hand (read, not yet written): a connection that
// waits holds none. Large buffers move a fast transfer in fewer system
// calls; at most bigBuffers of them are in hand at once in the whole
// server, and past that copies use small ones, so that no command makes
// the server hold more than that for its connections. On loopback this
// copy measured faster than splice(2) through a pipe, which moves a few
// pages at a time.
const (
	bigBuffer   = 1 << 20
	smallBuffer = 32 << 10
	bigBuffers  = 16
)

var (
	bigInHand = make(chan struct{}, bigBuffers)
	bigPool   = sync.Pool{New: func() any { b := make([]byte, bigBuffer); return &b }}
	smallPool = sync.Pool{New: func() any { b := make([]byte, smallBuffer); return &b }}
)

// takeBuffer is a buffer to read into: a large one while fewer than
// bigBuffers are in hand, else a small one.
func takeBuffer() *[]byte {
	select {
	case bigInHand <- struct{}{}:
		return bigPool.Get().(*[]byte)
	default:
		return smallPool.Get().(*[]byte)
	}
}

func giveBuffer(b *[]byte) {
	if len(*b) == bigBuffer {
		bigPool.Put(b)
		<-bigInHand
		return
	}
	smallPool.Put(b)
}

// relay copies between a client and its destination both ways until both
// directions end, passing on each end of input as a half close; what the
// client sent ahead, read while its request was, goes first.
func relay(client *bufferedConn, target net.Conn) {
	if n := client.r.Buffered(); n > 0 {
		ahead, _ := client.r.Peek(n)
		target.Write(ahead)
		client.r.Discard(n)
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		pump(dst, src, -1)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go pipe(client.Conn, target)
	go pipe(target, client.Conn)
	<-done
	<-done
}

// limitTo is how much of at most room bytes to read, with limit bytes
// left to copy (negative: no limit).
func limitTo(room int, limit int64) int {
	if limit >= 0 && int64(room) > limit {
		return int(limit)
	}
	return room
}

// pumpBuffered copies src to dst, limit bytes (negative: to the end)
// through a buffer taken for each read: for a src with no descriptor to
// wait on.
func pumpBuffered(dst io.Writer, src io.Reader, limit int64) (int64, error) {
	var total int64
	for limit < 0 || total < limit {
		buf := takeBuffer()
		n, err := src.Read((*buf)[:limitTo(len(*buf), limit-total)])
		var werr error
		if n > 0 {
			n, werr = dst.Write((*buf)[:n])
			total += int64(n)
		}
		giveBuffer(buf)
		if err == io.EOF {
			return total, nil
		}
		if err = cmp.Or(werr, err); err != nil {
			return total, err
		}
	}
	return total, nil
}
