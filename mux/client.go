package mux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
)

// client is the hub's side of one session: the MCP state the protocol keeps
// per connection, which mcpmux must keep per session.
type client struct {
	h    *Hub
	sess *session.Session
	ctx  context.Context

	mu          sync.Mutex
	initialized bool // answered its initialize
	ready       bool // sent notifications/initialized
	version     string
	clientInfo  json.RawMessage
	caps        json.RawMessage
	parsedCaps  caps
	nextSrvID   int64  // ids of the requests mcpmux sends this session; never reused
	logLevel    string // set by logging/setLevel; "" until then
	roots       []root // its roots, when mcpmux gathers them

	// held is the process to which the session's read goroutine, alone,
	// has queued requests with SendLater since its last Flush.
	held process
}

func (c *client) capabilities() caps {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parsedCaps
}

func (c *client) status() SessionStatus {
	st := c.sess.Stats()
	peer := c.sess.Peer()
	c.mu.Lock()
	defer c.mu.Unlock()
	var info struct {
		Name string `json:"name"`
	}
	json.Unmarshal(c.clientInfo, &info)
	return SessionStatus{
		ID:        c.sess.ID(),
		Transport: peer.Transport,
		Peer:      peer.Addr,
		Client:    info.Name,
		Protocol:  c.version,
		Age:       time.Since(st.Started).Round(time.Second).String(),
		Inflight:  st.Inflight,
		BytesIn:   st.BytesIn,
		BytesOut:  st.BytesOut,
	}
}

func (c *client) isReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// ErrTooManySessions: the server has max_sessions sessions already.
var ErrTooManySessions = errors.New("mux: too many sessions")

// Full reports whether the server has max_sessions sessions already, for
// transports that refuse before they accept (HTTP 503).
func (h *Hub) Full() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cfg.MaxSessions > 0 && len(h.clients) >= h.cfg.MaxSessions
}

// Serve runs a session on this hub until it ends, then cancels upstream what
// it left in flight. A session over max_sessions gets one error line and is
// closed.
func (h *Hub) Serve(ctx context.Context, t session.Transport, peer session.Peer) error {
	cfg := h.cfg.Session
	cfg.ID = h.ids.Add(1)
	cfg.Logger = h.log
	cfg.Peer = peer
	sess := session.New(cfg, t)
	c := &client{h: h, sess: sess, ctx: ctx}
	h.mu.Lock()
	if h.cfg.MaxSessions > 0 && len(h.clients) >= h.cfg.MaxSessions {
		h.mu.Unlock()
		h.log.Warn("refused a session: max_sessions reached", "session", cfg.ID, "transport", peer.Transport, "peer", peer.Addr, "max_sessions", h.cfg.MaxSessions)
		e := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("server %s has its maximum of %d sessions", h.cfg.Name, h.cfg.MaxSessions), Reason: jsonrpc.ReasonTooManySessions, Server: h.cfg.Name}
		t.WriteFrames([]outbox.Frame{{Data: e.Response(nil)}})
		t.Close()
		return ErrTooManySessions
	}
	h.clients[cfg.ID] = c
	h.mu.Unlock()
	notify(h.sessions)
	if h.cfg.Lazy || h.cfg.IdleTimeout > 0 {
		notify(h.demand)
	}
	sess.Logger().Debug("session attached", "transport", peer.Transport, "peer", peer.Addr)

	err := sess.Run(ctx, c)

	h.mu.Lock()
	delete(h.clients, cfg.ID)
	h.mu.Unlock()
	notify(h.sessions)
	h.detach(c)
	sess.Logger().Debug("session ended", "reason", sess.Err())
	if errors.Is(err, session.ErrClosed) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// detach cancels upstream every request a departed session left in flight.
func (h *Hub) detach(c *client) {
	id := c.sess.ID()
	h.mu.Lock()
	proc := h.proc
	h.mu.Unlock()
	routes := h.reqs.DropSession(id)
	for up, r := range routes {
		dataOf(r).settle()
		if proc != nil {
			proc.Send(cancelFrame(up, "client disconnected"))
		}
	}
	if len(routes) > 0 {
		c.sess.Logger().Debug("cancelled requests of a departed session", "count", len(routes))
	}
	h.dropServerReqs(id)
	h.dropSubscriptions(id, proc)
	h.dropTasks(id, proc)
	h.updateLogLevel()
	h.rootsChanged()
}

