package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/cli"
	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/metrics"
	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
	"github.com/jail-mcp/jail-mcp/session/jailfs/jailfstest"
	"github.com/jail-mcp/jail-mcp/tools"
)

// The tests here drive `jail-mcp serve --listen` as a subprocess over real
// HTTP: with the mcp-go client where a client would, and with raw requests
// where the transport's own checks are under test.

// httpModernVersion is the sessionless revision the server must refuse.
const httpModernVersion = "2026-07-28"

// startHTTPInProcess serves the HTTP transport from this process, on a
// free loopback port, with an MCP server that has no tools, until the test
// ends: for the tests that lower the limits of the session table, or read
// it. set, when not nil, adjusts the table before the server starts.
func startHTTPInProcess(t *testing.T, set func(*httpSessions)) (*testkit.HTTPServer, *httpSessions) {
	t.Helper()
	stderr := &testkit.SyncBuffer{}
	log := cli.NewLogger(stderr, slog.LevelDebug)
	sessions := newHTTPSessions(nil, log, cli.DefaultMaxSessions)
	if set != nil {
		set(sessions)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := testkit.InProcess(t, ln, stderr, func(ctx context.Context) error {
		met := metrics.New(sessions.count, func() int { return 0 })
		cfg := cli.Config{MaxTimeout: time.Minute, MaxConns: cli.DefaultMaxConns, MaxConnsPerAddr: cli.DefaultMaxConns}
		return serveHTTP(ctx, ln, server.NewMCPServer("jail-mcp-test", "0"), sessions, met, cfg, newHTTPLimits(cfg), log)
	})
	return hs, sessions
}

// httpFoundUnder reports whether anything named name exists under root.
func httpFoundUnder(root, name string) bool {
	found := false
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == name {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

// httpTree maps every path under root to its size, -1 for a directory.
// The kernel's work directories of the project view (.overlay/work/*) and
// of its caches (.overlay/caches/NAME/work-*) are left out: the jail's own
// session agent makes and removes them as its views come and go, and the
// kernel makes some of them mode 000, which a normal user's walk may not
// enter.
func httpTree(t *testing.T, root string) map[string]int64 {
	tree := jailfstest.Tree(t, root, func(p string, fi fs.FileInfo) (int64, error) {
		if rel, _ := filepath.Rel(root, p); viewWork(rel) {
			return -1, filepath.SkipDir
		}
		if fi.IsDir() {
			return -1, nil
		}
		return fi.Size(), nil
	})
	for p := range tree {
		for q := p; q != "." && q != "/"; q = filepath.Dir(q) {
			if viewWork(q) {
				delete(tree, p)
				break
			}
		}
	}
	return tree
}

// viewWork reports whether rel, in a jail, is a kernel work directory of
// the project view or of one of its caches.
func viewWork(rel string) bool {
	if rel == filepath.Join(".overlay", "work") {
		return true
	}
	m, _ := filepath.Match(filepath.Join(".overlay", "caches", "*", "work-*"), rel)
	return m
}

// httpIsCancelled reports whether r is a result saying the call was
// cancelled.
func httpIsCancelled(t *testing.T, r testkit.CallResult) bool {
	t.Helper()
	if r.Err != nil || r.Res == nil {
		return false
	}
	var out tools.ExecResult
	testkit.DecodeResult(t, r.Res, &out)
	return r.Res.IsError && out.Cancelled && out.ExitCode == -1 && strings.Contains(testkit.ResultText(r.Res), "cancelled")
}

// 1. Each MCP session has its own jail, named by the server with a name
// that is not the session's id, and no tool argument reaches another
// session's jail.
func TestHTTPSessionsGetTheirOwnJails(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		hs := testkit.StartHTTP(t, project, testkit.ServerEnv(b.Env...), b.Args...)
		// One client with mcp-go's default (it probes 2026-07-28 first and
		// falls back), one pinned to the newest version with sessions.
		sa := hs.Connect(t, "")
		sb := hs.Connect(t, testkit.LegacyVersion)
		if sa.ID == sb.ID {
			t.Fatalf("two sessions got the same id %s", sa.ID)
		}
		for _, s := range []struct {
			*testkit.HTTPSession
			name string
		}{{sa, "a"}, {sb, "b"}} {
			res, raw := s.Exec(map[string]any{"command": "echo " + s.name + " > $HOME/owner; echo $HOME"})
			if res.ExitCode != 0 || raw.IsError {
				t.Fatalf("session %s: %+v %s", s.name, res, testkit.ResultText(raw))
			}
			if got := strings.TrimSpace(res.Stdout); got != s.Jail() {
				t.Errorf("session %s: HOME = %q, want %q", s.name, got, s.Jail())
			}
			if res.Session != s.Name() || res.Jail != s.Jail() || res.Backend != b.Name || !res.Confined {
				t.Errorf("session %s: result session %q jail %q backend %q confined %t; want %q %q %q confined",
					s.name, res.Session, res.Jail, res.Backend, res.Confined, s.Name(), s.Jail(), b.Name)
			}
			if _, err := uuid.Parse(s.Name()); err != nil || s.Name() == s.ID || strings.Contains(res.Stdout+testkit.ResultText(raw), s.ID) {
				t.Errorf("session %s: jail %q, a UUID other than the session id %s that no result shows", s.name, s.Name(), s.ID)
			}
			if got := testkit.MustRead(t, filepath.Join(s.Jail(), "owner")); got != s.name+"\n" {
				t.Errorf("session %s: %s/owner = %q", s.name, s.Jail(), got)
			}
			st := s.Status()
			if st.Session != s.Name() || st.Jail != s.Jail() || st.Backend != b.Name || !st.Confined || st.Project != project {
				t.Errorf("session %s: jail_status session %q jail %q backend %q confined %t project %q",
					s.name, st.Session, st.Jail, st.Backend, st.Confined, st.Project)
			}
		}
		if got, want := testkit.JailNames(t, project), slices.Sorted(slices.Values([]string{sa.Name(), sb.Name()})); !slices.Equal(got, want) {
			t.Errorf("jails %v, want %v", got, want)
		}

		link := filepath.Join(project, "link-to-other")
		for _, pair := range [][2]*testkit.HTTPSession{{sa, sb}, {sb, sa}} {
			self, other := pair[0], pair[1]
			t.Run("into "+other.ID[:8], func(t *testing.T) {
				before := httpTree(t, other.Jail())
				ownerBefore := testkit.MustRead(t, filepath.Join(other.Jail(), "owner"))
				os.Remove(link)
				if err := os.Symlink(other.Jail(), link); err != nil {
					t.Fatal(err)
				}
				// A cwd in the other jail is refused before anything runs.
				rel, _ := filepath.Rel(project, other.Jail())
				for i, args := range []map[string]any{
					{"command": "touch crossed-0", "cwd": other.Jail()},
					{"command": "touch crossed-1", "cwd": rel},
					{"command": "touch crossed-2", "cwd": filepath.Join(other.Jail(), ".tmp")},
					{"command": "touch crossed-3", "cwd": "link-to-other"},
					{"command": "touch crossed-4", "cwd": link},
					{"command": "touch crossed-5", "cwd": filepath.Join(self.Jail(), "..", other.Name())},
					{"argv": []string{"touch", "crossed-6"}, "cwd": other.Jail()},
					{"command": "touch $HOME/crossed-7", "env": map[string]any{"HOME": other.Jail()}},
					{"command": "touch $TMPDIR/crossed-8", "env": map[string]any{"TMPDIR": other.Jail()}},
					{"command": "touch $XDG_CONFIG_HOME/crossed-9", "env": map[string]any{"XDG_CONFIG_HOME": other.Jail()}},
				} {
					res, raw := self.Exec(args)
					if !raw.IsError || res.Session != "" || !strings.HasPrefix(testkit.ResultText(raw), "refused") {
						t.Errorf("%v: not refused: %+v %q", args, res, testkit.ResultText(raw))
					}
					if httpFoundUnder(project, fmt.Sprintf("crossed-%d", i)) {
						t.Errorf("%v: the command ran", args)
					}
				}
				// A command running in its own jail cannot write into the other.
				oj := other.Jail()
				attempts := []string{
					"echo pwned > " + oj + "/owner",
					"echo pwned >> " + oj + "/owner",
					"touch " + oj + "/new",
					"mkdir " + oj + "/newdir",
					"ln -s /etc " + oj + "/lnk",
					"ln $HOME/owner " + oj + "/hard",
					"rm " + oj + "/owner",
					"mv " + oj + "/owner " + oj + "/moved",
					"mv $HOME/owner " + oj + "/given",
					"truncate -s 0 " + oj + "/owner",
					"cd " + oj + " && touch here",
					"ln -s " + oj + " $HOME/to-other && echo pwned > $HOME/to-other/owner",
					"echo pwned > /proc/self/root" + oj + "/owner",
					"cp $HOME/owner " + oj + "/.tmp/copied",
				}
				// Changes of metadata are refused where the backend claims
				// promise 1 whole: Landlock lists it as not kept (it cannot
				// stop chmod and utime of the server's user's files).
				metadata := []string{"chmod 777 " + oj + "/owner", "touch -d 2001-01-01 " + oj + "/owner"}
				if testkit.Keeps(self.Status(), 1) {
					attempts = append(attempts, metadata...)
				}
				for _, cmd := range attempts {
					if res, raw := self.Exec(map[string]any{"command": cmd}); res.ExitCode == 0 || !raw.IsError {
						t.Errorf("%q succeeded: %+v", cmd, res)
					}
				}
				if got := testkit.MustRead(t, filepath.Join(oj, "owner")); got != ownerBefore {
					t.Errorf("the other jail's owner file = %q, want %q", got, ownerBefore)
				}
				after := httpTree(t, oj)
				for p, size := range after {
					if before[p] != size {
						t.Errorf("the other jail changed: %s (size %d, was %d)", p, size, before[p])
					}
				}
				for p := range before {
					if _, ok := after[p]; !ok {
						t.Errorf("the other jail lost %s", p)
					}
				}
				if testkit.Keeps(self.Status(), 1) {
					fi, err := os.Stat(filepath.Join(oj, "owner"))
					if err != nil || fi.Mode().Perm() == 0o777 || fi.ModTime().Year() == 2001 {
						t.Errorf("the other jail's owner changed: %v %v", fi, err)
					}
				}
				// Put back what mv $HOME/owner may have taken.
				self.Exec(map[string]any{"command": "test -e $HOME/owner || echo restored > $HOME/owner"})
			})
		}

		// jail_reset empties the caller's jail only.
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if res, err := sa.Call(ctx, "jail_reset", nil); err != nil || res.IsError {
			t.Fatalf("jail_reset: %v %v", err, res)
		}
		if testkit.FileExists(filepath.Join(sa.Jail(), "owner")) {
			t.Error("jail_reset left the caller's file")
		}
		if got := testkit.MustRead(t, filepath.Join(sb.Jail(), "owner")); got != "b\n" {
			t.Errorf("jail_reset of one session touched the other's jail: owner = %q", got)
		}
		if z := testkit.Zombies(hs.Cmd.Process.Pid); len(z) > 0 {
			t.Errorf("the server has %d unreaped children, e.g. %v", len(z), z[:min(len(z), 3)])
		}
	})
}

// 2. Only ids the server minted and has not ended are served; requests
// without a session, or of the sessionless 2026-07-28 revision, run nothing.
func TestHTTPRefusesUnknownSessions(t *testing.T) {
	project := testkit.NewProject(t)
	hs := testkit.StartHTTP(t, project, testkit.ServerEnv())
	live := hs.Connect(t, "")
	if res, raw := live.Exec(map[string]any{"command": "echo live > $HOME/live"}); res.ExitCode != 0 {
		t.Fatalf("%+v %s", res, testkit.ResultText(raw))
	}
	ended := hs.Connect(t, testkit.LegacyVersion)
	if res, raw := ended.Exec(map[string]any{"command": "echo kept > $HOME/kept"}); res.ExitCode != 0 {
		t.Fatalf("%+v %s", res, testkit.ResultText(raw))
	}
	if r := hs.MustRaw(t, http.MethodDelete, ended.ID, nil, ""); r.Code != http.StatusOK {
		t.Fatalf("DELETE of a live session: %d %s", r.Code, r.Body)
	}
	if got := testkit.MustRead(t, filepath.Join(ended.Jail(), "kept")); got != "kept\n" {
		t.Errorf("ended session's file: %q", got)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if res, err := ended.Call(ctx, "jail_status", nil); err == nil {
		t.Errorf("the ended session's client still gets answers: %+v", res)
	}
	wantJails := slices.Sorted(slices.Values([]string{live.Name(), ended.Name()}))

	n := 100
	refusedCall := func(t *testing.T, session string, header map[string]string, meta map[string]any, want int) {
		t.Helper()
		n++
		marker := fmt.Sprintf("ran-%d-%d", os.Getpid(), n)
		r := hs.MustRaw(t, http.MethodPost, session, header, testkit.ToolsCallRPC(n, "touch $HOME/"+marker, meta))
		if r.Code != want {
			t.Errorf("tools/call: status %d, want %d: %s", r.Code, want, r.Body)
		}
		if res, ok := testkit.RPCResult(r, n); ok {
			t.Errorf("tools/call answered with a result: %v", res)
		}
		// tools/call answers once the command is over: had it run, its
		// file would be there now.
		if httpFoundUnder(project, marker) {
			t.Errorf("the refused tools/call ran its command")
		}
	}

	for _, c := range []struct{ name, id string }{
		{"forged", uuid.NewString()},
		{"garbage", "not-a-session-id"},
		{"path", "../../etc"},
		{"live id with a suffix", live.ID + "0"},
		{"live id in upper case", strings.ToUpper(live.ID)},
		{"terminated", ended.ID},
	} {
		t.Run(c.name, func(t *testing.T) {
			refusedCall(t, c.id, nil, nil, http.StatusNotFound)
			r := hs.MustRaw(t, http.MethodPost, c.id, nil, testkit.RPC(1, "tools/list", nil, nil))
			if r.Code != http.StatusNotFound {
				t.Errorf("tools/list: status %d, want 404", r.Code)
			}
			for _, method := range []string{http.MethodGet, http.MethodDelete} {
				if r := hs.MustRaw(t, method, c.id, nil, ""); r.Code != http.StatusNotFound {
					t.Errorf("%s: status %d, want 404: %s", method, r.Code, r.Body)
				}
			}
			if c.id != ended.ID && testkit.FileExists(hs.Jail(c.id)) {
				t.Errorf("a jail was made for %q", c.id)
			}
			// Each refusal is logged, with where it came from and why, and
			// an ended session's jail; never with the id (a command can read
			// a log, and an id is a key to its session).
			attrs := []string{"reason=unknown"}
			if c.id == ended.ID {
				attrs = []string{"reason=ended", testkit.LogAttr("jail", ended.Name())}
			}
			for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
				if !testkit.Warned(hs, "MCP session id refused", append([]string{"remote=127.0.0.1:", "method=" + method}, attrs...)...) {
					t.Errorf("no warning of the refused %s with %v; stderr:\n%s", method, attrs, hs.Stderr)
				}
			}
			if strings.Contains(hs.Stderr.String(), c.id) {
				t.Errorf("the log shows the refused id %q:\n%s", c.id, hs.Stderr)
			}
		})
	}

	t.Run("no session id", func(t *testing.T) {
		refusedCall(t, "", nil, nil, http.StatusBadRequest)
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			if r := hs.MustRaw(t, method, "", nil, ""); r.Code != http.StatusBadRequest {
				t.Errorf("%s: status %d, want 400: %s", method, r.Code, r.Body)
			}
		}
	})

	t.Run(httpModernVersion, func(t *testing.T) {
		meta := map[string]any{mcp.MetaKeyProtocolVersion: httpModernVersion}
		modern := map[string]string{mcp.HeaderProtocolVersion: httpModernVersion}
		noHeader := map[string]string{mcp.HeaderProtocolVersion: ""}
		later := map[string]string{mcp.HeaderProtocolVersion: "2027-01-01"}
		for _, c := range []struct {
			name    string
			session string
			header  map[string]string
			meta    map[string]any
		}{
			{"header, live session", live.ID, modern, nil},
			{"header, no session", "", modern, nil},
			{"header and _meta, no session", "", modern, meta},
			{"header and _meta, live session", live.ID, modern, meta},
			{"_meta, legacy header, live session", live.ID, nil, meta},
			{"_meta, no header, live session", live.ID, noHeader, meta},
			{"_meta, no header, no session", "", noHeader, meta},
			{"later version, live session", live.ID, later, map[string]any{mcp.MetaKeyProtocolVersion: "2027-01-01"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				refusedCall(t, c.session, c.header, c.meta, http.StatusBadRequest)
			})
		}
		t.Run("server/discover", func(t *testing.T) {
			r := hs.MustRaw(t, http.MethodPost, "", modern, testkit.RPC(1, "server/discover", nil, meta))
			if r.Code != http.StatusBadRequest || r.Header.Get("Mcp-Session-Id") != "" {
				t.Errorf("status %d, session %q: %s", r.Code, r.Header.Get("Mcp-Session-Id"), r.Body)
			}
			if _, ok := testkit.RPCResult(r, 1); ok {
				t.Errorf("discover answered: %s", r.Body)
			}
		})
		t.Run("initialize", func(t *testing.T) {
			body := testkit.RPC(1, "initialize", map[string]any{
				"protocolVersion": httpModernVersion, "capabilities": map[string]any{},
				"clientInfo": map[string]any{"name": "raw", "version": "1"},
			}, meta)
			r := hs.MustRaw(t, http.MethodPost, "", modern, body)
			if r.Code != http.StatusBadRequest || r.Header.Get("Mcp-Session-Id") != "" {
				t.Errorf("status %d, session %q: %s", r.Code, r.Header.Get("Mcp-Session-Id"), r.Body)
			}
		})
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			t.Run(method, func(t *testing.T) {
				if r := hs.MustRaw(t, method, live.ID, modern, ""); r.Code != http.StatusBadRequest {
					t.Errorf("status %d, want 400: %s", r.Code, r.Body)
				}
			})
		}
	})

	// No session id was ever logged.
	for _, id := range []string{live.ID, ended.ID} {
		if strings.Contains(hs.Stderr.String(), id) {
			t.Errorf("the log shows the session id %s:\n%s", id, hs.Stderr)
		}
	}
	// None of it touched the live session, nor made a jail.
	if res, raw := live.Exec(map[string]any{"command": "cat $HOME/live"}); res.Stdout != "live\n" {
		t.Errorf("live session after the refusals: %+v %s", res, testkit.ResultText(raw))
	}
	if got := testkit.JailNames(t, project); !slices.Equal(got, wantJails) {
		t.Errorf("jails %v, want %v", got, wantJails)
	}
}

