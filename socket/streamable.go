package socket

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
)

// Streamable HTTP (MCP 2025-03-26 to 2025-11-25) on the web listener's
// endpoint: POST carries one client message, GET opens the session's
// standalone SSE stream (or resumes a stream with Last-Event-ID), DELETE
// ends the session. Each HTTP session is one session.Transport, so the hub
// serves it like any other session: its own ids, flow control, and the
// cancellation of its requests when it ends.
//
// Every POST that carries a request is answered as an SSE stream
// (text/event-stream), never as application/json: the headers go out as
// soon as the session has read the request, so that a long tool call does
// not trip a client's header timeout, and a comment line every
// sseKeepalive keeps idle streams alive. The stream carries, before the
// response, the progress notifications whose token one of its requests
// carried, and the server's requests (sampling, elicitation) when this POST
// is the only one of its session still waiting for its response; it ends
// after the response. Everything else goes to the GET stream.

// Header names of the transport.
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerLastEventID     = "Last-Event-Id"
)

// protocolVersions are the MCP revisions a request may name in
// MCP-Protocol-Version.
var protocolVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

// DefaultHTTPSessionIdle is how long an HTTP session lives without any
// request when WebConfig.HTTPSessionIdle is zero.
const DefaultHTTPSessionIdle = 30 * time.Minute

// Bounds of what each session keeps for Last-Event-ID resumption.
const (
	replayEvents   = 256     // events kept per stream
	replayBytes    = 1 << 20 // bytes kept per stream (the newest event is always kept)
	finishedKept   = 16      // finished POST streams kept per session for resumption
	sseKeepalive   = 25 * time.Second
	sseWriteTimout = 60 * time.Second // default of one write to a stream
)

// errSessionGone: the HTTP session ended while a request was on its way in.
var errSessionGone = errors.New("socket: HTTP session ended")

// errStreamBusy: a stream already has a connection.
var errStreamBusy = errors.New("socket: stream already open")

// httpSession is one Streamable HTTP session. It is the session.Transport
// of the mcpmux session: ReadFrame takes the messages that POSTs deliver;
// WriteFrames sends each message to the stream it belongs to, which it
// finds from the message itself (tags are not used yet).
type httpSession struct {
	id           string
	server       string
	idle         time.Duration
	writeTimeout time.Duration
	expire       func() // ends the session after idle time

	in        chan []byte   // unbuffered: a POST returns once the session took its message
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	eventNo   atomic.Uint64 // numbers the events; unique within the session

	mu         sync.Mutex
	streams    map[uint64]*sseStream // 0: the GET stream; then live and kept POST streams
	nextStream uint64
	finished   []uint64              // finished POST streams still kept, oldest first
	ids        map[string]*sseStream // request id (raw) -> its POST stream
	tokens     map[string]*sseStream // progress token (raw) -> its POST stream
	live       int                   // POST streams waiting for a response
	busy       int                   // requests being served
	idleTimer  *time.Timer
}

func newHTTPSession(server string, idle, writeTimeout time.Duration) *httpSession {
	s := &httpSession{
		id:           rand.Text(), // 128 bits, base32: visible ASCII
		server:       server,
		idle:         idle,
		writeTimeout: writeTimeout,
		in:           make(chan []byte),
		done:         make(chan struct{}),
		streams:      map[uint64]*sseStream{0: {}},
		nextStream:   1,
		ids:          make(map[string]*sseStream),
		tokens:       make(map[string]*sseStream),
	}
	return s
}

// ReadFrame implements session.Transport.
func (s *httpSession) ReadFrame() ([]byte, uint64, error) {
	select {
	case f := <-s.in:
		return f, 0, nil
	case <-s.done:
		return nil, 0, net.ErrClosed
	}
}

// Buffered implements session.Transport: a POST hands its message over
// only when the session reads, so none is ever at hand.
func (s *httpSession) Buffered() bool { return false }

// deliver hands frame to the session; it returns once the session has read
// it.
func (s *httpSession) deliver(ctx context.Context, frame []byte) error {
	select {
	case s.in <- frame:
		return nil
	case <-s.done:
		return errSessionGone
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close implements session.Transport: the session ends, and so does every
// stream's connection.
func (s *httpSession) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		s.mu.Lock()
		if s.idleTimer != nil {
			s.idleTimer.Stop()
		}
		streams := make([]*sseStream, 0, len(s.streams))
		for _, st := range s.streams {
			streams = append(streams, st)
		}
		s.mu.Unlock()
		for _, st := range streams {
			st.end()
		}
	})
	return nil
}