func cancelFrame(up int64, reason string) []byte {
	n, _ := jsonrpc.Notification("notifications/cancelled", map[string]any{"requestId": up, "reason": reason})
	return n
}

// WaitRoom implements session.Handler: a session reads on only while the
// server's write queue has room.
func (c *client) WaitRoom(ctx context.Context) error {
	c.h.mu.Lock()
	proc := c.h.proc
	c.h.mu.Unlock()
	if proc == nil {
		return nil
	}
	if err := proc.WaitWritable(ctx); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

// sendUp sends a request to the server from the session's read goroutine.
// It is held back while the session has more frames at hand, and Flush
// sends the run in one write.
func (c *client) sendUp(proc process, frame []byte) error {
	if c.held != nil && c.held != proc {
		c.held.Flush() // the server was replaced mid-run
	}
	c.held = proc
	return proc.SendLater(frame)
}

// Flush implements session.Handler.
func (c *client) Flush() {
	if c.held != nil {
		c.held.Flush()
		c.held = nil
	}
}

// HandleMessage implements session.Handler. The tag is not used yet.
func (c *client) HandleMessage(s *session.Session, m *jsonrpc.Message, _ uint64) {
	c.handle(m, c)
}

// sink is where the answers to a message go: the session, or the batch the
// message came in.
type sink interface {
	reply(frame []byte)
	// pending counts an answer that will come later (a forwarded request).
	pending()
}

func (c *client) reply(frame []byte) { c.sess.Send(outbox.Frame{Data: frame}) }
func (c *client) pending()           {}

func (c *client) fail(out sink, id json.RawMessage, e *jsonrpc.Error) {
	out.reply(e.WithServer(c.h.cfg.Name).Response(id))
}

func (c *client) handle(m *jsonrpc.Message, out sink) {
	switch m.Kind {
	case jsonrpc.KindRequest:
		c.handleRequest(m, out)
	case jsonrpc.KindNotification:
		c.handleNotification(m)
	default:
		c.answerFromSession(m)
	}
}

func (c *client) handleRequest(m *jsonrpc.Message, out sink) {
	switch m.Method {
	case "ping":
		out.reply(jsonrpc.Response(m.ID, json.RawMessage("{}")))
		return
	case "initialize":
		c.handleInitialize(m, out)
		return
	case "server/discover":
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "server/discover is not supported; use initialize", Reason: jsonrpc.ReasonNotSupported})
		return
	}
	c.mu.Lock()
	initialized := c.initialized
	c.mu.Unlock()
	if !initialized {
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "session not initialized: send initialize first", Reason: jsonrpc.ReasonNotInitialized})
		return
	}
	res := c.h.initResult()
	switch m.Method {
	case "resources/subscribe":
		if res != nil && res.hasPath("resources", "subscribe") {
			c.subscribe(m, out)
			return
		}
	case "resources/unsubscribe":
		if res != nil && res.hasPath("resources", "subscribe") {
			c.unsubscribe(m, out)
			return
		}
	case "logging/setLevel":
		if res != nil && res.has("logging") {
			c.setLevel(m, out)
			return
		}
	case "tasks/get", "tasks/result", "tasks/cancel":
		if !c.ownsTask(m) {
			c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no such task in this session", Reason: jsonrpc.ReasonUnknownTask})
			return
		}
	case "tasks/list":
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tasks/list is not offered through mcpmux: the server would list every session's tasks", Reason: jsonrpc.ReasonNotSupported})
		return
	}
	c.forward(m, out, nil)
}