// 3. With a token, only requests carrying it are served; a non-loopback
// address needs one.
func TestHTTPToken(t *testing.T) {
	token := "jail-mcp-test-" + uuid.NewString()

	t.Run("loopback with token", func(t *testing.T) {
		project := testkit.NewProject(t)
		hs := testkit.StartHTTP(t, project, testkit.ServerEnv("JAIL_MCP_TOKEN="+token))
		wrong := "wrong-token-" + uuid.NewString()
		for _, c := range []struct{ auth, reason string }{
			{"", "missing"},
			{"Bearer " + wrong, "wrong"},
			{"Bearer " + token + "x", "wrong"},
			{"Bearer " + token[:len(token)-1], "wrong"},
			{"Bearer ", "missing"},
			{token, "not a bearer token"},
			{"Basic " + token, "not a bearer token"},
			{"Bearer  " + token, "wrong"},
		} {
			before := len(testkit.Warnings(hs.Stderr.String(), "bearer token refused"))
			r := hs.MustRaw(t, http.MethodPost, "", map[string]string{"Authorization": c.auth}, testkit.InitializeRPC(1))
			if r.Code != http.StatusUnauthorized {
				t.Errorf("Authorization %q: status %d, want 401", c.auth, r.Code)
			}
			// The body says what is wrong and what to send.
			if !strings.HasPrefix(r.Body, c.reason) && !strings.Contains(r.Body, c.reason) || !strings.Contains(r.Body, "JAIL_MCP_TOKEN or --token-file") {
				t.Errorf("Authorization %q: body %q does not say %q and what to send", c.auth, r.Body, c.reason)
			}
			if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("Authorization %q: WWW-Authenticate %q", c.auth, r.Header.Get("WWW-Authenticate"))
			}
			if r.Header.Get("Mcp-Session-Id") != "" {
				t.Errorf("Authorization %q: a session was minted", c.auth)
			}
			// Each refusal is logged once, with where it came from and why.
			var lines []string
			testkit.WaitFor(2*time.Second, func() bool {
				lines = testkit.Warnings(hs.Stderr.String(), "bearer token refused")[before:]
				return len(lines) > 0
			})
			if len(lines) != 1 || !strings.Contains(lines[0], " remote=127.0.0.1:") || !strings.Contains(lines[0], " "+testkit.LogAttr("reason", c.reason)) {
				t.Errorf("Authorization %q: logged %q, want one warning with the remote address and reason %q", c.auth, lines, c.reason)
			}
		}
		// No token, right or wrong, nor any piece of one, is ever logged.
		for _, secret := range []string{token, wrong} {
			for i := 0; i+8 <= len(secret); i++ {
				if piece := secret[i : i+8]; strings.Contains(hs.Stderr.String(), piece) {
					t.Fatalf("stderr holds %q of the token %q:\n%s", piece, secret, hs.Stderr)
				}
			}
		}
		if c, _, err := hs.Dial(t.Context(), "", ""); err == nil {
			c.Close()
			t.Error("the mcp-go client without the token got a session")
		} else if !errors.Is(err, transport.ErrAuthorizationRequired) {
			t.Errorf("without the token: %v, want authorization required", err)
		}
		if c, _, err := hs.Dial(t.Context(), "", "wrong-token-0123456789"); err == nil {
			c.Close()
			t.Error("the mcp-go client with a wrong token got a session")
		}

		s := hs.Connect(t, "")
		if res, raw := s.Exec(map[string]any{"command": "echo ok > $HOME/ok; echo $HOME"}); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != s.Jail() {
			t.Fatalf("with the token: %+v %s", res, testkit.ResultText(raw))
		}
		// A live session id is no substitute for the token.
		noAuth := map[string]string{"Authorization": ""}
		marker := fmt.Sprintf("ran-token-%d", os.Getpid())
		if r := hs.MustRaw(t, http.MethodPost, s.ID, noAuth, testkit.ToolsCallRPC(2, "touch $HOME/"+marker, nil)); r.Code != http.StatusUnauthorized {
			t.Errorf("tools/call with a live session, no token: %d", r.Code)
		}
		if httpFoundUnder(project, marker) {
			t.Error("tools/call without the token ran")
		}
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			if r := hs.MustRaw(t, method, s.ID, noAuth, ""); r.Code != http.StatusUnauthorized {
				t.Errorf("%s with a live session, no token: %d", method, r.Code)
			}
		}
		if res, raw := s.Exec(map[string]any{"command": "cat $HOME/ok"}); res.Stdout != "ok\n" {
			t.Errorf("session after unauthenticated DELETE: %+v %s", res, testkit.ResultText(raw))
		}
	})

	// From a file (through a symlink, as Kubernetes mounts a secret), and
	// out of every command's environment whatever --pass-env says: the
	// server takes its variable out of what it passes on.
	t.Run("token file and variable stay out of commands", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "real"), []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, "token")
		if err := os.Symlink("real", link); err != nil {
			t.Fatal(err)
		}
		fromFile := testkit.StartHTTP(t, testkit.NewProject(t), testkit.ServerEnv(), "--token-file", link)
		fromEnv := testkit.StartHTTP(t, testkit.NewProject(t), testkit.ServerEnv("JAIL_MCP_TOKEN="+token, "JAIL_MCP_MARK=passed"), "--pass-env", "JAIL_*")
		if !strings.Contains(fromFile.Stderr.String(), "token=true token_file="+link) {
			t.Errorf("starting line does not say the token came from %s: %s", link, fromFile.Stderr)
		}
		for _, hs := range []*testkit.HTTPServer{fromFile, fromEnv} {
			if r := hs.MustRaw(t, http.MethodPost, "", map[string]string{"Authorization": ""}, testkit.InitializeRPC(1)); r.Code != http.StatusUnauthorized {
				t.Errorf("initialize without the token: %d", r.Code)
			}
			s := hs.Connect(t, "")
			res, raw := s.Exec(map[string]any{"command": "env; cat /proc/self/environ"})
			if res.ExitCode != 0 || strings.Contains(res.Stdout, token) || strings.Contains(res.Stdout, "JAIL_MCP_TOKEN") {
				t.Errorf("the token in a command's environment: %+v %s", res, testkit.ResultText(raw))
			}
			if hs == fromEnv && !strings.Contains(res.Stdout, "JAIL_MCP_MARK=passed") {
				t.Errorf("--pass-env JAIL_* did not pass the rest: %s", res.Stdout)
			}
		}
	})

	t.Run("non-loopback without token", func(t *testing.T) {
		project := testkit.NewProject(t)
		// Hold the port on every interface: had the server tried to listen
		// before refusing, it would fail with "address already in use".
		held, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
		port := fmt.Sprint(held.Addr().(*net.TCPAddr).Port)
		for _, c := range []struct {
			name string
			args []string
			env  []string
			want []string
		}{
			{"0.0.0.0", []string{"--listen", "0.0.0.0:" + port}, nil, []string{"--listen", "JAIL_MCP_TOKEN or --token-file", "not a loopback"}},
			{"every interface", []string{"--listen", ":" + port}, nil, []string{"--listen", "JAIL_MCP_TOKEN or --token-file", "not a loopback"}},
			{"variable", nil, []string{"JAIL_MCP_LISTEN=0.0.0.0:" + port}, []string{"JAIL_MCP_LISTEN", "JAIL_MCP_TOKEN or --token-file"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"serve", "--project", project}, c.args...)...)
				cmd.Env = testkit.ServerEnv(c.env...)
				cmd.Dir = project
				var stdout, stderr testkit.SyncBuffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 2 {
					t.Errorf("exit: %v, want status 2", err)
				}
				cfgOneLine(t, stderr.String())
				for _, w := range c.want {
					if !strings.Contains(stderr.String(), w) {
						t.Errorf("stderr does not name %q: %s", w, stderr.String())
					}
				}
				if s := stderr.String(); strings.Contains(s, "in use") || strings.Contains(s, "starting") {
					t.Errorf("the server got as far as listening: %s", s)
				}
				if stdout.String() != "" {
					t.Errorf("stdout: %q", stdout.String())
				}
			})
		}
	})

	t.Run("non-loopback with token", func(t *testing.T) {
		project := testkit.NewProject(t)
		hs := testkit.StartHTTPOn(t, project, "0.0.0.0:0", testkit.ServerEnv("JAIL_MCP_TOKEN="+token))
		if !strings.Contains(hs.Stderr.String(), "token=true") {
			t.Errorf("starting line does not say a token is set: %s", hs.Stderr)
		}
		s := hs.Connect(t, "")
		if res, raw := s.Exec(map[string]any{"command": "echo $HOME"}); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != s.Jail() {
			t.Errorf("%+v %s", res, testkit.ResultText(raw))
		}
		if r := hs.MustRaw(t, http.MethodPost, s.ID, map[string]string{"Authorization": ""}, testkit.ToolsCallRPC(2, "true", nil)); r.Code != http.StatusUnauthorized {
			t.Errorf("no token: %d", r.Code)
		}
	})
}