func (s *httpSession) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// enter and leave bracket each request of the session; a session with none
// for its idle time expires.
func (s *httpSession) enter() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy++
	if s.idleTimer != nil {
		s.idleTimer.Stop()
	}
}

func (s *httpSession) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy--
	if s.busy > 0 || s.expire == nil {
		return
	}
	if s.idleTimer == nil {
		s.idleTimer = time.AfterFunc(s.idle, s.expireIfIdle)
	} else {
		s.idleTimer.Reset(s.idle)
	}
}

func (s *httpSession) expireIfIdle() {
	s.mu.Lock()
	idle := s.busy == 0
	s.mu.Unlock()
	if idle {
		s.expire()
	}
}

// WriteFrames implements session.Transport: each message goes to its
// stream, is kept there for resumption, and is written to the stream's
// connection if one is open. A slow connection slows the session's writer
// (and so fills its outbox); a dead one is dropped, and the message waits
// for the client to resume the stream. Frames without Data are skipped.
func (s *httpSession) WriteFrames(frames []outbox.Frame) error {
	for _, f := range frames {
		if s.closed() {
			return net.ErrClosed
		}
		if f.Data == nil {
			continue
		}
		if st, final := s.route(f.Data); st != nil {
			st.push(s, f.Data, final)
		}
	}
	return nil
}

// TryWrite implements session.Transport: writes to the streams may block,
// so they are all left to the session's writer.
func (s *httpSession) TryWrite([]outbox.Frame) (ok, more bool) { return false, false }

// route picks the stream of a message from the server side; final means it
// is the last message of that stream (its response). nil: the message
// belongs nowhere and is dropped.
func (s *httpSession) route(frame []byte) (st *sseStream, final bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if jsonrpc.IsBatch(frame) { // the answers to a batch, as one array
		elems, _ := jsonrpc.SplitBatch(frame)
		for _, el := range elems {
			if m, err := jsonrpc.Parse(el); err == nil && m.ID != nil {
				if st = s.ids[string(m.ID)]; st != nil {
					break
				}
			}
		}
		if st != nil {
			s.finishLocked(st)
		}
		return st, true
	}
	m, err := jsonrpc.Parse(frame)
	if err != nil {
		return nil, false
	}
	switch m.Kind {
	case jsonrpc.KindResult, jsonrpc.KindError:
		if m.ID == nil || string(m.ID) == "null" {
			// An error no request can be named in: a refused batch.
			for _, c := range s.streams {
				if c.batch && !c.finished && (st == nil || c.no < st.no) {
					st = c
				}
			}
			if st != nil {
				s.finishLocked(st)
			}
			return st, true
		}
		st = s.ids[string(m.ID)]
		if st == nil {
			return nil, false
		}
		delete(s.ids, string(m.ID))
		st.pending--
		if st.batch || st.pending > 0 {
			return st, false
		}
		s.finishLocked(st)
		return st, true
	case jsonrpc.KindNotification:
		if m.Method == "notifications/progress" {
			if sp, ok := m.ParamsPath("progressToken"); ok {
				if st = s.tokens[string(frame[sp.Start:sp.End])]; st != nil {
					return st, false
				}
			}
		}
	case jsonrpc.KindRequest:
		// A request from the server carries no link to the client's request
		// that caused it: it goes on a POST stream only when one POST of
		// this session waits for its response.
		if s.live == 1 {
			for _, c := range s.streams {
				if c.post && !c.finished {
					return c, false
				}
			}
		}
	}
	return s.streams[0], false
}

// finishLocked retires a POST stream: it waits for nothing more, and is
// kept a while for resumption.
func (s *httpSession) finishLocked(st *sseStream) {
	if st.finished || !st.post {
		return
	}
	st.finished = true
	s.live--
	for _, id := range st.ids {
		if s.ids[id] == st {
			delete(s.ids, id)
		}
	}
	for _, tok := range st.tokens {
		if s.tokens[tok] == st {
			delete(s.tokens, tok)
		}
	}
	s.finished = append(s.finished, st.no)
	if len(s.finished) > finishedKept {
		delete(s.streams, s.finished[0])
		s.finished = s.finished[1:]
	}
}

