package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/cli"
	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/metrics"
	"github.com/jail-mcp/jail-mcp/session"
)

// httpSessions maps MCP session ids to jails, one jail per MCP session,
// and gives mcp-go its SessionIdManager: ids are minted here (random UUIDs,
// 122 bits from crypto/rand), and an id this server did not mint, or whose
// session ended, is refused on every request. (mcp-go's default manager
// accepts any well-formed id, even a terminated one.) At most maxLive
// (--max-sessions) sessions are live at once: an initialize beyond them is
// refused, exactly, however many arrive together (see slot).
//
// An MCP session id is, with the token, the key to its session: whoever
// sends it runs commands in that session's jail. So it is kept in this
// table only, never shown to a command: each session's jail has a name of
// its own, another random UUID unrelated to the id (a command lists
// .agent-home and sees every jail's name), and the log names the jail,
// never the id (a command can read a log file of its user). The result of
// a tool call gives the jail's name as its session, which is what the
// client sees and the operator finds in the log and under .agent-home.
type httpSessions struct {
	m       *session.Manager
	log     *slog.Logger
	maxLive int

	// maxEnded and endedTTL bound what is remembered of ended sessions
	// (endedMax and endedTTL unless a test lowers them); now is the clock
	// they are measured by.
	maxEnded int
	endedTTL time.Duration
	now      func() time.Time

	mu         sync.Mutex
	live       map[string]*liveSession // by MCP session id
	starting   int                     // slots taken and not yet minted or given back
	ended      map[string]string       // MCP session id -> its jail's name
	endedOrder []endedID               // the ids of ended, oldest first
}

// liveSession is a live MCP session: the name of its jail, chosen when its
// id was minted, and the jail, opened on its first use (nil until then).
type liveSession struct {
	name string
	s    *session.Session
}

// An ended session's id is remembered only so that its client is told the
// session ended rather than that the id is unknown: both are refused alike,
// and ask for the same remedy. So the memory is bounded, in count and in
// age, for a server that runs for weeks or a client that opens and ends
// sessions in a loop: 4096 ids (well under a megabyte) is 16 times the
// default bound on live sessions, and a client coming back after an hour
// is as well served by "unknown: initialize a new session".
const (
	endedMax = 4096
	endedTTL = time.Hour
)

// endedID is an ended session's id and when it ended.
type endedID struct {
	id string
	at time.Time
}

var (
	errUnknownSession = errors.New("unknown MCP session id: initialize a new session")
	errEndedSession   = errors.New("this MCP session has ended: initialize a new one")
)

func newHTTPSessions(m *session.Manager, log *slog.Logger, maxSessions int) *httpSessions {
	return &httpSessions{
		m: m, log: log, maxLive: maxSessions,
		// At least maxLive, so that the sessions ended together at shutdown
		// are all still known when mcp-go ends them once more.
		maxEnded: max(endedMax, maxSessions), endedTTL: endedTTL, now: time.Now,
		live: map[string]*liveSession{}, ended: map[string]string{},
	}
}

// forget drops the ended ids beyond maxEnded or older than endedTTL, which
// are then simply unknown. h.mu is held. The ids end in time order, so
// they leave from the front; the slice's array is reallocated by append
// once its front is used up, so it holds about twice maxEnded at most.
func (h *httpSessions) forget() {
	cutoff := h.now().Add(-h.endedTTL)
	for len(h.endedOrder) > 0 && (len(h.endedOrder) > h.maxEnded || !h.endedOrder[0].at.After(cutoff)) {
		delete(h.ended, h.endedOrder[0].id)
		h.endedOrder[0] = endedID{}
		h.endedOrder = h.endedOrder[1:]
	}
}

// slot is an initialize request's room for one more live session, taken
// by pinSessions before mcp-go sees the request and given back after. For
// that request mcp-go's resolver answers with the slot, whose Generate
// turns it into the live session in one step: a session is never counted
// twice, nor missed, however many initializes run at once. A session
// minted by an initialize that then failed counts like any other until
// DELETE or the idle timeout, as mcp-go keeps its state for it until then.
type slot struct {
	h    *httpSessions
	used bool // minted or given back; guarded by h.mu
}