// 4. A client's cancellation kills the command and everything it started.
func TestHTTPCancel(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		hs := testkit.StartHTTP(t, project, testkit.ServerEnv(b.Env...), b.Args...)
		s := hs.Connect(t, "")

		t.Run("context", func(t *testing.T) {
			// mcp-go over HTTP cancels by ending the request: the server
			// sees the request's context end.
			marker := testkit.Marker()
			ctx, cancel := context.WithCancel(t.Context())
			done := s.Background(ctx, testkit.TwoSleeps(marker))
			testkit.WaitTwoSleeps(t, marker)
			cancel()
			select {
			case r := <-done:
				if !errors.Is(r.Err, context.Canceled) {
					t.Errorf("cancelled call returned %v %v, want context.Canceled", r.Res, r.Err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("cancelled call did not return within 5 s")
			}
			testkit.WaitGone(t, marker, "cancel")
			if !testkit.WaitFor(5*time.Second, func() bool { return s.Status().Running == 0 }) {
				t.Error("jail_status still counts the cancelled command")
			}
		})

		t.Run("notifications/cancelled", func(t *testing.T) {
			marker := testkit.Marker()
			const id = 4242
			done := make(chan testkit.RawResponse, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
				defer cancel()
				r, err := hs.Raw(ctx, http.MethodPost, s.ID, nil, testkit.ToolsCallRPC(id, testkit.TwoSleeps(marker), nil))
				if err != nil {
					r.Body = err.Error()
				}
				done <- r
			}()
			testkit.WaitTwoSleeps(t, marker)
			cancelled := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"test"}}`, id)
			// Another session cancelling the same request id cancels
			// nothing of this one.
			other := hs.Connect(t, "")
			if r := hs.MustRaw(t, http.MethodPost, other.ID, nil, cancelled); r.Code != http.StatusAccepted {
				t.Errorf("cancel from another session: %d %s", r.Code, r.Body)
			}
			time.Sleep(300 * time.Millisecond)
			if testkit.Sleepers(marker) != 2 {
				t.Fatalf("another session's notifications/cancelled stopped this session's command")
			}
			if r := hs.MustRaw(t, http.MethodPost, s.ID, nil, cancelled); r.Code != http.StatusAccepted {
				t.Errorf("notifications/cancelled: %d %s", r.Code, r.Body)
			}
			var r testkit.RawResponse
			select {
			case r = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("cancelled call did not return within 5 s")
			}
			res, ok := testkit.RPCResult(r, id)
			if !ok {
				t.Fatalf("no result for the cancelled call: %d %s", r.Code, r.Body)
			}
			sc, _ := res["structuredContent"].(map[string]any)
			if res["isError"] != true || sc["cancelled"] != true || sc["session"] != s.Name() {
				t.Errorf("cancelled call's result: %v", res)
			}
			testkit.WaitGone(t, marker, "notifications/cancelled")
		})

		// The session keeps serving.
		if res, raw := s.Exec(map[string]any{"argv": []string{"true"}}); res.ExitCode != 0 || res.Backend != b.Name {
			t.Errorf("after cancel: %+v %s", res, testkit.ResultText(raw))
		}
	})
}

// 5. DELETE ends the session: its commands are killed, its files kept.
func TestHTTPDeleteKillsAndKeepsFiles(t *testing.T) {
	project := testkit.NewProject(t)
	hs := testkit.StartHTTP(t, project, testkit.ServerEnv())
	s := hs.Connect(t, "")
	other := hs.Connect(t, "")
	if res, raw := s.Exec(map[string]any{"command": "echo kept > $HOME/kept; mkdir -p $HOME/d && echo deep > $HOME/d/f"}); res.ExitCode != 0 {
		t.Fatalf("%+v %s", res, testkit.ResultText(raw))
	}
	marker, otherMarker := testkit.Marker(), testkit.Marker()
	done := s.Background(context.WithoutCancel(t.Context()), testkit.TwoSleeps(marker))
	otherDone := other.Background(t.Context(), testkit.TwoSleeps(otherMarker))
	testkit.WaitTwoSleeps(t, marker)
	testkit.WaitTwoSleeps(t, otherMarker)

	if r := hs.MustRaw(t, http.MethodDelete, s.ID, nil, ""); r.Code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", r.Code, r.Body)
	}
	testkit.WaitGone(t, marker, "DELETE")
	select {
	case r := <-done:
		// The connection is still up: the call answers that it was cancelled.
		if !httpIsCancelled(t, r) {
			t.Errorf("the call of the deleted session: %v %+v, want a cancelled result", r.Err, r.Res)
		}
	case <-time.After(5 * time.Second):
		t.Error("the call of the deleted session did not return within 5 s")
	}
	if got := testkit.MustRead(t, filepath.Join(s.Jail(), "kept")); got != "kept\n" {
		t.Errorf("kept = %q", got)
	}
	if got := testkit.MustRead(t, filepath.Join(s.Jail(), "d", "f")); got != "deep\n" {
		t.Errorf("d/f = %q", got)
	}
	if r := hs.MustRaw(t, http.MethodPost, s.ID, nil, testkit.ToolsCallRPC(1, "true", nil)); r.Code != http.StatusNotFound {
		t.Errorf("tools/call after DELETE: %d", r.Code)
	}
	// The other session's command was not touched.
	if testkit.Sleepers(otherMarker) != 2 {
		t.Errorf("DELETE of one session killed another's command")
	}
	select {
	case r := <-otherDone:
		t.Errorf("the other session's call returned: %+v %v", r.Res, r.Err)
	default:
	}
	if st := other.Status(); st.Running != 1 {
		t.Errorf("other session runs %d commands, want 1", st.Running)
	}
	if r := hs.MustRaw(t, http.MethodDelete, other.ID, nil, ""); r.Code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", r.Code, r.Body)
	}
	testkit.WaitGone(t, otherMarker, "DELETE")
	// A new session still works, in a new jail.
	n := hs.Connect(t, "")
	if res, raw := n.Exec(map[string]any{"command": "test ! -e $HOME/kept && echo $HOME"}); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != n.Jail() {
		t.Errorf("new session: %+v %s", res, testkit.ResultText(raw))
	}
}

// 5 and 6. Ending a session while one of its calls is being set up (the
// server counting a large jail's disk usage before it starts the command)
// still kills that command, and neither DELETE nor SIGTERM waits for it.
func TestHTTPEndWhileACallStarts(t *testing.T) {
	for _, how := range []string{"DELETE", "SIGTERM"} {
		t.Run(how, func(t *testing.T) {
			project := testkit.NewProject(t)
			hs := testkit.StartHTTP(t, project, testkit.ServerEnv())
			s := hs.Connect(t, "")
			// Before it starts a command the server walks the jail to count
			// its disk usage: enough entries (hard links, cheap to make)
			// make that last tens of milliseconds, a window to end the
			// session in.
			timeTrue := func() time.Duration {
				start := time.Now()
				if res, raw := s.Exec(map[string]any{"argv": []string{"true"}}); res.ExitCode != 0 {
					t.Fatalf("%+v %s", res, testkit.ResultText(raw))
				}
				return time.Since(start)
			}
			base := timeTrue()
			many := filepath.Join(s.Jail(), "many")
			if err := os.Mkdir(many, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(many, "0"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			links, walk := 0, time.Duration(0)
			for links < 40000 && walk < 100*time.Millisecond {
				for range 5000 {
					links++
					if err := os.Link(filepath.Join(many, "0"), filepath.Join(many, fmt.Sprint(links))); err != nil {
						t.Fatal(err)
					}
				}
				// The faster of two, as the load of the machine varies.
				walk = min(timeTrue(), timeTrue()) - base
			}
			t.Logf("a call takes %v to start, %v of it counting %d entries", (base + walk).Round(time.Millisecond), walk.Round(time.Millisecond), links)

			marker := testkit.Marker()
			done := make(chan testkit.RawResponse, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
				defer cancel()
				body := testkit.RPC(7, "tools/call", map[string]any{"name": "jailed_exec",
					"arguments": map[string]any{"command": "sleep " + marker, "timeout_ms": 10000}}, nil)
				r, _ := hs.Raw(ctx, http.MethodPost, s.ID, nil, body)
				done <- r
			}()
			time.Sleep(walk / 3)
			ended := time.Now()
			switch how {
			case "DELETE":
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				defer cancel()
				if r, err := hs.Raw(ctx, http.MethodDelete, s.ID, nil, ""); err != nil || r.Code != http.StatusOK {
					t.Errorf("DELETE while a call starts: %v %d, want 200 within 5 s", err, r.Code)
				}
			case "SIGTERM":
				hs.Cmd.Process.Signal(syscall.SIGTERM)
				if ok, err := hs.WaitExit(5 * time.Second); !ok || err != nil {
					t.Errorf("SIGTERM while a call starts: exited %t (%v), want status 0 within 5 s", ok, err)
				}
			}
			t.Logf("%s returned after %v", how, time.Since(ended).Round(time.Millisecond))
			if !testkit.WaitFor(3*time.Second, func() bool { return len(testkit.ProcessesWith(marker)) == 0 }) {
				t.Errorf("the call being started when the session ended is still running %v after %s", time.Since(ended).Round(time.Millisecond), how)
			}
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Errorf("the call did not return")
			}
			if !testkit.FileExists(filepath.Join(many, fmt.Sprint(links))) {
				t.Errorf("the jail's files are gone")
			}
		})
	}
}

// 5. An idle session ends well after the longest call could.
func TestHTTPIdleTimeout(t *testing.T) {
	for _, c := range []struct{ max, want time.Duration }{
		{time.Second, 30 * time.Minute},
		{time.Minute, 30 * time.Minute},
		{10 * time.Minute, 30 * time.Minute},
		{11 * time.Minute, 33 * time.Minute},
		{20 * time.Minute, time.Hour},
		{2 * time.Hour, 6 * time.Hour},
	} {
		if got := cli.IdleTimeout(c.max); got != c.want {
			t.Errorf("idleTimeout(%v) = %v, want %v", c.max, got, c.want)
		}
		if got := cli.IdleTimeout(c.max); got < 3*c.max || got < 30*time.Minute {
			t.Errorf("idleTimeout(%v) = %v: shorter than 3x the max timeout or 30 min", c.max, got)
		}
	}
	// The server runs with it and says so.
	hs := testkit.StartHTTP(t, testkit.NewProject(t), testkit.ServerEnv(), "--max-timeout", "20m")
	if !strings.Contains(hs.Stderr.String(), "idle_timeout=1h0m0s") {
		t.Errorf("starting line does not give the idle timeout of 3x 20m: %s", hs.Stderr)
	}
}

// 6. SIGTERM stops the server at once, with calls in flight in two
// sessions: nothing they started survives, their files stay.
func TestHTTPSIGTERM(t *testing.T) {
	testkit.ForEachBackend(t, func(t *testing.T, b testkit.Backend) {
		project := testkit.NewProject(t)
		hs := testkit.StartHTTP(t, project, testkit.ServerEnv(b.Env...), b.Args...)
		var markers []string
		var calls []<-chan testkit.CallResult
		var sessions []*testkit.HTTPSession
		for i := range 2 {
			s := hs.Connect(t, "")
			if res, raw := s.Exec(map[string]any{"command": fmt.Sprintf("echo %d > $HOME/kept", i)}); res.ExitCode != 0 {
				t.Fatalf("%+v %s", res, testkit.ResultText(raw))
			}
			m := testkit.Marker()
			calls = append(calls, s.Background(context.WithoutCancel(t.Context()), testkit.TwoSleeps(m)))
			markers = append(markers, m)
			sessions = append(sessions, s)
		}
		for _, m := range markers {
			testkit.WaitTwoSleeps(t, m)
		}
		start := time.Now()
		hs.Cmd.Process.Signal(syscall.SIGTERM)
		ok, err := hs.WaitExit(5 * time.Second)
		if !ok {
			t.Fatalf("server still running 5 s after SIGTERM; stderr:\n%s", hs.Stderr)
		}
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want status 0; stderr:\n%s", err, hs.Stderr)
		}
		t.Logf("exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
		for _, m := range markers {
			testkit.WaitGone(t, m, "SIGTERM")
		}
		for i, c := range calls {
			select {
			case r := <-c:
				// Ending the sessions first lets the calls answer before
				// the connections close.
				if !httpIsCancelled(t, r) {
					t.Errorf("call %d in flight: %v %+v, want a cancelled result", i, r.Err, r.Res)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("call %d in flight did not return", i)
			}
		}
		for i, s := range sessions {
			if got := testkit.MustRead(t, filepath.Join(s.Jail(), "kept")); got != fmt.Sprintf("%d\n", i) {
				t.Errorf("session %d's file: %q", i, got)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if _, err := hs.Raw(ctx, http.MethodPost, "", nil, "{}"); err == nil {
			t.Error("still answering HTTP after exit")
		}
	})
}

// 6. For stdio: the end of standard input with a call in flight is a clean
// stop too (SIGTERM is TestServerDeathKillsCommands's; EOF's exit status
// with nothing running is TestStdoutIsOnlyJSONRPC's).
func TestStdioEOFWithCallInFlight(t *testing.T) {
	project := testkit.NewProject(t)
	cmd := exec.Command(os.Args[0], "serve", "--project", project, "--session", "eof")
	cmd.Env = testkit.ServerEnv()
	cmd.Dir = project
	var stderr testkit.SyncBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() {
		io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
	})
	marker := testkit.Marker()
	for _, l := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		testkit.ToolsCallRPC(2, "echo kept > $HOME/kept; "+testkit.TwoSleeps(marker), nil),
	} {
		io.WriteString(stdin, l+"\n")
	}
	testkit.WaitTwoSleeps(t, marker)
	stdin.Close()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit on EOF with a call in flight: %v, want status 0; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("server still running 5 s after EOF; stderr:\n%s", stderr.String())
	}
	testkit.WaitGone(t, marker, "EOF")
	if got := testkit.MustRead(t, filepath.Join(project, ".agent-home", "eof", "kept")); got != "kept\n" {
		t.Errorf("kept = %q", got)
	}
}

// 7. Many sessions with concurrent calls each see their own jail.
func TestHTTPManySessions(t *testing.T) {
	const sessions, calls = 32, 2
	project := testkit.NewProject(t)
	hs := testkit.StartHTTP(t, project, testkit.ServerEnv())
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		ids   []string
		names []string // of their jails
		errs  []string
	)
	fail := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, fmt.Sprintf(format, a...))
	}
	start := time.Now()
	for i := range sessions {
		wg.Go(func() {
			c, _, err := hs.Dial(t.Context(), "", "")
			if err != nil {
				fail("session %d: initialize: %v", i, err)
				return
			}
			defer c.Close()
			id := c.GetSessionId()
			st, err := testkit.CallTool(t.Context(), c, "jail_status", nil)
			var status tools.StatusResult
			if err != nil || st.StructuredContent == nil {
				fail("session %d: jail_status: %v", i, err)
				return
			}
			b, _ := json.Marshal(st.StructuredContent)
			json.Unmarshal(b, &status)
			jail, name := status.Jail, status.Session
			mu.Lock()
			ids = append(ids, id)
			names = append(names, name)
			mu.Unlock()
			var cwg sync.WaitGroup
			for j := range calls {
				cwg.Go(func() {
					ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
					defer cancel()
					req := mcp.CallToolRequest{}
					req.Params.Name = "jailed_exec"
					req.Params.Arguments = map[string]any{"command": fmt.Sprintf("echo $HOME; echo %d > $HOME/call-%d; sleep 0.2", j, j)}
					res, err := c.CallTool(ctx, req)
					if err != nil {
						fail("session %d call %d: %v", i, j, err)
						return
					}
					var out tools.ExecResult
					b, _ := json.Marshal(res.StructuredContent)
					json.Unmarshal(b, &out)
					if res.IsError || out.ExitCode != 0 || strings.TrimSpace(out.Stdout) != jail || out.Session != name || name == id || out.Jail != jail {
						fail("session %d call %d: %+v %s", i, j, out, testkit.ResultText(res))
					}
				})
			}
			cwg.Wait()
			for j := range calls {
				if got, err := os.ReadFile(filepath.Join(jail, fmt.Sprintf("call-%d", j))); err != nil || string(got) != fmt.Sprintf("%d\n", j) {
					fail("session %d: call-%d = %q %v", i, j, got, err)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d sessions x %d calls in %v", sessions, calls, time.Since(start).Round(time.Millisecond))
	for _, e := range errs {
		t.Error(e)
	}
	slices.Sort(ids)
	if len(slices.Compact(slices.Clone(ids))) != sessions {
		t.Errorf("%d distinct session ids, want %d: %v", len(slices.Compact(slices.Clone(ids))), sessions, ids)
	}
	slices.Sort(names)
	if got := testkit.JailNames(t, project); !slices.Equal(got, names) {
		t.Errorf("%d jails %v, want the %d sessions' %v", len(got), got, len(names), names)
	}
	// A server that serves many calls must not keep one dead process
	// per call.
	if z := testkit.Zombies(hs.Cmd.Process.Pid); len(z) > 0 {
		t.Errorf("after %d calls the server has %d unreaped children, e.g. %v", sessions*calls, len(z), z[:min(len(z), 3)])
	}
}

// The ids of ended sessions are remembered within bounds of count and
// age, however many sessions come and go; an id forgotten is refused
// exactly as one never minted.
func TestHTTPForgetsEndedSessions(t *testing.T) {
	const maxEnded, sessions = 3, 100
	var clock atomic.Int64
	clock.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	hs, table := startHTTPInProcess(t, func(h *httpSessions) {
		h.maxEnded, h.endedTTL = maxEnded, time.Hour
		h.now = func() time.Time { return time.Unix(0, clock.Load()) }
	})
	// refusal is how each kind of request naming id is refused.
	refusal := func(id string) []string {
		t.Helper()
		var out []string
		for _, method := range []string{http.MethodGet, http.MethodDelete, http.MethodPost} {
			body := ""
			if method == http.MethodPost {
				body = testkit.RPC(2, "tools/list", nil, nil)
			}
			r := hs.MustRaw(t, method, id, nil, body)
			if r.Code != http.StatusNotFound {
				t.Errorf("%s of %s: status %d, want 404: %s", method, id, r.Code, r.Body)
			}
			out = append(out, fmt.Sprintf("%s %d %s", method, r.Code, strings.TrimSpace(r.Body)))
		}
		return out
	}
	remembered := func() (n, order, capacity int) {
		table.mu.Lock()
		defer table.mu.Unlock()
		return len(table.ended), len(table.endedOrder), cap(table.endedOrder)
	}
	unknown := refusal(uuid.NewString())

	var ids []string
	for range sessions {
		id := hs.Initialize(t)
		if r := hs.MustRaw(t, http.MethodDelete, id, nil, ""); r.Code != http.StatusOK {
			t.Fatalf("DELETE: %d %s", r.Code, r.Body)
		}
		ids = append(ids, id)
		if n, order, capacity := remembered(); n > maxEnded || order != n || capacity > 4*maxEnded {
			t.Fatalf("after %d sessions ended: %d ids remembered (%d in order, room for %d), want at most %d",
				len(ids), n, order, capacity, maxEnded)
		}
		clock.Add(int64(time.Second))
	}
	for i, id := range ids {
		got := refusal(id)
		switch forgotten := i < len(ids)-maxEnded; {
		case forgotten && !slices.Equal(got, unknown):
			t.Errorf("forgotten id %d: %q, want as unknown: %q", i, got, unknown)
		case !forgotten && slices.Equal(got, unknown):
			t.Errorf("recently ended id %d is refused as unknown: %q", i, got)
		}
	}
	// An hour after they ended, none is remembered.
	clock.Add(int64(time.Hour))
	for _, id := range ids[len(ids)-maxEnded:] {
		if got := refusal(id); !slices.Equal(got, unknown) {
			t.Errorf("id ended over an hour ago: %q, want as unknown: %q", got, unknown)
		}
	}
	if n, _, _ := remembered(); n != 0 {
		t.Errorf("%d ids remembered an hour after they ended", n)
	}
	// The server still serves.
	if id := hs.Initialize(t); hs.MustRaw(t, http.MethodDelete, id, nil, "").Code != http.StatusOK {
		t.Error("DELETE of a new session failed")
	}
}

// A flood of requests naming sessions that do not exist is refused and
// logged request by request, and leaves nothing behind: no entry in the
// session table, and log lines of bounded length however long the ids.
func TestHTTPRefusalFloodKeepsNothing(t *testing.T) {
	const requests = 300
	hs, table := startHTTPInProcess(t, nil)
	live := hs.Initialize(t)
	long := strings.Repeat("x", 32<<10)
	for i := range requests {
		id := fmt.Sprintf("%s-%d", uuid.NewString(), i)
		if i%2 == 1 {
			id += long
		}
		method := []string{http.MethodPost, http.MethodGet, http.MethodDelete}[i%3]
		body := ""
		if method == http.MethodPost {
			body = testkit.ToolsCallRPC(i, "true", nil)
		}
		if r := hs.MustRaw(t, method, id, nil, body); r.Code != http.StatusNotFound {
			t.Fatalf("%s of an unknown id: status %d, want 404: %s", method, r.Code, r.Body)
		}
	}
	warnings := testkit.Warnings(hs.Stderr.String(), "MCP session id refused")
	if len(warnings) != requests {
		t.Errorf("%d warnings of refused ids, want %d", len(warnings), requests)
	}
	for _, l := range warnings {
		if len(l) > 300 {
			t.Fatalf("a warning of %d bytes: %.300s...", len(l), l)
		}
	}
	table.mu.Lock()
	nLive, nEnded := len(table.live), len(table.ended)
	table.mu.Unlock()
	if nLive != 1 || nEnded != 0 {
		t.Errorf("after the flood the table holds %d live and %d ended ids, want 1 and 0", nLive, nEnded)
	}
	if r := hs.MustRaw(t, http.MethodDelete, live, nil, ""); r.Code != http.StatusOK {
		t.Errorf("DELETE of the live session after the flood: %d %s", r.Code, r.Body)
	}
}

// --max-sessions bounds the live sessions: an initialize beyond them is
// refused with a JSON-RPC error saying what to do, and ending a session
// makes room at once.
func TestHTTPMaxSessions(t *testing.T) {
	project := testkit.NewProject(t)
	hs := testkit.StartHTTP(t, project, testkit.ServerEnv(), "--max-sessions", "3")
	if !strings.Contains(hs.Stderr.String(), "max_sessions=3") {
		t.Errorf("starting line does not give the bound: %s", hs.Stderr)
	}
	var sessions []*testkit.HTTPSession
	for i := range 3 {
		s := hs.Connect(t, "")
		if res, raw := s.Exec(map[string]any{"command": fmt.Sprintf("echo %d > $HOME/n; echo $HOME", i)}); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != s.Jail() {
			t.Fatalf("session %d: %+v %s", i, res, testkit.ResultText(raw))
		}
		sessions = append(sessions, s)
	}

	r := hs.MustRaw(t, http.MethodPost, "", nil, testkit.InitializeRPC(7))
	if r.Code != http.StatusServiceUnavailable || r.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("4th initialize: status %d, session %q, want 503 and none: %s", r.Code, r.Header.Get("Mcp-Session-Id"), r.Body)
	}
	var msg struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int    `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.Body), &msg); err != nil || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("4th initialize: not a JSON-RPC answer (%v, %s): %s", err, r.Header.Get("Content-Type"), r.Body)
	}
	if msg.JSONRPC != "2.0" || msg.ID != 7 || msg.Error.Code != codeTooManySessions {
		t.Errorf("4th initialize: %+v, want the error %d for id 7", msg, codeTooManySessions)
	}
	if m := msg.Error.Message; strings.Contains(m, "\n") || !strings.Contains(m, "3 live MCP sessions") || !strings.Contains(m, "DELETE") || !strings.Contains(m, "raise --max-sessions") {
		t.Errorf("4th initialize: message %q, want one line saying 3 sessions are live, to end one or to raise --max-sessions", m)
	}
	if !testkit.Warned(hs, "MCP session refused: too many", "remote=127.0.0.1:", "max_sessions=3") {
		t.Errorf("the refusal is not logged: %s", hs.Stderr)
	}
	// mcp-go's client reports the server's reason.
	if c, _, err := hs.Dial(t.Context(), "", ""); err == nil {
		c.Close()
		t.Error("the mcp-go client got a 4th session")
	} else if !strings.Contains(err.Error(), "raise --max-sessions") {
		t.Errorf("the mcp-go client's error: %v, want the server's message", err)
	}

	// Ending a session makes room at once; the others keep serving.
	if r := hs.MustRaw(t, http.MethodDelete, sessions[0].ID, nil, ""); r.Code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", r.Code, r.Body)
	}
	s := hs.Connect(t, "")
	if res, raw := s.Exec(map[string]any{"command": "echo $HOME"}); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != s.Jail() {
		t.Errorf("session after a DELETE: %+v %s", res, testkit.ResultText(raw))
	}
	for i, s := range sessions[1:] {
		if res, raw := s.Exec(map[string]any{"command": "cat $HOME/n"}); res.ExitCode != 0 || res.Stdout != fmt.Sprintf("%d\n", i+1) {
			t.Errorf("session %d: %+v %s", i+1, res, testkit.ResultText(raw))
		}
	}
	if r := hs.MustRaw(t, http.MethodPost, "", nil, testkit.InitializeRPC(8)); r.Code != http.StatusServiceUnavailable {
		t.Errorf("initialize with 3 sessions live again: status %d, want 503", r.Code)
	}

	// The variable sets the bound as well.
	hs = testkit.StartHTTP(t, testkit.NewProject(t), testkit.ServerEnv("JAIL_MCP_MAX_SESSIONS=1"))
	hs.Initialize(t)
	if r := hs.MustRaw(t, http.MethodPost, "", nil, testkit.InitializeRPC(9)); r.Code != http.StatusServiceUnavailable || !strings.Contains(r.Body, "maximum of 1 live") {
		t.Errorf("JAIL_MCP_MAX_SESSIONS=1: 2nd initialize: status %d, want 503: %s", r.Code, r.Body)
	}
}

