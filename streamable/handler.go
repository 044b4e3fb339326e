package streamable

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/protocol"
	"github.com/mcpmux/mcpmux/session"
)

// Header names of the transport.
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerLastEventID     = "Last-Event-Id"
)

// Defaults of Config.
const (
	// DefaultSessionIdle is long enough that an editor left open overnight
	// keeps its session, and its tools, in the morning.
	DefaultSessionIdle = 24 * time.Hour
	// DefaultSessionDormant is how long a session that never opened a
	// GET stream may be idle before it is let go (kept in the Store).
	DefaultSessionDormant = 10 * time.Minute
	DefaultWriteTimeout   = 60 * time.Second
	// DefaultMaxSessions bounds the HTTP sessions of a Handler, all servers
	// together; when it is reached a new session evicts the idlest.
	DefaultMaxSessions = 256
	DefaultMaxInflight = session.DefaultMaxInflight
)

// Endpoint is what a Handler serves a request to: one server of the
// daemon.
type Endpoint interface {
	// Full reports that the server takes no more sessions (a new HTTP
	// session is answered 503).
	Full() bool
	// MaxMessageBytes is the size limit of one message.
	MaxMessageBytes() int
	// Serve runs one session until it ends.
	Serve(ctx context.Context, t session.Transport, peer session.Peer) error
}

// Config configures a Handler. Zero values mean the defaults.
type Config struct {
	// SessionIdle ends an HTTP session that has had no request for this
	// long; zero means DefaultSessionIdle.
	SessionIdle time.Duration
	// SessionDormant: a session that has never had a GET stream open, and
	// has no request, for this long is dormant: it ends, which lets go of
	// what it held on its server (an isolated or project process, its
	// roots), but its record stays in the Store, so that a client that
	// comes back has it made again, as after a restart. Without a Store
	// there is no dormancy. Zero means DefaultSessionDormant.
	SessionDormant time.Duration
	// WriteTimeout bounds each write to a stream; zero means
	// DefaultWriteTimeout.
	WriteTimeout time.Duration
	// MaxSessions bounds the sessions, all servers together: a new one
	// evicts the one idle for longest, or is refused 503 when every one has
	// a request in flight. Zero means DefaultMaxSessions.
	MaxSessions int
	// MaxInflight bounds the POSTs of one session being read and handed
	// over at once (the others wait); zero means DefaultMaxInflight.
	MaxInflight int
	// ReplaySessionBytes and ReplayBytes bound what the streams keep for
	// resumption once delivered, per session and in all; zero means
	// DefaultReplaySessionBytes and DefaultReplayBytes.
	ReplaySessionBytes int64
	ReplayBytes        int64
	// Store keeps each session for a later daemon, which makes it again
	// when its client comes back; nil keeps nothing.
	Store Store
	// Streams bounds the GET streams and the listens, with the web
	// listener's other long-lived streams; nil bounds nothing.
	Streams *Streams
	// Logger gets refusals at Warn and sessions at Debug; nil discards.
	Logger *slog.Logger
}

// Handler serves Streamable HTTP requests on the endpoints of a web
// listener, which has checked Host, Origin, the token and the server name
// before it calls Serve. It owns the sessions it starts: Close ends them
// and waits for them.
type Handler struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context // the sessions'; cancelled by Close
	cancel context.CancelFunc

	replayKept atomic.Int64 // bytes the streams of every session keep once delivered

	mu       sync.Mutex
	closing  bool
	sessions map[string]*transport    // by Mcp-Session-Id
	pending  map[string]chan struct{} // restores under way, by id
	asleep   map[string]string        // dormant sessions' servers, by id; at most maxAsleep
	active   sync.WaitGroup           // the sessions' goroutines, and the modern requests'

	tools toolCache // the 2026-07-28 binding's tool definitions (modern.go)
}

