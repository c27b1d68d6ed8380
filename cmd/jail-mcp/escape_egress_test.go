//go:build linux

package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// egressTarget is a host server the allowlist does not admit: every
// request that reaches it is an escape.
type egressTarget struct {
	port string
	hits atomic.Int64
}

func newEgressTarget(t *testing.T) *egressTarget {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &egressTarget{port: fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.hits.Add(1)
		fmt.Fprint(w, "reached the target")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return e
}

// Allowlist (--network allow:...), attacked from inside: the target is a
// loopback server of the host the list does not admit, reached by name,
// by address, through the session's other proxies, by smuggling it past
// the proxy's checks, and around the proxy.
func (fx *escapeFixture) egress(t *testing.T) {
	allowedPort := egressWeb(t)
	target := newEgressTarget(t)
	hosts := "allowed.test=127.0.0.1,target.test=127.0.0.1,wide.test=127.0.0.1"
	// The operator admits allowed.test on its port and wide.test on the
	// target's port; calls narrow to allowed.test alone, so that the
	// session has a second agent, whose proxy would admit the target.
	ts := fx.start(t, testkit.NewProject(t), fx.env(testkit.TestHosts+"="+hosts),
		"--session", "egress", "--network", "allow:allowed.test:"+allowedPort+",wide.test:"+target.port)
	if res, _ := ts.Exec(map[string]any{"command": "curl -sS http://wide.test:" + target.port + "/"}); res.Stdout != "reached the target" {
		t.Fatalf("the wide policy does not reach the target: %+v", res)
	}
	target.hits.Store(0)
	narrow := map[string]any{"allow": []string{"allowed.test:" + allowedPort}}
	check := func(t *testing.T) {
		if n := target.hits.Load(); n > 0 {
			fx.escape(t, "the target was reached %d time(s)", n)
			target.hits.Store(0)
		}
	}
	tp := target.port
	for _, v := range []struct{ name, script string }{
		// Every TCP port that listens on any address the jail can see,
		// asked to proxy to the target: the session's other proxy among
		// them under landlock, which sees the host's sockets.
		{"other-proxies", py(`
import socket
ports = set()
for f in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        for line in open(f).read().splitlines()[1:]:
            loc, st = line.split()[1], line.split()[3]
            if st == "0A":
                ports.add(int(loc.split(":")[1], 16))
    except OSError:
        pass
addrs = ["127.0.0.1", "::1"]
for p in sorted(ports):
    for a in addrs:
        try:
            s = socket.create_connection((a, p), 2)
        except OSError:
            continue
        try:
            s.settimeout(2)
            s.sendall(("GET http://wide.test:` + tp + `/ HTTP/1.1\r\nHost: wide.test:` + tp + `\r\nConnection: close\r\n\r\n").encode())
            if b"reached the target" in s.recv(4096):
                escaped("proxied to the target through port %d" % p)
        except OSError:
            pass
        s.close()
`)},
		// Past the checks of the session's own proxy.
		{"smuggle", `
P="$HTTP_PROXY"
curl -sS -m 5 -x "$P" "http://allowed.test:` + allowedPort + `@target.test:` + tp + `/" 2>/dev/null | grep -q reached && echo "ESCAPED: userinfo"
printf 'GET http://allowed.test:` + allowedPort + `/ HTTP/1.1\r\nHost: target.test:` + tp + `\r\nConnection: close\r\n\r\n' | curl -sS -m 5 telnet://${P#http://} 2>/dev/null | grep -q reached && echo "ESCAPED: host header"
for a in "127.0.0.1:` + tp + `" "[::ffff:127.0.0.1]:` + tp + `" "TARGET.TEST.:` + tp + `" "allowed.test:` + tp + `" "2130706433:` + tp + `" "0x7f.1:` + tp + `" "localhost:` + tp + `"; do
  curl -sS -m 5 -p -x "$P" "http://$a/" 2>/dev/null | grep -q reached && echo "ESCAPED: CONNECT $a"
  curl -sS -m 5 -x "$P" "http://$a/" 2>/dev/null | grep -q reached && echo "ESCAPED: GET $a"
  curl -sS -m 5 --proxy "$ALL_PROXY" "http://$a/" 2>/dev/null | grep -q reached && echo "ESCAPED: SOCKS $a"
  curl -sS -m 5 --socks5 "${ALL_PROXY#socks5h://}" "http://$a/" 2>/dev/null | grep -q reached && echo "ESCAPED: SOCKS by address $a"
done
printf 'GET http://allowed.test:` + allowedPort + `/ HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET http://target.test:` + tp + `/ HTTP/1.1\r\nHost: target.test:` + tp + `\r\n\r\n' | curl -sS -m 5 telnet://${P#http://} 2>/dev/null | grep -q reached && echo "ESCAPED: a second request on the connection"
curl -sS -m 5 -x "$P" "http://${P#http://}/" >/dev/null 2>&1; true
`},
		// Around the proxy: straight to the target, to every address of
		// the host, over UDP (DNS) and raw sockets.
		{"direct", py(`
import socket
for a in ["127.0.0.1", "::1", "::ffff:127.0.0.1", "0.0.0.0"] + [l.split()[0] for l in open("/etc/hosts") if l.strip() and not l.startswith("#")]:
    try:
        s = socket.create_connection((a, ` + tp + `), 2)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        if b"reached" in s.recv(4096):
            escaped("direct to " + a)
    except OSError:
        pass
for fam, a in ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1")):
    try:
        u = socket.socket(fam, socket.SOCK_DGRAM)
        u.sendto(b"x", (a, 53))
        escaped("a UDP datagram to %s left" % a)
    except OSError:
        pass
for kind, proto in ((socket.SOCK_RAW, socket.IPPROTO_ICMP), (socket.SOCK_RAW, socket.IPPROTO_TCP)):
    attempt("a raw socket", socket.socket, socket.AF_INET, kind, proto)
attempt("an SCTP socket", socket.socket, socket.AF_INET, socket.SOCK_STREAM, 132)
try:
    m = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)  # MPTCP
    m.settimeout(3)
    m.connect(("127.0.0.1", ` + tp + `))
    m.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    if b"reached" in m.recv(4096):
        escaped("MPTCP to the target")
except OSError:
    pass
`)},
		// Around connect(2), the one call Landlock's CONNECT_TCP sees: TCP
		// Fast Open connects from a send (the kernel's default
		// tcp_fastopen=1 enables the client side).
		{"fastopen", py(`
import socket
MSG_FASTOPEN, TCP_FASTOPEN_CONNECT = 0x20000000, 30
req = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
def got(s):
    try:
        return b"reached" in s.recv(4096)
    except OSError:
        return False
for fam, a in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    for how in ("sendto", "sendmsg", "connect"):
        try:
            # Blocking, as a non-blocking send without a cookie only
            # starts the handshake (EINPROGRESS); loopback answers at once.
            s = socket.socket(fam, socket.SOCK_STREAM)
            if how == "sendto":
                s.sendto(req, MSG_FASTOPEN, (a, ` + tp + `))
            elif how == "sendmsg":
                s.sendmsg([req], [], MSG_FASTOPEN, (a, ` + tp + `))
            else:
                s.setsockopt(socket.IPPROTO_TCP, TCP_FASTOPEN_CONNECT, 1)
                s.connect((a, ` + tp + `))
                s.sendall(req)
            s.settimeout(3)
            if got(s):
                escaped("TCP Fast Open (%s) to %s" % (how, a))
        except OSError:
            pass
`)},
	} {
		fx.vector(t, "egress-"+v.name, func(t *testing.T) {
			fx.attack(t, ts, v.script, narrow)
			check(t)
		})
	}
	// The proxy's own port, taken over: a listener of the command's on it
	// (alone, or sharing it by SO_REUSEADDR/SO_REUSEPORT) would receive
	// the connections meant for the proxy.
	fx.vector(t, "egress-steal-port", func(t *testing.T) {
		fx.attack(t, ts, py(`
import socket, urllib.parse
u = urllib.parse.urlparse(E["HTTP_PROXY"])
for opts in ((), (socket.SO_REUSEADDR,), (socket.SO_REUSEPORT,), (socket.SO_REUSEADDR, socket.SO_REUSEPORT)):
    for host in (u.hostname, "0.0.0.0"):
        s = socket.socket()
        try:
            for o in opts:
                s.setsockopt(socket.SOL_SOCKET, o, 1)
            s.bind((host, u.port))
            s.listen(1)
            escaped("listening on the proxy's port %s:%d with %s" % (host, u.port, opts))
        except OSError:
            pass
        s.close()
`), narrow)
		check(t)
	})
	// Inbound: a listener of the command's on the host's addresses serves
	// whoever connects (and squats a port a host service wants). Bound,
	// or bound by listen(2) itself; the host then tries it.
	fx.vector(t, "egress-inbound", func(t *testing.T) {
		jail := ts.Status().Jail
		for _, how := range []string{"bind", "autobind"} {
			portFile := filepath.Join(jail, "inbound-port-"+how)
			done := make(chan struct{})
			go func() {
				defer close(done)
				fx.attack(t, ts, py(`
import socket
s = socket.socket()
port = "none"
try:
    if "`+how+`" == "bind":
        s.bind(("0.0.0.0", 0))
    s.listen(1)
    port = str(s.getsockname()[1])
except OSError:
    pass
with open(HOME + "/.inbound-port-`+how+`", "w") as f:
    f.write(port)
os.rename(HOME + "/.inbound-port-`+how+`", HOME + "/inbound-port-`+how+`")
if port != "none":
    s.settimeout(5)
    try:
        c, _ = s.accept()
        c.sendall(b"jail-listener")
        c.close()
    except OSError:
        pass
`), narrow)
			}()
			var port []byte
			testkit.WaitFor(30*time.Second, func() bool {
				port, _ = os.ReadFile(portFile)
				return len(port) > 0
			})
			if p := string(port); p != "none" && p != "" {
				if c, err := net.DialTimeout("tcp", "127.0.0.1:"+p, 3*time.Second); err == nil {
					c.SetReadDeadline(time.Now().Add(3 * time.Second))
					buf := make([]byte, 32)
					n, _ := c.Read(buf)
					if string(buf[:n]) == "jail-listener" {
						fx.escape(t, "the host reached a listener of the command (%s) on port %s", how, p)
					}
					c.Close()
				}
			}
			<-done
			os.Remove(portFile)
		}
		check(t)
	})
	// A request header without end: the proxy stops reading it (the
	// server must not hold what a command sends).
	fx.vector(t, "egress-endless-header", func(t *testing.T) {
		fx.attack(t, ts, py(`
import socket, urllib.parse
u = urllib.parse.urlparse(E["HTTP_PROXY"])
s = socket.create_connection((u.hostname, u.port), 5)
s.settimeout(10)
s.sendall(b"GET http://allowed.test:`+allowedPort+`/ HTTP/1.1\r\nX-Long: ")
line, sent = b"a" * 65536, 0
try:
    while sent < 64 << 20:
        s.sendall(line)
        sent += len(line)
    escaped("the proxy took a request header of %d bytes" % sent)
except OSError:
    pass
`), narrow)
		check(t)
	})
	// A flood of connections to the proxy leaves the server serving.
	fx.vector(t, "egress-flood", func(t *testing.T) {
		fx.attack(t, ts, py(`
import socket, urllib.parse
u = urllib.parse.urlparse(E["HTTP_PROXY"])
socks = []
for i in range(600):
    try:
        socks.append(socket.create_connection((u.hostname, u.port), 2))
    except OSError:
        break
for s in socks:
    s.close()
`), narrow)
		res, _ := ts.Exec(map[string]any{"command": "curl -sS http://allowed.test:" + allowedPort + "/", "allow": narrow["allow"]})
		if !strings.HasPrefix(res.Stdout, "hello") {
			t.Errorf("after the flood: %+v", res)
		}
		check(t)
	})
}