// However many initializes arrive at once, no more sessions than
// --max-sessions are minted, and refused ones leave no room taken.
func TestHTTPMaxSessionsConcurrent(t *testing.T) {
	const maxSessions, initializes, rounds = 4, 10, 3
	hs := testkit.StartHTTP(t, testkit.NewProject(t), testkit.ServerEnv(), "--max-sessions", fmt.Sprint(maxSessions))
	for round := range rounds {
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			ids     []string
			refused int
		)
		start := make(chan struct{})
		for i := range initializes {
			wg.Go(func() {
				<-start
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				defer cancel()
				r, err := hs.Raw(ctx, http.MethodPost, "", nil, testkit.InitializeRPC(i))
				mu.Lock()
				defer mu.Unlock()
				switch id := r.Header.Get("Mcp-Session-Id"); {
				case err != nil:
					t.Errorf("round %d initialize %d: %v", round, i, err)
				case r.Code == http.StatusOK && id != "":
					ids = append(ids, id)
				case r.Code == http.StatusServiceUnavailable && id == "":
					refused++
				default:
					t.Errorf("round %d initialize %d: status %d, session %q: %s", round, i, r.Code, id, r.Body)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(ids) != maxSessions || refused != initializes-maxSessions {
			t.Fatalf("round %d: %d of %d concurrent initializes got a session and %d were refused, want %d and %d",
				round, len(ids), initializes, refused, maxSessions, initializes-maxSessions)
		}
		// The sessions minted work; ending them all makes room for the
		// next round.
		for _, id := range ids {
			if r := hs.MustRaw(t, http.MethodPost, id, nil, testkit.RPC(2, "tools/list", nil, nil)); r.Code != http.StatusOK {
				t.Errorf("round %d: tools/list in session %s: %d %s", round, id, r.Code, r.Body)
			}
			if r := hs.MustRaw(t, http.MethodDelete, id, nil, ""); r.Code != http.StatusOK {
				t.Errorf("round %d: DELETE of session %s: %d %s", round, id, r.Code, r.Body)
			}
		}
	}
	s := hs.Connect(t, "")
	if res, raw := s.Exec(map[string]any{"command": "echo $HOME"}); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != s.Jail() {
		t.Errorf("after the rounds: %+v %s", res, testkit.ResultText(raw))
	}
}

// The slots bound the live sessions exactly in any interleaving of
// initialize requests: each takes a slot, mcp-go reads it a while, then
// mints its session or refuses it, and the slot is given back.
func TestHTTPSessionSlots(t *testing.T) {
	const maxSessions, requests = 5, 40
	h := newHTTPSessions(nil, slog.New(slog.DiscardHandler), maxSessions)
	var (
		wg              sync.WaitGroup
		minted, refused atomic.Int64
		mostLive        atomic.Int64
		start           = make(chan struct{})
	)
	for i := range requests {
		wg.Go(func() {
			<-start
			s := h.take()
			if s == nil {
				refused.Add(1)
				return
			}
			defer h.giveBack(s)
			time.Sleep(time.Millisecond)
			if i%4 == 0 {
				return // refused by mcp-go before it mints
			}
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r = r.WithContext(context.WithValue(r.Context(), slotKey{}, s))
			id := h.ResolveSessionIdManager(r).Generate()
			if ended, err := h.Validate(id); err != nil || ended {
				t.Errorf("minted id %s: ended %t, %v", id, ended, err)
			}
			minted.Add(1)
			h.mu.Lock()
			n := int64(len(h.live))
			h.mu.Unlock()
			for m := mostLive.Load(); n > m && !mostLive.CompareAndSwap(m, n); m = mostLive.Load() {
			}
		})
	}
	close(start)
	wg.Wait()
	h.mu.Lock()
	live, starting := len(h.live), h.starting
	h.mu.Unlock()
	if mostLive.Load() > maxSessions || live > maxSessions || int64(live) != minted.Load() || starting != 0 {
		t.Errorf("%d live (at most %d at once), %d minted, %d slots held, want at most %d live and no slot held",
			live, mostLive.Load(), minted.Load(), starting, maxSessions)
	}
	if refused.Load() == 0 {
		t.Errorf("none of %d requests at once was refused", requests)
	}

	// An id minted without a slot, or with a slot used already, is never
	// live: refused on first use rather than over the bound. (When the
	// requests above filled every slot, one session ends first.)
	if live == maxSessions {
		h.mu.Lock()
		var id string
		for id = range h.live {
			break
		}
		h.mu.Unlock()
		if _, err := h.Terminate(id); err != nil {
			t.Fatalf("end session %s: %v", id, err)
		}
		live--
	}
	s := h.take()
	if s == nil {
		t.Fatalf("no slot with %d of %d sessions live", live, maxSessions)
	}
	first := s.Generate()
	for _, id := range []string{s.Generate(), h.Generate(), h.ResolveSessionIdManager(nil).Generate()} {
		if _, err := h.Validate(id); err == nil {
			t.Errorf("id %s minted without a slot is live", id)
		}
	}
	h.giveBack(s)
	if _, err := h.Validate(first); err != nil {
		t.Errorf("the slot's session is not live: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.live) != live+1 || h.starting != 0 {
		t.Errorf("%d live and %d slots held, want %d and none", len(h.live), h.starting, live+1)
	}
}
