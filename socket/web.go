package socket

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mcpmux/mcpmux/internal/ratelog"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/streamable"
)

// ErrNotLoopback: the web listener was asked to bind an address beyond this
// machine without WebConfig.AllowRemote.
var ErrNotLoopback = errors.New("socket: not a loopback address")

// Endpoint is what the web listener serves under one name: a server of the
// daemon, reached at /servers/NAME. Full is answered 503 before a
// WebSocket upgrade (and before a new Streamable HTTP session).
type Endpoint = streamable.Endpoint

// WebConfig configures a web listener.
type WebConfig struct {
	Addr  string // host:port to listen on
	Token string // the secret every request must present; required
	// TokenFile is the file Token was read from, when it was: the
	// listener follows its rotations, and still takes a token rotated out
	// for TokenGrace (zero: DefaultTokenGrace).
	TokenFile   string
	TokenGrace  time.Duration
	Origins     []string // browser Origins allowed; a request with any other Origin is refused
	AllowRemote bool     // listen beyond loopback and accept any Host

	// Metrics serves GET /metrics, behind the token like the rest, with
	// MetricsHandler (which the daemon sets); false: /metrics is no server.
	Metrics        bool
	MetricsHandler http.Handler

	// Lookup finds the endpoint of a server name.
	Lookup func(name string) (Endpoint, bool)

	// Timers of each WebSocket; zero means the session package's defaults.
	// WriteTimeout also bounds each write to a Streamable HTTP stream.
	PingInterval time.Duration
	PongTimeout  time.Duration
	WriteTimeout time.Duration

	// HTTPSessionIdle ends a Streamable HTTP session that has had no
	// request for this long; zero means streamable.DefaultSessionIdle.
	HTTPSessionIdle time.Duration
	// HTTPSessionDormant lets go of a Streamable HTTP session that never
	// opened a GET stream and has been idle this long, keeping its record
	// (streamable.Config.SessionDormant); zero means its default.
	HTTPSessionDormant time.Duration
	// MaxHTTPSessions bounds the Streamable HTTP sessions, all servers
	// together (the idlest is evicted for a new one); zero means
	// streamable.DefaultMaxSessions.
	MaxHTTPSessions int
	// HTTPSessionDir keeps the Streamable HTTP sessions for the next
	// daemon, which makes them again when their clients come back; ""
	// keeps none.
	HTTPSessionDir string
	// MaxInflight bounds the POSTs of one Streamable HTTP session read at
	// once (max_inflight); zero means the streamable package's default.
	MaxInflight int
	// MaxConnections bounds the connections open at once that have passed
	// the Host, Origin and token checks; while that many are, the next one
	// is accepted when one closes. Zero means DefaultMaxConnections.
	MaxConnections int
	// MaxStreams bounds the long-lived streams open at once (WebSockets,
	// GET streams, listens), below MaxConnections so that short requests
	// always have room; one more is refused 503. Zero means three quarters
	// of MaxConnections.
	MaxStreams int
	// MaxListens bounds the listens of one client (a peer and the name it
	// gives itself) and the GET streams of one HTTP session; one more ends
	// the oldest. Zero means streamable.DefaultMaxListens.
	MaxListens int
	// MaxUnchecked bounds the connections open at once that have not yet
	// passed the checks; one more closes the oldest of them. Zero means
	// DefaultMaxUnchecked.
	MaxUnchecked int
	// HeaderTimeout bounds reading a request's headers, and BodyTimeout
	// its body, from the first read of it; zero means DefaultHeaderTimeout
	// and DefaultBodyTimeout.
	HeaderTimeout time.Duration
	BodyTimeout   time.Duration

	Logger *slog.Logger // refusals at Warn, sessions at Debug; nil discards
}

// ServersPath is where server NAME is served: ServersPath + NAME.
const ServersPath = "/servers/"

// MetricsPath is where the web listener serves metrics, when WebConfig.Metrics.
const MetricsPath = "/metrics"

// DefaultMaxConnections is WebConfig.MaxConnections' default.
const DefaultMaxConnections = 1024

// DefaultMaxStreamsOf is WebConfig.MaxStreams' default for maxConns
// connections: three quarters of them.
func DefaultMaxStreamsOf(maxConns int) int { return max(maxConns*3/4, 1) }

// Defaults of WebConfig.
const (
	DefaultMaxUnchecked  = 64
	DefaultHeaderTimeout = 2 * time.Second
	DefaultBodyTimeout   = 10 * time.Second
)