// openPOST registers the stream of a POST carrying requests with these ids
// and progress tokens. A duplicate is an id already waiting on the session:
// its answer could not be told apart.
func (s *httpSession) openPOST(ids, tokens []string, batch bool) (st *sseStream, duplicate string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if s.ids[id] != nil {
			return nil, id
		}
	}
	st = &sseStream{no: s.nextStream, post: true, batch: batch, tokens: tokens}
	s.nextStream++
	for _, id := range ids {
		if s.ids[id] == nil {
			s.ids[id] = st
			st.ids = append(st.ids, id)
			st.pending++
		}
	}
	for _, tok := range tokens {
		s.tokens[tok] = st
	}
	s.streams[st.no] = st
	s.live++
	return st, ""
}

// abandon retires a POST stream whose request never reached the session,
// or that the client cancelled, and ends its connection.
func (s *httpSession) abandon(st *sseStream) {
	s.mu.Lock()
	s.finishLocked(st)
	s.mu.Unlock()
	st.end()
}

// cancelled: the client cancelled request id. The session answers nothing
// to a cancelled request, so its POST stream ends once nothing else on it
// waits for an answer.
func (s *httpSession) cancelled(id string) {
	s.mu.Lock()
	st := s.ids[id]
	if st == nil {
		s.mu.Unlock()
		return
	}
	delete(s.ids, id)
	st.pending--
	done := st.pending == 0
	if done {
		s.finishLocked(st)
	}
	s.mu.Unlock()
	if done {
		st.end()
	}
}

// stream finds a stream by number.
func (s *httpSession) stream(no uint64) *sseStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[no]
}

// sseStream is one SSE stream of a session: the GET stream (number 0) or the
// stream of one POST. It keeps its last events for resumption.
type sseStream struct {
	no    uint64
	post  bool
	batch bool

	// Under the session's mu.
	ids      []string
	tokens   []string
	pending  int  // responses still due
	finished bool // its response went out, or it was abandoned

	mu        sync.Mutex
	events    []sseEvent // the newest, for resumption
	bytes     int
	delivered uint64 // number of the last event written to a connection
	ended     bool   // no more events will come
	conn      *sseConn
}

type sseEvent struct {
	no   uint64 // the session's event number
	data []byte
}

// sseConn is the HTTP response a stream is written to.
type sseConn struct {
	rw           http.ResponseWriter
	rc           *http.ResponseController
	writeTimeout time.Duration
	done         chan struct{} // closed when the stream lets go of it
	started      bool          // the headers went out
}

func newSSEConn(rw http.ResponseWriter, writeTimeout time.Duration) *sseConn {
	return &sseConn{rw: rw, rc: http.NewResponseController(rw), writeTimeout: writeTimeout, done: make(chan struct{})}
}

// eventID names event no of stream st: unique within the session, and
// naming its stream.
func eventID(st, no uint64) string {
	return strconv.FormatUint(st, 10) + "-" + strconv.FormatUint(no, 10)
}

// parseEventID undoes eventID.
func parseEventID(id string) (st, no uint64, ok bool) {
	a, b, ok := strings.Cut(id, "-")
	if !ok {
		return 0, 0, false
	}
	st, err1 := strconv.ParseUint(a, 10, 64)
	no, err2 := strconv.ParseUint(b, 10, 64)
	return st, no, err1 == nil && err2 == nil
}

// push adds an event to the stream and writes it if a connection is open;
// final ends the stream after it.
func (st *sseStream) push(s *httpSession, frame []byte, final bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	ev := sseEvent{no: s.eventNo.Add(1), data: frame}
	st.events = append(st.events, ev)
	st.bytes += len(frame)
	for len(st.events) > 1 && (len(st.events) > replayEvents || st.bytes > replayBytes) {
		st.bytes -= len(st.events[0].data)
		st.events[0] = sseEvent{}
		st.events = st.events[1:]
	}
	if st.conn != nil {
		st.writeLocked(ev)
	}
	if final {
		st.ended = true
		st.detachLocked()
	}
}

// attach makes c the stream's connection and writes it the kept events
// numbered after from. A stream that has ended lets go of c at once.
func (st *sseStream) attach(c *sseConn, from uint64) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.conn != nil {
		return errStreamBusy
	}
	st.conn = c
	for _, ev := range st.events {
		if ev.no > from && st.conn != nil {
			st.writeLocked(ev)
		}
	}
	if st.ended {
		st.detachLocked()
	}
	return nil
}

// start sends c's headers if no event has, once the session has taken the
// request.
func (st *sseStream) start(c *sseConn) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.conn == c && !c.started {
		if c.writeHeader() != nil {
			st.detachLocked()
		}
	}
}

