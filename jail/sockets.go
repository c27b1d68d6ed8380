package jail

import (
	"bufio"
	"io"
	"strings"
)

// listeningSockets parses /proc/net/unix and returns the paths of the
// pathname sockets that are listening (__SO_ACCEPTCON set), in the order
// listed, without duplicates. Abstract sockets (@name) are left out: they
// live in the network namespace, not the filesystem.
func listeningSockets(r io.Reader) []string {
	const acceptCon = 0x10000
	var out []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for first := true; sc.Scan(); first = false {
		if first {
			continue // header
		}
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		var flags uint64
		for _, c := range f[3] {
			d := strings.IndexRune("0123456789abcdef", c|0x20)
			if d < 0 {
				flags = 0
				break
			}
			flags = flags<<4 | uint64(d)
		}
		// The path is the rest of the line: it may contain spaces.
		path := strings.Join(f[7:], " ")
		if flags&acceptCon == 0 || !strings.HasPrefix(path, "/") || seen[path] {
			continue
		}
		seen[path] = true
		out = append(out, path)
	}
	return out
}
