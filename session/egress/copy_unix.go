//go:build unix

package egress

import (
	"net"
	"syscall"
)

// pump copies src to dst, limit bytes (negative: to the end), taking a
// buffer only once src has bytes to read: it waits on src's descriptor
// with none in hand.
func pump(dst, src net.Conn, limit int64) (int64, error) {
	sc, ok := src.(syscall.Conn)
	if !ok {
		return pumpBuffered(dst, src, limit)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return pumpBuffered(dst, src, limit)
	}
	var total int64
	for limit < 0 || total < limit {
		var buf *[]byte
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			buf = takeBuffer()
			for {
				n, rerr = syscall.Read(int(fd), (*buf)[:limitTo(len(*buf), limit-total)])
				if rerr != syscall.EINTR {
					break
				}
			}
			n = max(n, 0)
			if rerr == syscall.EAGAIN {
				giveBuffer(buf)
				buf = nil
				return false // wait, with no buffer in hand
			}
			return true
		})
		if buf == nil {
			return total, err
		}
		var werr error
		if n > 0 {
			n, werr = dst.Write((*buf)[:n])
			total += int64(n)
		}
		giveBuffer(buf)
		switch {
		case err != nil:
			return total, err
		case rerr != nil:
			return total, rerr
		case werr != nil:
			return total, werr
		case n == 0:
			return total, nil // the end
		}
	}
	return total, nil
}