// handshakeTimeout bounds completing the WebSocket handshake.
const handshakeTimeout = 10 * time.Second

// shutdownTimeout bounds the wait for plain HTTP requests at shutdown.
const shutdownTimeout = 5 * time.Second

// Web is the web listener: one endpoint per server, at
// http://HOST:PORT/servers/NAME. A WebSocket upgrade there carries one
// session, one JSON-RPC message per text frame; POST, GET and DELETE there
// are Streamable HTTP, served by a streamable.Handler.
//
// Each request passes these checks, in this order: Host names a loopback
// address or localhost (against DNS rebinding; any Host when AllowRemote),
// and Origin is absent or allowed, else 403; the token is presented, else
// 401; the server exists, else 404; it has room for a session, else 503
// (for a WebSocket; the Handler decides for Streamable HTTP). A plain GET
// that asks for no event stream is told to upgrade (426). Every refusal
// has a JSON-RPC error body naming its reason and the server.
// The token is accepted as "Authorization: Bearer TOKEN", as "?token=TOKEN",
// or as a Sec-WebSocket-Protocol entry "mcp.auth.TOKEN", and compared in
// constant time. Subprotocol "mcp" is selected when the client offers it.
//
// Connections are bounded before any check: those that have passed none
// yet get a budget of their own, the oldest closed for a new one, so that
// no one without the token takes the slots of those that have (see
// limitListener). Long-lived streams (WebSockets, GET streams, listens)
// are bounded apart, below the connections, so short requests have room.
type Web struct {
	cfg      WebConfig
	l        net.Listener
	log      *slog.Logger
	tokens   *webTokens
	upgrader websocket.Upgrader
	http     *streamable.Handler

	conns   *limitListener      // w.l, its connections bounded
	streams *streamable.Streams // the long-lived streams, WebSockets among them

	mu      sync.Mutex
	closing bool
	active  sync.WaitGroup // WebSocket sessions, on hijacked connections
}

// connKey is the request context's key of its connection.
type connKey struct{}

// ListenWeb validates cfg and listens on cfg.Addr. Without AllowRemote an
// address that is not loopback (127.0.0.0/8, ::1 or localhost) is refused
// with an error wrapping ErrNotLoopback. Serve starts serving.
func ListenWeb(cfg WebConfig) (*Web, error) {
	if cfg.Token == "" {
		return nil, errors.New("web listener: a token is required")
	}
	if cfg.Lookup == nil {
		return nil, errors.New("web listener: no Lookup")
	}
	if err := CheckWebAddr(cfg.Addr, cfg.AllowRemote); err != nil {
		return nil, err
	}
	maxConns := cmp.Or(cfg.MaxConnections, DefaultMaxConnections)
	maxStreams := cmp.Or(cfg.MaxStreams, DefaultMaxStreamsOf(maxConns))
	if maxStreams >= maxConns {
		return nil, fmt.Errorf("web listener: %d long-lived streams must be fewer than %d connections, so that short requests have room", maxStreams, maxConns)
	}
	l, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("web listener: %w", err)
	}
	if ta, ok := l.Addr().(*net.TCPAddr); !cfg.AllowRemote && (!ok || !ta.IP.IsLoopback()) {
		l.Close() // "localhost" resolved to something else
		return nil, fmt.Errorf("web listener on %s (bound %s): %w", cfg.Addr, l.Addr(), ErrNotLoopback)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Anyone who reaches the port can provoke refusals at will: one line
	// per kind and peer, then a count.
	log = slog.New(ratelog.New(log.Handler(), ratelog.Config{Key: refusalKey}))
	w := &Web{cfg: cfg, l: l, log: log, tokens: newWebTokens(cfg)}
	w.upgrader = websocket.Upgrader{
		HandshakeTimeout: handshakeTimeout,
		// 0: gorilla reads through the HTTP server's own 4 KiB buffer,
		// which hijacked (below) records, so the transport can tell a
		// whole message is already buffered.
		ReadBufferSize:  0,
		WriteBufferSize: 4 << 10,
		WriteBufferPool: new(sync.Pool), // idle sessions hold no write buffer
		Subprotocols:    []string{"mcp"},
		CheckOrigin:     w.originAllowed, // checked before, and again by the upgrader
		Error: func(rw http.ResponseWriter, r *http.Request, status int, reason error) {
			w.log.Warn("refused a WebSocket handshake", "peer", r.RemoteAddr, "status", status, "error", reason)
			why := jsonrpc.ReasonInvalidRequest
			if status == http.StatusForbidden {
				why = jsonrpc.ReasonForbidden
			}
			streamable.WriteError(rw, status, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "WebSocket handshake refused: " + reason.Error(), Reason: why, Server: serverOf(r.URL.Path)})
		},
	}
	w.streams = streamable.NewStreams(maxStreams, cfg.MaxListens)
	hc := streamable.Config{SessionIdle: cfg.HTTPSessionIdle, SessionDormant: cfg.HTTPSessionDormant, WriteTimeout: cfg.WriteTimeout,
		MaxSessions: cfg.MaxHTTPSessions, MaxInflight: cfg.MaxInflight, Streams: w.streams, Logger: log}
	if cfg.HTTPSessionDir != "" {
		fs := &streamable.FileStore{Dir: cfg.HTTPSessionDir,
			Max:  cmp.Or(cfg.MaxHTTPSessions, streamable.DefaultMaxSessions),
			Idle: cmp.Or(cfg.HTTPSessionIdle, streamable.DefaultSessionIdle), Log: log}
		fs.Prune()
		hc.Store = fs
	}
	w.http = streamable.New(hc)
	w.conns = newLimitListener(l, maxConns,
		cmp.Or(cfg.MaxUnchecked, DefaultMaxUnchecked), func(c net.Conn) {
			// Anyone who reaches the port can cause these: the log limits them.
			w.log.Warn("closed the oldest connection not yet checked, for a newer one", "peer", c.RemoteAddr().String())
		})
	return w, nil
}