// slotKey is the request context's key of an initialize request's slot.
type slotKey struct{}

// take takes a slot, or returns nil when live sessions and slots taken
// already number maxLive.
func (h *httpSessions) take() *slot {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.live)+h.starting >= h.maxLive {
		return nil
	}
	h.starting++
	return &slot{h: h}
}

// giveBack frees the slot of a request that minted no session (mcp-go
// refused it first); a slot that minted one is the live session now.
func (h *httpSessions) giveBack(s *slot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !s.used {
		s.used = true
		h.starting--
	}
}

func (s *slot) Generate() string                  { return s.h.mint(s) }
func (s *slot) Validate(id string) (bool, error)  { return s.h.Validate(id) }
func (s *slot) Terminate(id string) (bool, error) { return s.h.Terminate(id) }

// ResolveSessionIdManager is mcp-go's SessionIdManagerResolver: an
// initialize request's slot, the table itself otherwise (and for mcp-go's
// idle sweeper and shutdown, which pass no request).
func (h *httpSessions) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	if r != nil {
		if s, ok := r.Context().Value(slotKey{}).(*slot); ok {
			return s
		}
	}
	return h
}

// Generate is mcp-go's call to mint an id without a slot: for a GET
// without a session id, which pinSessions refuses, or an initialize that
// did not pass pinSessions. Neither happens; should one, the id it gets is
// never live, so it is refused on first use rather than over the bound.
func (h *httpSessions) Generate() string { return h.mint(nil) }

// mint mints the id of a new session in slot s, and names its jail.
func (h *httpSessions) mint(s *slot) string {
	id, name := uuid.NewString(), uuid.NewString()
	h.mu.Lock()
	ok := s != nil && !s.used
	if ok {
		s.used = true
		h.starting--
		h.live[id] = &liveSession{name: name}
	}
	h.mu.Unlock()
	if !ok {
		h.log.Error("MCP session id minted without a slot: it will be refused")
		return id
	}
	h.log.Info("MCP session started", "jail", name)
	// At initialize: the session's jail and its session agent start in
	// the background, so that the first call finds them warm. (A table
	// without a manager, in the tests of the HTTP layer alone, opens no
	// jails.)
	if h.m != nil {
		go func() {
			if s, err := h.sessionByID(id); err == nil {
				s.Warm()
			}
		}()
	}
	return id
}

func (h *httpSessions) Validate(id string) (isTerminated bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forget()
	if _, ok := h.live[id]; ok {
		return false, nil
	}
	if _, ok := h.ended[id]; ok {
		return true, nil
	}
	return false, errUnknownSession
}

// Terminate ends a session (DELETE, idle timeout, shutdown): its running
// commands are killed; its jail and the files in it stay.
func (h *httpSessions) Terminate(id string) (isNotAllowed bool, err error) {
	h.mu.Lock()
	h.forget()
	ls, ok := h.live[id]
	if !ok {
		_, ended := h.ended[id]
		h.mu.Unlock()
		if ended {
			return false, nil
		}
		return false, errUnknownSession
	}
	delete(h.live, id)
	h.ended[id] = ls.name
	h.endedOrder = append(h.endedOrder, endedID{id, h.now()})
	h.forget()
	h.mu.Unlock()
	killed := 0
	if ls.s != nil {
		killed = ls.s.Running()
		ls.s.Close()
	}
	h.log.Info("MCP session ended", "jail", ls.name, "killed", killed)
	return false, nil
}

// count is how many sessions are live.
func (h *httpSessions) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.live)
}