// New returns a Handler with no sessions.
func New(cfg Config) *Handler {
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	if cfg.SessionDormant <= 0 {
		cfg.SessionDormant = DefaultSessionDormant
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	cfg.MaxSessions = cmp.Or(max(cfg.MaxSessions, 0), DefaultMaxSessions)
	cfg.MaxInflight = cmp.Or(max(cfg.MaxInflight, 0), DefaultMaxInflight)
	cfg.ReplaySessionBytes = cmp.Or(max(cfg.ReplaySessionBytes, 0), DefaultReplaySessionBytes)
	cfg.ReplayBytes = cmp.Or(max(cfg.ReplayBytes, 0), DefaultReplayBytes)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Handler{cfg: cfg, log: log, ctx: ctx, cancel: cancel,
		sessions: make(map[string]*transport), pending: make(map[string]chan struct{})}
}

// Serve answers one request for server on ep: POST, GET or DELETE.
func (h *Handler) Serve(rw http.ResponseWriter, r *http.Request, server string, ep Endpoint) {
	switch {
	case r.Method != http.MethodPost && r.Header.Get(headerSessionID) == "":
		h.refuseSessionless(rw, r, server) // the 2026-07-28 binding has POST alone
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.post(rw, r, server, ep)
	case http.MethodGet:
		h.get(rw, r, server, ep)
	case http.MethodDelete:
		h.delete(rw, r, server)
	default:
		rw.Header().Set("Allow", "GET, POST, DELETE")
		h.refuse(rw, r, server, errMethod, "method", r.Method)
	}
}

// Close refuses new sessions, ends every session (their requests still in
// flight are cancelled at the server by the session's end) and returns
// once their goroutines have.
func (h *Handler) Close() {
	all := h.closeRegistry()
	h.cancel()
	for _, t := range all {
		t.Close()
	}
	h.active.Wait()
}

// closeRegistry refuses new sessions and takes the registered ones.
func (h *Handler) closeRegistry() map[string]*transport {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closing = true
	all := h.sessions
	h.sessions = make(map[string]*transport)
	return all
}

// body is a POST's message, read and checked.
type body struct {
	frame    []byte           // compacted to one line, numbers and strings byte for byte
	batch    bool             // a JSON array
	requests int              // requests in it
	msg      *jsonrpc.Message // the message, when not a batch
}

func (b *body) initialize() bool {
	return !b.batch && b.msg.Kind == jsonrpc.KindRequest && b.msg.Method == "initialize"
}

// errClientLeft: the client went away while its body was read.
var errClientLeft = &refusal{}

// readBody reads and checks a POST's body within limit bytes.
func readBody(r *http.Request, limit int) (*body, *refusal) {
	raw, err := readAll(r, limit)
	switch {
	case err != nil && r.Context().Err() != nil:
		return nil, errClientLeft
	case err != nil: // a broken chunked encoding, a body cut short
		return nil, &refusal{status: http.StatusBadRequest, err: &jsonrpc.Error{
			Code: jsonrpc.CodeParseError, Message: "cannot read the body: " + err.Error(), Reason: jsonrpc.ReasonParseError,
		}}
	case len(raw) > limit:
		return nil, &refusal{status: http.StatusRequestEntityTooLarge, err: &jsonrpc.Error{
			Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("message over the limit of %d bytes", limit), Reason: jsonrpc.ReasonTooLarge,
		}}
	case jsonrpc.CheckJSON(raw) != nil:
		return nil, &refusal{status: http.StatusBadRequest, err: jsonrpc.CheckJSON(raw)}
	}
	frame := raw
	if bytes.ContainsAny(raw, "\r\n") {
		// One line for the server's stdin: valid JSON has line breaks only
		// between its tokens, which compaction drops.
		var compact bytes.Buffer
		json.Compact(&compact, raw)
		frame = compact.Bytes()
	}
	b := &body{frame: frame, batch: jsonrpc.IsBatch(frame)}
	if !b.batch {
		m, err := jsonrpc.Parse(b.frame)
		if err != nil {
			var e *jsonrpc.Error
			errors.As(err, &e)
			return nil, &refusal{status: http.StatusBadRequest, id: m.ID, err: e}
		}
		b.msg = m
		if m.Kind == jsonrpc.KindRequest {
			b.requests = 1
		}
		return b, nil
	}
	elems, err := jsonrpc.SplitBatch(b.frame)
	if err != nil {
		var e *jsonrpc.Error
		errors.As(err, &e)
		return nil, &refusal{status: http.StatusBadRequest, err: e}
	}
	for _, el := range elems {
		// An element that does not parse is answered inside the batch,
		// by the session.
		if m, err := jsonrpc.Parse(el); err == nil && m.Kind == jsonrpc.KindRequest {
			b.requests++
		}
	}
	return b, nil
}

// readAll reads a body of up to limit bytes, and one more if the body is
// longer: into a buffer of its declared length when it declares one within
// the limit, so that a body is read without the buffer growing.
func readAll(r *http.Request, limit int) ([]byte, error) {
	lr := io.LimitReader(r.Body, int64(limit)+1)
	n := r.ContentLength
	if n <= 0 || n > int64(limit) {
		return io.ReadAll(lr)
	}
	buf := make([]byte, n+1) // +1: a body longer than it said is seen, and refused
	k, err := io.ReadFull(lr, buf)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) && int64(k) == n:
		err = nil // the whole body, as long as it said
	case errors.Is(err, io.EOF):
		err = io.ErrUnexpectedEOF // nothing of a body that said it had n bytes
	}
	return buf[:k], err
}

