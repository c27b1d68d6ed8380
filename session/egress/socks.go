package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

// SOCKS5 (RFC 1928), CONNECT only, no authentication: written here, as no
// well-kept Go server of it is served to this project; it is the greeting,
// one request and one reply before the relay.
const (
	socksVersion = 5

	socksNoAuth       = 0x00
	socksNoAcceptable = 0xff

	socksConnect = 0x01

	socksIPv4   = 0x01
	socksDomain = 0x03
	socksIPv6   = 0x04

	socksSucceeded          = 0x00
	socksFailure            = 0x01
	socksNotAllowed         = 0x02
	socksNetUnreachable     = 0x03
	socksHostUnreachable    = 0x04
	socksConnRefused        = 0x05
	socksCmdNotSupported    = 0x07
	socksAddrTypeNotSupport = 0x08
)

// serveSOCKS answers one SOCKS5 connection: the destination is checked
// and dialled as dial does, and the two are relayed until either ends; a
// host a masked credential is bound to, asked for by name, is served as
// a CONNECT to it is (serveMasked).
func (p *Proxy) serveSOCKS(c *bufferedConn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(requestTimeout))
	host, port, err := socksHandshake(c)
	if err != nil {
		return
	}
	target, err := p.dial(context.Background(), "socks5", host, port)
	if err != nil {
		socksReply(c, socksCode(err), nil)
		return
	}
	defer target.Close()
	if err := socksReply(c, socksSucceeded, target.LocalAddr()); err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	if p.terminates(host, port) {
		p.serveMasked(c, target, host, port, "socks5")
		return
	}
	relay(c, target)
}

// socksHandshake reads the greeting (and accepts no authentication) and
// the request, and returns the destination; on a request it cannot serve
// it replies and returns an error.
func socksHandshake(c net.Conn) (string, int, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil || hdr[0] != socksVersion {
		return "", 0, errors.New("not SOCKS5")
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(c, methods); err != nil {
		return "", 0, err
	}
	method := byte(socksNoAcceptable)
	for _, m := range methods {
		if m == socksNoAuth {
			method = socksNoAuth
		}
	}
	if _, err := c.Write([]byte{socksVersion, method}); err != nil || method != socksNoAuth {
		return "", 0, errors.New("no acceptable method")
	}
	var req [4]byte // VER CMD RSV ATYP
	if _, err := io.ReadFull(c, req[:]); err != nil || req[0] != socksVersion {
		return "", 0, errors.New("bad request")
	}
	var host string
	switch req[3] {
	case socksIPv4, socksIPv6:
		ip := make(net.IP, map[byte]int{socksIPv4: 4, socksIPv6: 16}[req[3]])
		if _, err := io.ReadFull(c, ip); err != nil {
			return "", 0, err
		}
		host = ip.String()
	case socksDomain:
		var n [1]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return "", 0, err
		}
		name := make([]byte, n[0])
		if _, err := io.ReadFull(c, name); err != nil {
			return "", 0, err
		}
		host = string(name)
	default:
		socksReply(c, socksAddrTypeNotSupport, nil)
		return "", 0, errors.New("address type")
	}
	var pb [2]byte
	if _, err := io.ReadFull(c, pb[:]); err != nil {
		return "", 0, err
	}
	if req[1] != socksConnect {
		socksReply(c, socksCmdNotSupported, nil)
		return "", 0, errors.New("only CONNECT")
	}
	return host, int(binary.BigEndian.Uint16(pb[:])), nil
}

// socksCode is the reply that says why a dial failed.
func socksCode(err error) byte {
	var refused *RefusedError
	switch {
	case errors.As(err, &refused):
		return socksNotAllowed
	case errors.Is(err, syscall.ECONNREFUSED):
		return socksConnRefused
	case errors.Is(err, syscall.ENETUNREACH):
		return socksNetUnreachable
	case errors.Is(err, syscall.EHOSTUNREACH):
		return socksHostUnreachable
	}
	return socksFailure
}

// socksReply sends a reply with bound, the proxy's side of the connection
// (zero when there is none).
func socksReply(c net.Conn, code byte, bound net.Addr) error {
	b := []byte{socksVersion, code, 0, socksIPv4, 0, 0, 0, 0, 0, 0}
	if a, ok := bound.(*net.TCPAddr); ok {
		if ip4 := a.IP.To4(); ip4 != nil {
			copy(b[4:8], ip4)
		} else {
			b = append([]byte{socksVersion, code, 0, socksIPv6}, a.IP.To16()...)
			b = append(b, 0, 0)
		}
		binary.BigEndian.PutUint16(b[len(b)-2:], uint16(a.Port))
	}
	_, err := c.Write(b)
	return err
}