func (c *client) handleInitialize(m *jsonrpc.Message, out sink) {
	c.mu.Lock()
	already := c.initialized
	c.mu.Unlock()
	if already {
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "session already initialized", Reason: jsonrpc.ReasonAlreadyInitialized})
		return
	}
	var p struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ClientInfo      json.RawMessage `json:"clientInfo"`
	}
	if m.Params != nil && m.Params[0] == '{' {
		if err := json.Unmarshal(m.Params, &p); err != nil {
			c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid initialize params: " + err.Error(), Reason: jsonrpc.ReasonInvalidRequest})
			return
		}
	}
	_, res, err := c.h.waitReady(c.ctx)
	if err != nil {
		var e *jsonrpc.Error
		if errors.As(err, &e) {
			c.fail(out, m.ID, e)
		}
		return
	}
	version := res.negotiate(p.ProtocolVersion)
	body, err := res.forSession(version)
	if err != nil {
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "cannot build the initialize result: " + err.Error(), Reason: jsonrpc.ReasonInternal})
		return
	}
	c.mu.Lock()
	c.initialized, c.version, c.caps, c.clientInfo = true, version, p.Capabilities, p.ClientInfo
	c.parsedCaps = parseCaps(p.Capabilities)
	c.mu.Unlock()
	c.sess.Logger().Info("session initialized", "protocol", version, "client", string(p.ClientInfo))
	out.reply(jsonrpc.Response(m.ID, body))
}

// forward sends a session's request to the server under a fresh id, with its
// progress token replaced by that id. after, if not nil, sees the answer
// before the session does (nil when none will come from the server).
func (c *client) forward(m *jsonrpc.Message, out sink, after func(*jsonrpc.Message)) {
	proc, _, err := c.h.waitReady(c.ctx)
	if err != nil {
		var e *jsonrpc.Error
		if errors.As(err, &e) {
			c.fail(out, m.ID, e)
		}
		return
	}
	route := idmap.Route{Session: c.sess.ID(), ID: m.ID, Method: m.Method, Started: time.Now()}
	_, route.Task = m.ParamsPath("task")
	var data *routeData
	serial := c.h.cfg.ServerRequests == "serialize" && interactive(m.Method)
	if b, ok := out.(*batch); ok || c.h.cfg.RequestTimeout > 0 || after != nil || serial {
		// Set before the route is published: other goroutines settle it.
		data = &routeData{batch: b, after: after, h: c.h, serial: serial}
		route.Data = data
	}
	tokSpan, hasToken := m.ParamsPath("_meta", "progressToken")
	if hasToken {
		tok := m.Frame[tokSpan.Start:tokSpan.End]
		if tok[0] == '"' || (tok[0] >= '0' && tok[0] <= '9') || tok[0] == '-' {
			route.Token = tok
		} else {
			hasToken = false // not a token MCP allows; pass it as it is
		}
	}
	c.sess.Begin()
	up, err := c.h.reqs.Add(route)
	if errors.Is(err, idmap.ErrDuplicate) {
		c.sess.End()
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "request id " + string(m.ID) + " is already in flight on this session", Reason: jsonrpc.ReasonDuplicateID})
		return
	}
	upID := []byte(strconv.FormatInt(up, 10))
	idSpan, _ := m.IDSpan()
	edits := []jsonrpc.Edit{{Span: idSpan, Value: upID}}
	if hasToken {
		edits = append(edits, jsonrpc.Edit{Span: tokSpan, Value: upID})
	}
	frame := jsonrpc.Splice(m.Frame, edits...)
	out.pending()
	if c.h.cfg.RequestTimeout > 0 {
		data.timer.Store(time.AfterFunc(c.h.cfg.RequestTimeout, func() { c.h.timeout(up) }))
	}
	if serial {
		data.up.Store(up)
		if !c.h.acquire(up, frame) {
			return // queued: sent when the interactive request before it ends
		}
	}
	if err := c.sendUp(proc, frame); err != nil {
		if r, ok := c.h.reqs.Take(up); ok {
			c.h.fail(r, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("server cannot take the request: %v", err), Reason: jsonrpc.ReasonUpstreamUnavailable})
		}
	}
}

// deliver sends the answer to one of this session's requests and counts the
// request out of flight.
func (c *client) deliver(r idmap.Route, frame []byte, ans *jsonrpc.Message) {
	c.deliverWith(r, frame, ans, c.sess.Send)
}

