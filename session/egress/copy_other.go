//go:build !unix

package egress

import "net"

// pump copies src to dst, limit bytes (negative: to the end).
func pump(dst, src net.Conn, limit int64) (int64, error) {
	return pumpBuffered(dst, src, limit)
}