// post serves one POST: its checks, then its message.
func (h *Handler) post(rw http.ResponseWriter, r *http.Request, server string, ep Endpoint) {
	modern := r.Header.Get(headerSessionID) == "" && r.Header.Get(headerProtocolVersion) != "" && !protocol.IsLegacy(r.Header.Get(headerProtocolVersion))
	if !modern && (!Accepts(r, "application/json") || !Accepts(r, "text/event-stream")) {
		h.refuse(rw, r, server, errNotAcceptable)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			h.refuse(rw, r, server, errContentType)
			return
		}
	}
	if t := h.lookup(r.Header.Get(headerSessionID)); t != nil {
		if release, ok := t.takePOST(r.Context()); ok {
			defer release()
		} else if r.Context().Err() != nil {
			return // the client left; a session that ended is answered below
		}
	}
	b, f := readBody(r, ep.MaxMessageBytes())
	switch {
	case f == errClientLeft:
		return
	case f != nil:
		h.refuse(rw, r, server, f)
		return
	}
	if isModernPOST(r, b) {
		h.postModern(rw, r, server, ep, b) // the 2026-07-28 binding
		return
	}
	h.postSession(rw, r, server, ep, b)
}

// postSession serves a POST of the 2025 binding: an initialize starts a
// session, anything else names one.
func (h *Handler) postSession(rw http.ResponseWriter, r *http.Request, server string, ep Endpoint, b *body) {
	var t *transport
	var f *refusal
	if b.initialize() && r.Header.Get(headerSessionID) == "" {
		t, f = h.admit(r, server, ep, Record{})
		if f == nil {
			rw.Header().Set(headerSessionID, t.id)
		}
	} else {
		t, f = h.sessionOf(r, server, ep)
	}
	if f != nil {
		h.refuse(rw, r, server, f)
		return
	}
	t.enter()
	defer t.leave()

	if b.requests == 0 { // notifications and responses: 202 once taken
		if err := t.deliver(r.Context(), b.frame, 0); err != nil {
			if errors.Is(err, errSessionGone) {
				h.refuse(rw, r, server, errNoSession)
			}
			return
		}
		h.remember(t, b)
		rw.WriteHeader(http.StatusAccepted)
		return
	}
	st := t.openPOST()
	c := newSSEConn(rw, t.writeTimeout)
	st.attach(c, 0) // empty yet: the session has not seen the request
	if err := t.deliver(r.Context(), b.frame, st.no); err != nil {
		t.abandon(st)
		if errors.Is(err, errSessionGone) {
			h.refuse(rw, r, server, errNoSession)
		}
		return
	}
	h.remember(t, b)
	st.startSoon(c)
	st.hold(r.Context(), c)
}

// get opens a session's GET stream, or resumes the stream that
// Last-Event-ID names.
func (h *Handler) get(rw http.ResponseWriter, r *http.Request, server string, ep Endpoint) {
	if !Accepts(r, "text/event-stream") {
		h.refuse(rw, r, server, errNotSSE)
		return
	}
	t, f := h.sessionOf(r, server, ep)
	if f != nil {
		h.refuse(rw, r, server, f)
		return
	}
	t.enter()
	defer t.leave()
	t.streamed()
	var no, from uint64
	resume := r.Header.Get(headerLastEventID)
	if resume != "" {
		var ok bool
		if no, from, ok = parseEventID(resume); !ok {
			h.refuse(rw, r, server, errEventID)
			return
		}
	}
	st := t.stream(no)
	c := newSSEConn(rw, t.writeTimeout)
	if st == nil { // a POST stream forgotten long ago: nothing more will come
		c.writeHeader()
		return
	}
	// The session's oldest stream is ended when it holds its bound of them.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	release, ok := h.cfg.Streams.Acquire("http session "+t.id, cancel)
	if !ok {
		h.refuse(rw, r, server, errTooManyStreams)
		return
	}
	defer release()
	if resume == "" {
		from = st.undelivered() // what never reached the client
	}
	st.attach(c, from) // a connection already there is let go
	t.trimReplay()
	st.start(c)
	st.hold(ctx, c)
}