// deliverWith is deliver with the session's Send or SendLater.
func (c *client) deliverWith(r idmap.Route, frame []byte, ans *jsonrpc.Message, send func(outbox.Frame) error) {
	if d := dataOf(r); d != nil && d.after != nil {
		d.after(ans)
	}
	if b := dataOf(r).settle(); b != nil {
		b.reply(frame)
		b.done()
	} else {
		send(outbox.Frame{Data: frame})
	}
	c.sess.End()
}

// settle counts out of flight a request that gets no answer (cancelled).
func (c *client) settle(r idmap.Route) {
	if d := dataOf(r); d != nil && d.after != nil {
		d.after(nil)
	}
	if b := dataOf(r).settle(); b != nil {
		b.done()
	}
	c.sess.End()
}

// routeData is what the hub keeps with a route beyond the table's fields.
type routeData struct {
	batch *batch                     // the batch the request came in, if any
	timer atomic.Pointer[time.Timer] // its request_timeout, if any
	after func(*jsonrpc.Message)     // sees the answer first (subscriptions)

	h      *Hub         // for serial: the slot to release
	up     atomic.Int64 // its upstream id, once known
	serial bool
}

func dataOf(r idmap.Route) *routeData {
	d, _ := r.Data.(*routeData)
	return d
}

// settle stops the request's timer and returns its batch; nil-safe.
func (d *routeData) settle() *batch {
	if d == nil {
		return nil
	}
	if t := d.timer.Load(); t != nil {
		t.Stop()
	}
	if d.serial {
		d.h.release(d.up.Load())
	}
	return d.batch
}

// timeout fails a request that outlived request_timeout and cancels it
// upstream, unless its answer won the race.
func (h *Hub) timeout(up int64) {
	r, ok := h.reqs.Take(up)
	if !ok {
		return
	}
	h.mu.Lock()
	proc := h.proc
	h.mu.Unlock()
	if proc != nil {
		proc.Send(cancelFrame(up, "timeout"))
	}
	h.fail(r, &jsonrpc.Error{
		Code:    jsonrpc.CodeInternalError,
		Message: fmt.Sprintf("no answer within request_timeout (%s); the request was cancelled", h.cfg.RequestTimeout),
		Reason:  jsonrpc.ReasonTimeout,
	})
}

func (c *client) handleNotification(m *jsonrpc.Message) {
	switch m.Method {
	case "notifications/initialized":
		c.mu.Lock()
		c.ready = c.initialized
		c.mu.Unlock()
		c.h.refreshRoots(c)
		return
	case "notifications/roots/list_changed":
		if c.h.declaresRoots() {
			c.h.refreshRoots(c) // mcpmux answers roots itself; the server hears of the union
			return
		}
	case "notifications/cancelled":
		c.handleCancel(m)
		return
	}
	c.mu.Lock()
	initialized := c.initialized
	c.mu.Unlock()
	if !initialized {
		c.sess.Logger().Debug("dropped a notification sent before initialize", "method", m.Method)
		return
	}
	c.h.mu.Lock()
	proc := c.h.proc
	c.h.mu.Unlock()
	if proc == nil {
		return
	}
	proc.Send(m.Frame)
}

// handleCancel translates a session's cancellation of its own request. A
// cancellation of anything else is dropped: a session cannot cancel another
// session's request, whatever id it names.
func (c *client) handleCancel(m *jsonrpc.Message) {
	span, ok := m.ParamsPath("requestId")
	if !ok {
		return
	}
	id := m.Frame[span.Start:span.End]
	up, r, ok := c.h.reqs.Cancel(c.sess.ID(), id)
	if !ok {
		c.sess.Logger().Debug("dropped a cancellation of a request not in flight", "id", string(id))
		return
	}
	c.settle(r)
	c.h.mu.Lock()
	proc := c.h.proc
	c.h.mu.Unlock()
	if proc != nil {
		proc.Send(jsonrpc.Splice(m.Frame, jsonrpc.Edit{Span: span, Value: []byte(strconv.FormatInt(up, 10))}))
	}
}