// CheckWebAddr reports whether ListenWeb may listen on addr (host:port):
// with allowRemote any address, else only a loopback IP or localhost; the
// error then wraps ErrNotLoopback.
func CheckWebAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	switch {
	case err != nil:
		return fmt.Errorf("web listener: %w", err)
	case !allowRemote && !isLoopbackHost(host):
		return fmt.Errorf("web listener on %s: %w", addr, ErrNotLoopback)
	}
	return nil
}

// Addr is the address the listener is bound to.
func (w *Web) Addr() net.Addr { return w.l.Addr() }

// Dormant counts each server's dormant Streamable HTTP sessions
// (streamable.Handler.Dormant).
func (w *Web) Dormant() map[string]int { return w.http.Dormant() }

// Serve serves until ctx is done or the listener fails, then stops
// listening, ends the sessions and returns once every one of them has
// ended: nil when ctx ended it, else the listener's error.
func (w *Web) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx) // the sessions' context
	defer cancel()
	srv := &http.Server{
		Handler:           http.HandlerFunc(w.handle),
		ReadHeaderTimeout: cmp.Or(w.cfg.HeaderTimeout, DefaultHeaderTimeout),
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ErrorLog: slog.NewLogLogger(w.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(w.conns) }() // waited for below
	var err error
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	sctx, done := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer done()
	if srv.Shutdown(sctx) != nil { // closes the listener; waits for requests not upgraded
		srv.Close()
	}
	if err == nil {
		<-served
	}
	// Sessions run on hijacked connections, which Shutdown does not track,
	// or outlive their requests (HTTP sessions): refuse new ones, end the
	// running ones, wait for them.
	w.setClosing()
	cancel()
	w.http.Close()
	w.active.Wait()
	if err != nil {
		return fmt.Errorf("web listener on %s: %w", w.l.Addr(), err)
	}
	return nil
}

// Refusals of the listener's own checks.
var (
	errHost         = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "Host is not a loopback address", Reason: jsonrpc.ReasonForbidden}
	errOrigin       = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "Origin not allowed", Reason: jsonrpc.ReasonForbidden}
	errToken        = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "missing or wrong token", Reason: jsonrpc.ReasonUnauthorized}
	errNoServer     = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "no such server", Reason: jsonrpc.ReasonNoSuchServer}
	errFull         = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server has its maximum of sessions", Reason: jsonrpc.ReasonTooManySessions}
	errStreams      = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpmux has its maximum of long-lived streams (http_max_streams): listens, GET streams and WebSockets", Reason: jsonrpc.ReasonTooManyStreams}
	errShuttingDown = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpmux is shutting down", Reason: jsonrpc.ReasonShuttingDown}
	errUpgrade      = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "this endpoint speaks WebSocket and Streamable HTTP", Reason: jsonrpc.ReasonInvalidRequest}
	errNoOAuth      = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "mcpmux does not use OAuth: send its token as Authorization: Bearer TOKEN", Reason: jsonrpc.ReasonNotSupported}
)