// endAll ends every live session.
func (h *httpSessions) endAll() {
	h.mu.Lock()
	ids := make([]string, 0, len(h.live))
	for id := range h.live {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	for _, id := range ids {
		h.Terminate(id)
	}
}

// session is the tools' resolver: the jail of the request's MCP session,
// opened on its first use.
func (h *httpSessions) session(ctx context.Context) (*session.Session, error) {
	cs := server.ClientSessionFromContext(ctx)
	if cs == nil || cs.SessionID() == "" {
		return nil, errors.New("no MCP session: this server gives each MCP session its own jail; use a protocol version with sessions (2025-11-25 or earlier)")
	}
	return h.sessionByID(cs.SessionID())
}

// sessionByID is the jail session of the live MCP session id, opened on
// first use.
func (h *httpSessions) sessionByID(id string) (*session.Session, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forget()
	ls, ok := h.live[id]
	if !ok {
		if _, ended := h.ended[id]; ended {
			return nil, errEndedSession
		}
		return nil, errUnknownSession
	}
	if ls.s != nil {
		return ls.s, nil
	}
	s, err := h.m.Open(ls.name)
	if err != nil {
		return nil, err
	}
	ls.s = s
	return s, nil
}

// httpHandler serves /mcp: the bearer token first, then the protocol
// versions with sessions, then mcp-go's streamable HTTP transport (which
// keeps its DNS-rebinding protection for loopback connections); the
// metrics at /metrics, behind the token too; and /healthz, to anyone: a
// load balancer's or an orchestrator's probe, which learns that the
// server serves and nothing else.
func httpHandler(mcpHTTP http.Handler, sessions *httpSessions, met *metrics.Metrics, token string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", requireToken(token, sessions.log, pinSessions(sessions, mcpHTTP)))
	mux.Handle("GET /metrics", requireToken(token, sessions.log, met.Handler()))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		io.WriteString(w, "ok\n")
	})
	return mux
}

// requireToken refuses requests without "Authorization: Bearer <token>",
// comparing in constant time; with no token configured it passes all.
// Each refusal is logged with where it came from and why, never with what
// was sent: a wrong token may be a right one of another server.
//
// A request that passes marks its connection as authenticated (trustConn):
// the connection bounds shed it last. Without a token, every request
// passes, so every connection that carried one to /mcp or /metrics is.
func requireToken(token string, log *slog.Logger, next http.Handler) http.Handler {
	if token == "" {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			trustConn(r)
			next.ServeHTTP(w, r)
		})
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header := r.Header.Get("Authorization")
		got, ok := strings.CutPrefix(header, "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			reason, body := "wrong", "wrong bearer token: it is not this server's token (JAIL_MCP_TOKEN or --token-file)"
			switch {
			case header == "" || header == "Bearer":
				// (A header's trailing blanks are trimmed: "Bearer " is "Bearer".)
				reason, body = "missing", "missing bearer token: send Authorization: Bearer <the server's token (JAIL_MCP_TOKEN or --token-file)>"
			case !ok:
				reason, body = "not a bearer token", "the Authorization header is not a bearer token: send Authorization: Bearer <the server's token (JAIL_MCP_TOKEN or --token-file)>"
			}
			log.Warn("bearer token refused", "remote", r.RemoteAddr, "method", r.Method, "reason", reason)
			w.Header().Set("WWW-Authenticate", `Bearer realm="jail-mcp"`)
			http.Error(w, body, http.StatusUnauthorized)
			return
		}
		trustConn(r)
		next.ServeHTTP(w, r)
	})
}