// keepalive writes a comment line on c.
func (st *sseStream) keepalive(c *sseConn) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.conn != c || !c.started {
		return
	}
	if c.write([]byte(":\n\n")) != nil {
		st.detachLocked()
	}
}

// detach lets go of c if it is still the stream's connection.
func (st *sseStream) detach(c *sseConn) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.conn == c {
		st.detachLocked()
	}
}

// end: no more events; the connection, if any, is let go.
func (st *sseStream) end() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.ended = true
	st.detachLocked()
}

func (st *sseStream) detachLocked() {
	if st.conn != nil {
		close(st.conn.done)
		st.conn = nil
	}
}

func (st *sseStream) writeLocked(ev sseEvent) {
	c := st.conn
	var b bytes.Buffer
	b.WriteString("id: ")
	b.WriteString(eventID(st.no, ev.no))
	b.WriteString("\nevent: message\n")
	for line := range bytes.Lines(ev.data) {
		b.WriteString("data: ")
		b.Write(bytes.TrimRight(line, "\r\n"))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	if err := c.write(b.Bytes()); err != nil {
		st.detachLocked()
		return
	}
	st.delivered = max(st.delivered, ev.no)
}

func (c *sseConn) writeHeader() error {
	h := c.rw.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	c.rw.WriteHeader(http.StatusOK)
	c.started = true
	c.rc.SetWriteDeadline(time.Now().Add(c.writeTimeout))
	return c.rc.Flush()
}

func (c *sseConn) write(p []byte) error {
	if !c.started {
		if err := c.writeHeader(); err != nil {
			return err
		}
	}
	c.rc.SetWriteDeadline(time.Now().Add(c.writeTimeout))
	if _, err := c.rw.Write(p); err != nil {
		return err
	}
	return c.rc.Flush()
}

// hold serves c until the stream lets go of it, the client leaves or the
// request's context ends, with a keepalive comment now and then.
func (st *sseStream) hold(ctx context.Context, c *sseConn) {
	tick := time.NewTicker(sseKeepalive)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-ctx.Done():
			st.detach(c)
			return
		case <-tick.C:
			st.keepalive(c)
		}
	}
}

// serveStreamable answers a request that is not a WebSocket upgrade: the
// Streamable HTTP transport. The listener's checks have passed.
func (w *Web) serveStreamable(rw http.ResponseWriter, r *http.Request, name string, ep Endpoint, refuse func(int, string, ...any)) {
	switch r.Method {
	case http.MethodPost:
		w.streamablePOST(rw, r, name, ep, refuse)
	case http.MethodGet:
		if r.Header.Get(headerSessionID) == "" && !accepts(r, "text/event-stream") {
			rw.Header().Set("Upgrade", "websocket")
			refuse(http.StatusUpgradeRequired, "this endpoint speaks WebSocket and Streamable HTTP", "server", name)
			return
		}
		w.streamableGET(rw, r, name, refuse)
	case http.MethodDelete:
		s := w.httpSessionOf(r, name, refuse)
		if s == nil {
			return
		}
		w.endHTTPSession(s)
		w.log.Debug("HTTP session deleted by its client", "server", name, "http_session", s.id)
		rw.WriteHeader(http.StatusNoContent)
	default:
		rw.Header().Set("Allow", "GET, POST, DELETE")
		refuse(http.StatusMethodNotAllowed, "method not allowed", "method", r.Method)
	}
}

// httpSessionOf finds the session a request names, or answers for it: 400
// without Mcp-Session-Id or with an unsupported MCP-Protocol-Version, 404
// for a session that does not exist (or no longer does).
func (w *Web) httpSessionOf(r *http.Request, name string, refuse func(int, string, ...any)) *httpSession {
	id := r.Header.Get(headerSessionID)
	if id == "" {
		refuse(http.StatusBadRequest, "missing Mcp-Session-Id", "server", name)
		return nil
	}
	if v := r.Header.Get(headerProtocolVersion); v != "" && !supportedVersion(v) {
		refuse(http.StatusBadRequest, "unsupported MCP-Protocol-Version", "server", name, "version", v)
		return nil
	}
	w.mu.Lock()
	s := w.httpSessions[id]
	w.mu.Unlock()
	if s == nil || s.server != name || s.closed() {
		refuse(http.StatusNotFound, "no such session", "server", name)
		return nil
	}
	return s
}