// isOAuthDiscovery reports whether path is one of the well-known paths
// OAuth clients probe (RFC 8414, RFC 9728, OpenID Connect Discovery),
// at the root with or without a server's path after it, or after a
// server's path.
func isOAuthDiscovery(path string) bool {
	_, rest, ok := strings.Cut(path, "/.well-known/")
	if !ok {
		return false
	}
	return strings.HasPrefix(rest, "oauth-") || rest == "openid-configuration" || strings.HasPrefix(rest, "openid-configuration/")
}

// refusalKey is the kind of a web listener's log record, for the rate
// limit: its level, its message and the peer's address without its port.
func refusalKey(r slog.Record) string {
	peer := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "peer" {
			peer = a.Value.String()
			if h, _, err := net.SplitHostPort(peer); err == nil {
				peer = h
			}
			return false
		}
		return true
	})
	return r.Level.String() + " " + r.Message + " " + peer
}

// AllPath is where the endpoint named AllName is served, besides
// ServersPath + AllName: the usual MCP path, for one entry that reaches
// every server.
const (
	AllPath = "/mcp"
	AllName = "all"
)

// serverOf is the server name a path asks for, "" when it names none:
// /servers/NAME, or /servers/NAME/mcp (some clients keep a URL's path only
// when it ends in /mcp, the usual MCP endpoint), or AllPath for AllName.
func serverOf(path string) string {
	if path == AllPath {
		return AllName
	}
	name, ok := strings.CutPrefix(path, ServersPath)
	name = strings.TrimSuffix(name, "/mcp")
	if !ok || name == "" || strings.Contains(name, "/") {
		return ""
	}
	return name
}

// handle runs the checks, in order, then the session.
func (w *Web) handle(rw http.ResponseWriter, r *http.Request) {
	w.bodyDeadline(rw, r)
	name := serverOf(r.URL.Path)
	conn, _ := r.Context().Value(connKey{}).(*limitedConn)
	refuse := func(status int, e *jsonrpc.Error, args ...any) {
		if conn != nil {
			conn.refused() // before the answer, which may wait for a slow body
		}
		for i, a := range args {
			if s, ok := a.(string); ok {
				args[i] = streamable.Clip(s)
			}
		}
		w.log.Warn("refused a web request: "+e.Message, append([]any{"peer", r.RemoteAddr, "status", status}, args...)...)
		streamable.WriteError(rw, status, nil, e.WithServer(name))
	}
	if !w.cfg.AllowRemote && !isLoopbackHost(hostOnly(r.Host)) {
		refuse(http.StatusForbidden, errHost, "host", r.Host)
		return
	}
	if !w.originAllowed(r) {
		refuse(http.StatusForbidden, errOrigin, "origin", r.Header.Get("Origin"))
		return
	}
	if isOAuthDiscovery(r.URL.Path) {
		// Clients probe these before they use a server; mcpmux takes a
		// token instead, and a 404 is how OAuth says "none here".
		if conn != nil {
			conn.refused()
		}
		w.log.Debug("answered an OAuth discovery probe: none here", "peer", r.RemoteAddr, "path", streamable.Clip(r.URL.Path))
		streamable.WriteError(rw, http.StatusNotFound, nil, errNoOAuth.WithServer(name))
		return
	}
	if !w.authorized(r) {
		rw.Header().Set("WWW-Authenticate", `Bearer realm="mcpmux"`)
		refuse(http.StatusUnauthorized, errToken)
		return
	}
	if conn != nil {
		conn.promote()
	}
	if r.URL.Path == MetricsPath && w.cfg.Metrics && w.cfg.MetricsHandler != nil {
		w.cfg.MetricsHandler.ServeHTTP(rw, r)
		return
	}
	var ep Endpoint
	ok := name != ""
	if ok {
		ep, ok = w.cfg.Lookup(name)
	}
	if !ok {
		refuse(http.StatusNotFound, errNoServer, "path", r.URL.Path)
		return
	}
	if !websocket.IsWebSocketUpgrade(r) {
		if r.Method == http.MethodGet && r.Header.Get("Mcp-Session-Id") == "" && !streamable.Accepts(r, "text/event-stream") {
			rw.Header().Set("Upgrade", "websocket")
			refuse(http.StatusUpgradeRequired, errUpgrade, "server", name)
			return
		}
		w.http.Serve(rw, r, name, ep)
		return
	}
	if ep.Full() {
		refuse(http.StatusServiceUnavailable, errFull, "server", name)
		return
	}
	release, ok := w.streams.Acquire("", nil)
	if !ok {
		refuse(http.StatusServiceUnavailable, errStreams, "server", name)
		return
	}
	defer release()
	if !w.enter() {
		refuse(http.StatusServiceUnavailable, errShuttingDown, "server", name)
		return
	}
	defer w.active.Done()
	w.serveWebSocket(rw, r, name, ep)
}