// pinSessions keeps every request on a protocol version with sessions,
// so that no tool call runs outside a session's jail: a request of the
// sessionless 2026-07-28 revision is refused, and every request but
// initialize must name a session this server minted and has not ended.
// mcp-go checks the session of a POST too, through Validate, but without
// the request, so without saying where a refused one came from.
func pinSessions(sessions *httpSessions, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
			refuseSessionless(w, nil)
			return
		}
		switch r.Method {
		case http.MethodPost:
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 16<<20))
			if err != nil {
				http.Error(w, "request body too large or unreadable", http.StatusRequestEntityTooLarge)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Meta map[string]any `json:"_meta"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil && modernMeta(msg.Params.Meta) {
				refuseSessionless(w, msg.ID)
				return
			}
			if msg.Method == string(mcp.MethodInitialize) {
				s := sessions.take()
				if s == nil {
					sessions.log.Warn("MCP session refused: too many", "remote", r.RemoteAddr, "max_sessions", sessions.maxLive)
					writeRPCError(w, http.StatusServiceUnavailable, msg.ID, codeTooManySessions, fmt.Sprintf(
						"jail-mcp already serves its maximum of %d live MCP sessions: end one (DELETE) or raise --max-sessions", sessions.maxLive))
					return
				}
				defer sessions.giveBack(s)
				r = r.WithContext(context.WithValue(r.Context(), slotKey{}, s))
			} else if sessions.refuseID(w, r, "Mcp-Session-Id header required: initialize a session first") {
				return
			}
		case http.MethodGet, http.MethodDelete:
			if sessions.refuseID(w, r, "Mcp-Session-Id header required") {
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// refuseID answers a request that names no session (missing: what it
// says then) or one refuse refuses; it reports whether it did.
func (h *httpSessions) refuseID(w http.ResponseWriter, r *http.Request, missing string) bool {
	id := r.Header.Get(server.HeaderKeySessionID)
	if id == "" {
		http.Error(w, missing, http.StatusBadRequest)
		return true
	}
	return h.refuse(w, r, id)
}

// refuse answers 404 when id is not a live session, and logs it; it
// reports whether it did. The log names an ended session's jail, and
// nothing of an unknown id: no id is ever logged (see httpSessions), and
// one this server does not know may be live on another behind the same
// balancer.
func (h *httpSessions) refuse(w http.ResponseWriter, r *http.Request, id string) bool {
	h.mu.Lock()
	h.forget()
	_, live := h.live[id]
	name, ended := h.ended[id]
	h.mu.Unlock()
	if live {
		return false
	}
	attrs := []any{"remote", r.RemoteAddr, "method", r.Method, "reason", "unknown"}
	msg := errUnknownSession
	if ended {
		attrs = []any{"remote", r.RemoteAddr, "method", r.Method, "reason", "ended", "jail", name}
		msg = errEndedSession
	}
	h.log.Warn("MCP session id refused", attrs...)
	http.Error(w, msg.Error(), http.StatusNotFound)
	return true
}

// modernMeta reports whether a request's _meta names the sessionless
// revision, by the spec's key.
func modernMeta(meta map[string]any) bool {
	v, _ := meta[mcp.MetaKeyProtocolVersion].(string)
	return mcp.IsModernProtocol(v)
}

func refuseSessionless(w http.ResponseWriter, id json.RawMessage) {
	writeRPCError(w, http.StatusBadRequest, id, mcp.INVALID_REQUEST,
		"jail-mcp gives each MCP session its own jail: use protocol version 2025-11-25 or earlier, which has sessions")
}

// codeTooManySessions is the JSON-RPC error of an initialize beyond
// --max-sessions: the first of the codes JSON-RPC leaves to servers
// (-32000 to -32099), which MCP gives no meaning of its own. Not
// INVALID_REQUEST: the request is sound, the server is full for now. It
// goes with HTTP 503, which clients read as a server error; a 4xx answer
// to initialize tells mcp-go's client the server speaks only the old
// HTTP+SSE transport, and it would report that instead.
const codeTooManySessions = -32000

// writeRPCError answers a JSON-RPC request (id, valid JSON or empty) with
// an error; message is ASCII.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, message string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`, id, code, message)
}

// httpLimits bound the HTTP server's connections: how many are open at
// once, in all and of one remote address (connLimiter), and how long each
// may take. readHeader bounds reading a request's header, read its header
// and body (a client that sends either slowly holds a connection no
// longer); idle bounds the wait for the next request on a kept-alive
// connection. None cuts a long tool call or a GET stream: net/http clears
// the read deadline once a request's body is read (pinSessions reads a
// POST's whole body first), and nothing bounds writing, as a call's answer
// streams for up to --max-timeout and a GET stream for the session's life.
type httpLimits struct {
	maxConns, maxConnsPerAddr int
	readHeader, read, idle    time.Duration
}