func supportedVersion(v string) bool {
	for _, known := range protocolVersions {
		if v == known {
			return true
		}
	}
	return false
}

// accepts reports whether the request's Accept header admits media type
// typ ("text/event-stream"), wildcards included.
func accepts(r *http.Request, typ string) bool {
	major, _, _ := strings.Cut(typ, "/")
	for _, h := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(h, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			if mt == typ || mt == "*/*" || mt == major+"/*" {
				return true
			}
		}
	}
	return false
}

// rpcRefusal answers a POST whose body is refused with an HTTP status and a
// JSON-RPC error body.
func (w *Web) rpcRefusal(rw http.ResponseWriter, r *http.Request, status int, id json.RawMessage, e *jsonrpc.Error, name string) {
	w.log.Warn("refused a web request: "+e.Message, "peer", r.RemoteAddr, "status", status, "server", name)
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	rw.Write(e.WithServer(name).Response(id))
}

// streamablePOST serves one client message.
func (w *Web) streamablePOST(rw http.ResponseWriter, r *http.Request, name string, ep Endpoint, refuse func(int, string, ...any)) {
	if !accepts(r, "application/json") || !accepts(r, "text/event-stream") {
		refuse(http.StatusNotAcceptable, "Accept must allow application/json and text/event-stream", "server", name)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			refuse(http.StatusUnsupportedMediaType, "Content-Type must be application/json", "server", name)
			return
		}
	}
	limit := ep.MaxMessageBytes()
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	if err != nil {
		return // the client left
	}
	if len(body) > limit {
		w.rpcRefusal(rw, r, http.StatusRequestEntityTooLarge, nil, &jsonrpc.Error{
			Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("message over the limit of %d bytes", limit), Reason: jsonrpc.ReasonTooLarge,
		}, name)
		return
	}
	if !jsonrpc.Valid(body) {
		w.rpcRefusal(rw, r, http.StatusBadRequest, nil, &jsonrpc.Error{
			Code: jsonrpc.CodeParseError, Message: "parse error: not valid UTF-8 JSON", Reason: jsonrpc.ReasonParseError,
		}, name)
		return
	}
	// One line, as the server's stdin wants it; numbers and strings stay
	// byte for byte.
	var compact bytes.Buffer
	json.Compact(&compact, body)
	frame := compact.Bytes()

	// What the message is: the ids and progress tokens of its requests.
	var ids, tokens []string
	batch := jsonrpc.IsBatch(frame)
	initialize := false
	var cancelledID string
	msgs := [][]byte{frame}
	if batch {
		if msgs, err = jsonrpc.SplitBatch(frame); err != nil {
			var e *jsonrpc.Error
			errors.As(err, &e)
			w.rpcRefusal(rw, r, http.StatusBadRequest, nil, e, name)
			return
		}
	}
	for _, el := range msgs {
		m, err := jsonrpc.Parse(el)
		if err != nil {
			if batch {
				continue // answered inside the batch by the session
			}
			var e *jsonrpc.Error
			errors.As(err, &e)
			w.rpcRefusal(rw, r, http.StatusBadRequest, m.ID, e, name)
			return
		}
		switch m.Kind {
		case jsonrpc.KindRequest:
			ids = append(ids, string(m.ID))
			if sp, ok := m.ParamsPath("_meta", "progressToken"); ok {
				tokens = append(tokens, string(el[sp.Start:sp.End]))
			}
			initialize = !batch && m.Method == "initialize"
		case jsonrpc.KindNotification:
			if m.Method == "notifications/cancelled" && !batch {
				if sp, ok := m.ParamsPath("requestId"); ok {
					cancelledID = string(el[sp.Start:sp.End])
				}
			}
		}
	}

	var s *httpSession
	if initialize && r.Header.Get(headerSessionID) == "" {
		if s = w.newHTTPSession(r, name, ep, refuse); s == nil {
			return
		}
		rw.Header().Set(headerSessionID, s.id)
	} else if s = w.httpSessionOf(r, name, refuse); s == nil {
		return
	}
	s.enter()
	defer s.leave()

	if len(ids) == 0 { // notifications and responses: 202 once taken
		if err := s.deliver(r.Context(), frame); err != nil {
			if errors.Is(err, errSessionGone) {
				refuse(http.StatusNotFound, "no such session", "server", name)
			}
			return
		}
		if cancelledID != "" {
			s.cancelled(cancelledID)
		}
		rw.WriteHeader(http.StatusAccepted)
		return
	}

	st, dup := s.openPOST(ids, tokens, batch)
	if st == nil {
		rw.Header().Set("Content-Type", "application/json")
		rw.Write((&jsonrpc.Error{
			Code: jsonrpc.CodeInvalidRequest, Message: "request id " + dup + " is already in flight on this session",
			Reason: jsonrpc.ReasonDuplicateID, Server: name,
		}).Response(json.RawMessage(dup)))
		return
	}
	c := newSSEConn(rw, s.writeTimeout)
	st.attach(c, 0) // empty yet: the session has not seen the request
	if err := s.deliver(r.Context(), frame); err != nil {
		s.abandon(st)
		if errors.Is(err, errSessionGone) {
			refuse(http.StatusNotFound, "no such session", "server", name)
		}
		return
	}
	st.start(c)
	st.hold(r.Context(), c)
}