// bodyDeadline bounds reading r's body, if it has one, to BodyTimeout:
// from now, which covers the server discarding the body of a request
// refused without reading it, and again from the handler's first read of
// it, since a POST may wait its turn before it is read. Once the body is
// read the deadline is lifted (net/http lifts it too, as it starts
// watching for the client's leaving), so that a response streamed for
// long (a listen) is not cut off by it.
func (w *Web) bodyDeadline(rw http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	d := cmp.Or(w.cfg.BodyTimeout, DefaultBodyTimeout)
	rc := http.NewResponseController(rw)
	if rc.SetReadDeadline(time.Now().Add(d)) != nil {
		return
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, timeout: d}
}

// deadlineBody arms its connection's read deadline at its first read and
// lifts it at its end.
type deadlineBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	armed   bool
	lifted  bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if !b.armed {
		b.armed = true
		b.rc.SetReadDeadline(time.Now().Add(b.timeout))
	}
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.lifted { // any other error leaves the deadline to end the connection
		b.lifted = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// enter counts a WebSocket session in; false once the listener is closing.
func (w *Web) enter() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return false
	}
	w.active.Add(1)
	return true
}

func (w *Web) setClosing() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closing = true
}

// serveWebSocket upgrades the connection and runs its session.
func (w *Web) serveWebSocket(rw http.ResponseWriter, r *http.Request, name string, ep Endpoint) {
	hj := &hijacked{ResponseWriter: rw}
	conn, err := w.upgrader.Upgrade(hj, r, nil)
	if err != nil {
		return // the upgrader answered and logged
	}
	t := session.NewWebSocket(conn, session.WebSocketConfig{
		ReadBuffer:      hj.br,
		MaxMessageBytes: ep.MaxMessageBytes(),
		PingInterval:    w.cfg.PingInterval,
		PongTimeout:     w.cfg.PongTimeout,
		WriteTimeout:    w.cfg.WriteTimeout,
	})
	defer t.Close()
	peer := session.Peer{Transport: "websocket", Addr: r.RemoteAddr}
	if err := ep.Serve(r.Context(), t, peer); err != nil {
		w.log.Debug("session ended", "server", name, "peer", r.RemoteAddr, "error", err)
	}
}

// hijacked is a ResponseWriter whose Hijack records the read buffer it
// hands over: with ReadBufferSize 0 the upgrader keeps reading through it.
type hijacked struct {
	http.ResponseWriter
	br *bufio.Reader
}

func (h *hijacked) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := h.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be hijacked")
	}
	c, brw, err := hj.Hijack()
	if brw != nil {
		h.br = brw.Reader
	}
	return c, brw, err
}

// authProtocol prefixes the Sec-WebSocket-Protocol entry that carries the
// token (the WebSocket SEP draft's spelling).
const authProtocol = "mcp.auth."

// authorized reports whether r presents the token in any accepted place.
func (w *Web) authorized(r *http.Request) bool {
	var candidates []string
	if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		candidates = append(candidates, strings.TrimSpace(tok))
	}
	if q := r.URL.Query(); q.Has("token") {
		candidates = append(candidates, q.Get("token"))
	}
	for _, p := range websocket.Subprotocols(r) {
		if tok, ok := strings.CutPrefix(p, authProtocol); ok {
			candidates = append(candidates, tok)
		}
	}
	return w.tokens.take(candidates)
}

// originAllowed: no Origin (not a browser), the listener's own loopback
// origin, or one listed in Origins.
//
// A page whose origin is http://127.0.0.1:PORT (or localhost, ::1) on this
// listener's port can only have been served by the listener itself, so it is
// same-origin and no rebinding is involved; a rebinding page always carries
// its own, non-loopback, origin.
func (w *Web) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	origin = strings.TrimSuffix(origin, "/")
	if u, err := url.Parse(origin); err == nil && u.Scheme == "http" && u.Path == "" &&
		isLoopbackHost(u.Hostname()) && strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, o := range w.cfg.Origins {
		if strings.EqualFold(origin, strings.TrimSuffix(o, "/")) {
			return true
		}
	}
	return false
}

// hostOnly strips the port, and the brackets of an IPv6 literal, from a
// Host header.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// isLoopbackHost reports whether host is localhost or a loopback IP.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