// newHTTPLimits are the limits of cfg. The idle time is above what
// clients keep an idle connection (Go's 90 s, Node's 5 s), so that the
// client closes it first: closed here first, a request the client sends
// on it meanwhile fails.
func newHTTPLimits(cfg cli.Config) httpLimits {
	return httpLimits{
		maxConns: cfg.MaxConns, maxConnsPerAddr: cfg.MaxConnsPerAddr,
		readHeader: 10 * time.Second, read: time.Minute, idle: 2 * time.Minute,
	}
}

// serveHTTP serves streamable HTTP on ln until ctx ends (SIGTERM, SIGINT),
// then stops accepting, ends every session (killing its commands, keeping
// its files) and returns within a few seconds.
func serveHTTP(ctx context.Context, ln net.Listener, srv *server.MCPServer, sessions *httpSessions, met *metrics.Metrics, cfg cli.Config, lim httpLimits, log *slog.Logger) error {
	mcpHTTP := server.NewStreamableHTTPServer(srv,
		server.WithSessionIdManagerResolver(sessions),
		server.WithStreamableHTTPProtocolVersions(mcp.LegacyProtocolVersions()...),
		server.WithSessionIdleTTL(cli.IdleTimeout(cfg.MaxTimeout)),
		server.WithStreamableHTTPLogger(slog.New(withoutSessionIDs{log.Handler()})),
	)
	var obs connObserver
	if met != nil {
		obs = met
	}
	conns := newConnLimiter(ln, lim.maxConns, lim.maxConnsPerAddr, obs, log)
	if met != nil {
		met.Connections(conns.count)
	}
	hs := &http.Server{
		Handler:           httpHandler(mcpHTTP, sessions, met, cfg.Token),
		ReadHeaderTimeout: lim.readHeader,
		ReadTimeout:       lim.read,
		IdleTimeout:       lim.idle,
		ConnState:         conns.connState,
		ConnContext:       connContext,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(conns) }()
	select {
	case err := <-done:
		sessions.endAll()
		return err
	case <-ctx.Done():
	}
	// Ending the sessions first kills their commands, so that the calls
	// in flight answer at once and Shutdown does not wait on them.
	sessions.endAll()
	// The answers of the calls just killed go out; a connection still
	// idle or mid-request after a second is closed.
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	mcpHTTP.CloseSessions(sctx)
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	return nil
}

// withoutSessionIDs is the handler of mcp-go's log: it drops the MCP
// session ids that some of mcp-go's lines name (an expiring session's, a
// session's in a delivery error), by key and anywhere in the text, so that
// the log holds none (see httpSessions). mcp-go's ids are this server's,
// random UUIDs; any UUID in a line of mcp-go is masked.
type withoutSessionIDs struct{ slog.Handler }

var uuidRE = regexp.MustCompile(`(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

func (h withoutSessionIDs) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, maskIDs(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a, ok := withoutID(a); ok {
			out.AddAttrs(a)
		}
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h withoutSessionIDs) WithAttrs(attrs []slog.Attr) slog.Handler {
	var kept []slog.Attr
	for _, a := range attrs {
		if a, ok := withoutID(a); ok {
			kept = append(kept, a)
		}
	}
	return withoutSessionIDs{h.Handler.WithAttrs(kept)}
}

func (h withoutSessionIDs) WithGroup(name string) slog.Handler {
	return withoutSessionIDs{h.Handler.WithGroup(name)}
}

// withoutID is a with its ids masked, or false for an attribute that is
// a session id.
func withoutID(a slog.Attr) (slog.Attr, bool) {
	switch strings.ToLower(strings.ReplaceAll(a.Key, "_", "")) {
	case "session", "sessionid":
		return a, false
	}
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		var kept []any
		for _, g := range v.Group() {
			if g, ok := withoutID(g); ok {
				kept = append(kept, g)
			}
		}
		return slog.Group(a.Key, kept...), true
	case slog.KindString, slog.KindAny:
		return slog.String(a.Key, maskIDs(v.String())), true
	}
	return a, true
}

func maskIDs(s string) string { return uuidRE.ReplaceAllString(s, "<id>") }
