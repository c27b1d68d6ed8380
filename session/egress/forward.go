package egress

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// A plain request (GET http://host/...) is checked like a CONNECT, sent
// on over a connection of its own, and its answer relayed back; then the
// client's connection ends. One request per connection keeps every
// request checked, and lets a body whose length the answer gives go from
// socket to socket as a tunnel's bytes do (relay): an HTTP transport and
// server in between (goproxy, tried first) handled every byte twice more
// and reached a third of a direct download's speed.

// forward serves one plain proxy request.
func (p *Proxy) forward(c *bufferedConn, req *http.Request) {
	if req.URL.Scheme != "http" || req.URL.Host == "" {
		req.Body.Close()
		writeAnswer(c, http.StatusBadRequest, "jail-mcp egress proxy: send proxy requests (an absolute http:// URL, or CONNECT)")
		return
	}
	if p.opts.Masks != nil {
		// Counted whether or not the host is reached: the command sent it.
		port, _ := strconv.Atoi(cmp.Or(req.URL.Port(), "80"))
		p.checkPlain(req, req.URL.Hostname(), port)
	}
	addr := net.JoinHostPort(req.URL.Hostname(), cmp.Or(req.URL.Port(), "80"))
	target, err := p.dialAddr(req.Context(), "http", addr)
	if err != nil {
		req.Body.Close()
		writeRefusal(c, err)
		return
	}
	defer target.Close()
	// Sent as it came (net/http adds a User-Agent where there is none),
	// without what was for this proxy, and asking for the end.
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""}
	}
	dropHopHeaders(req.Header)
	req.Close = true
	// The request's body goes on while the answer comes back: a client
	// may wait for "100 Continue" before it sends it. Once it is sent,
	// the client's end ends the exchange (as net/http's server does);
	// anything more it sends is dropped.
	go func() {
		if err := req.Write(target); err == nil {
			io.Copy(io.Discard, c)
		}
		target.Close()
	}()
	relayAnswer(c, target, req)
}

// relayAnswer passes the destination's answer (its 1xx first) on to the
// client, marked as the connection's last; a body of known length is
// copied from socket to socket.
func relayAnswer(c *bufferedConn, target net.Conn, req *http.Request) {
	head := &io.LimitedReader{R: target}
	br := bufio.NewReader(head)
	for {
		head.N = maxHeader
		resp, err := http.ReadResponse(br, req)
		head.N = math.MaxInt64
		if err != nil {
			writeAnswer(c, http.StatusBadGateway, "jail-mcp egress proxy: no answer from "+req.URL.Host)
			return
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			writeAnswer(c, http.StatusBadGateway, "jail-mcp egress proxy: no protocol upgrade through a plain request (use CONNECT)")
			return
		}
		interim := resp.StatusCode < 200
		dropHopHeaders(resp.Header)
		bodyless := interim || req.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified
		if !bodyless {
			if resp.ContentLength >= 0 {
				resp.Header.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
			} else {
				resp.Header.Del("Content-Length") // to the end of the connection
			}
		}
		if !interim {
			resp.Header.Set("Connection", "close")
		}
		var head strings.Builder
		fmt.Fprintf(&head, "HTTP/1.1 %s\r\n", resp.Status)
		resp.Header.Write(&head)
		head.WriteString("\r\n")
		if _, err := io.WriteString(c.Conn, head.String()); err != nil {
			return
		}
		if interim {
			continue
		}
		if bodyless {
			return
		}
		if resp.ContentLength < 0 {
			// Chunked, or to the end: the body net/http decodes.
			pumpBuffered(c.Conn, resp.Body, -1)
			return
		}
		// Known length: what was read ahead, then socket to socket.
		ahead := int64(br.Buffered())
		if ahead > resp.ContentLength {
			ahead = resp.ContentLength
		}
		if _, err := io.CopyN(c.Conn, br, ahead); err != nil {
			return
		}
		pump(c.Conn, target, resp.ContentLength-ahead)
		return
	}
}

// hopHeaders are the headers of one connection, not passed on (RFC 9110
// 7.6.1), with those the Connection header names.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func dropHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// writeRefusal answers a request that could not be passed on: 403 for a
// refusal, 502 for a destination that did not answer.
func writeRefusal(w io.Writer, err error) {
	code := http.StatusBadGateway
	var refused *RefusedError
	if errors.As(err, &refused) {
		code = http.StatusForbidden
	}
	writeAnswer(w, code, err.Error())
}

// writeAnswer answers with code and a line of text, and the end.
func writeAnswer(w io.Writer, code int, text string) {
	text += "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", code, http.StatusText(code), len(text), text)
}