// streamableGET opens the session's GET stream, or resumes the stream that
// Last-Event-ID names.
func (w *Web) streamableGET(rw http.ResponseWriter, r *http.Request, name string, refuse func(int, string, ...any)) {
	if !accepts(r, "text/event-stream") {
		refuse(http.StatusNotAcceptable, "Accept must allow text/event-stream", "server", name)
		return
	}
	s := w.httpSessionOf(r, name, refuse)
	if s == nil {
		return
	}
	s.enter()
	defer s.leave()
	var no, from uint64
	resume := r.Header.Get(headerLastEventID)
	if resume != "" {
		var ok bool
		if no, from, ok = parseEventID(resume); !ok {
			refuse(http.StatusBadRequest, "Last-Event-ID is not one of this session's", "server", name)
			return
		}
	}
	st := s.stream(no)
	c := newSSEConn(rw, s.writeTimeout)
	if st == nil { // a POST stream forgotten long ago: nothing more will come
		c.writeHeader()
		return
	}
	if resume == "" {
		st.mu.Lock()
		from = st.delivered // what never reached the client
		st.mu.Unlock()
	}
	if err := st.attach(c, from); err != nil {
		refuse(http.StatusConflict, "the stream is already open", "server", name)
		return
	}
	st.start(c)
	st.hold(r.Context(), c)
}

// newHTTPSession starts a session for an initialize request: 503 when the
// server is full or the listener is shutting down.
func (w *Web) newHTTPSession(r *http.Request, name string, ep Endpoint, refuse func(int, string, ...any)) *httpSession {
	if ep.Full() {
		refuse(http.StatusServiceUnavailable, "the server has its maximum of sessions", "server", name)
		return nil
	}
	idle := w.cfg.HTTPSessionIdle
	if idle <= 0 {
		idle = DefaultHTTPSessionIdle
	}
	wt := w.cfg.WriteTimeout
	if wt <= 0 {
		wt = sseWriteTimout
	}
	s := newHTTPSession(name, idle, wt)
	s.expire = func() {
		w.log.Debug("HTTP session expired", "server", name, "http_session", s.id, "idle", idle)
		w.endHTTPSession(s)
	}
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		refuse(http.StatusServiceUnavailable, "shutting down", "server", name)
		return nil
	}
	if w.httpSessions == nil {
		w.httpSessions = make(map[string]*httpSession)
	}
	w.httpSessions[s.id] = s
	w.active.Add(1)
	w.mu.Unlock()

	// The session outlives this request; the listener ends it at shutdown.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	peer := session.Peer{Transport: "http", Addr: r.RemoteAddr}
	go func() { // owned by Serve, which waits on w.active
		defer w.active.Done()
		defer cancel()
		err := ep.Serve(ctx, s, peer)
		w.endHTTPSession(s)
		w.log.Debug("HTTP session ended", "server", name, "peer", peer.Addr, "error", err)
	}()
	return s
}

// endHTTPSession forgets s and closes it; its requests still in flight are
// cancelled at the server by the session's end.
func (w *Web) endHTTPSession(s *httpSession) {
	w.mu.Lock()
	if w.httpSessions[s.id] == s {
		delete(w.httpSessions, s.id)
	}
	w.mu.Unlock()
	s.Close()
}

// closeHTTPSessions ends every HTTP session, at shutdown.
func (w *Web) closeHTTPSessions() {
	w.mu.Lock()
	all := w.httpSessions
	w.httpSessions = nil
	w.mu.Unlock()
	for _, s := range all {
		s.Close()
	}
}