// delete ends the session a request names.
func (h *Handler) delete(rw http.ResponseWriter, r *http.Request, server string) {
	t, f := h.sessionOf(r, server, nil)
	if f == errNoSession && h.forgetRecord(r.Header.Get(headerSessionID), server) {
		h.log.Debug("HTTP session of an earlier daemon deleted by its client", "server", server)
		rw.WriteHeader(http.StatusNoContent)
		return
	}
	if f != nil {
		h.refuse(rw, r, server, f)
		return
	}
	h.end(t)
	h.log.Debug("HTTP session deleted by its client", "server", server, "http_session", t.id)
	rw.WriteHeader(http.StatusNoContent)
}

// sessionOf finds the session a request names: 400 without Mcp-Session-Id
// or with an MCP-Protocol-Version of no legacy revision, 404 for a session
// that does not exist (or no longer does). A session of an earlier daemon
// that the Store kept is made again first, when ep is not nil.
func (h *Handler) sessionOf(r *http.Request, server string, ep Endpoint) (*transport, *refusal) {
	id := r.Header.Get(headerSessionID)
	if id == "" {
		return nil, errNoSessionID
	}
	if v := r.Header.Get(headerProtocolVersion); v != "" && !protocol.IsLegacy(v) {
		return nil, &refusal{status: http.StatusBadRequest, err: &jsonrpc.Error{
			Code: protocol.CodeUnsupportedVersion, Message: "unsupported MCP-Protocol-Version " + v + " in a session",
			Reason: jsonrpc.ReasonUnsupportedVersion, Extra: map[string]any{"supported": protocol.Legacy, "requested": v},
		}}
	}
	t := h.lookup(id)
	if t == nil && ep != nil && h.cfg.Store != nil {
		h.wake(id)
		return h.restore(r, id, server, ep)
	}
	if t == nil || t.server != server || t.closed() {
		return nil, errNoSession
	}
	return t, nil
}

// maxAsleep bounds the dormant sessions Dormant counts; past it the count
// is short (the sessions themselves are kept in the Store all the same).
const maxAsleep = 4096

// nap notes that session id of server went dormant.
func (h *Handler) nap(id, server string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.asleep == nil {
		h.asleep = make(map[string]string)
	}
	if len(h.asleep) < maxAsleep {
		h.asleep[id] = server
	}
}

// wake notes that session id is no longer dormant: its client came back,
// or deleted it.
func (h *Handler) wake(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.asleep, id)
}

// Dormant counts the sessions of each server that went dormant in this
// Handler and have not come back since.
func (h *Handler) Dormant() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := make(map[string]int)
	for _, server := range h.asleep {
		n[server]++
	}
	return n
}

// forgetRecord deletes the kept record of session id of server, if there
// is one.
func (h *Handler) forgetRecord(id, server string) bool {
	if h.cfg.Store == nil || id == "" {
		return false
	}
	rec, err := h.cfg.Store.Load(id)
	if err != nil || rec.Server != server {
		return false
	}
	h.wake(id)
	h.cfg.Store.Delete(id)
	return true
}

func (h *Handler) lookup(id string) *transport {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[id]
}

// end forgets t and closes it; its requests still in flight are cancelled
// at the server by the session's end. Its record goes too, unless the
// Handler is closing: the daemon is stopping, and a later one will make
// the session again.
func (h *Handler) end(t *transport) {
	if h.forget(t) && h.cfg.Store != nil && !t.asleep.Load() {
		h.cfg.Store.Delete(t.id)
	}
	t.Close()
}

// forget takes t out of the sessions; true when the record is to go too.
func (h *Handler) forget(t *transport) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sessions[t.id] == t {
		delete(h.sessions, t.id)
	}
	return !h.closing
}
