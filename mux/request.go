package mux

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// A session's requests and notifications: answered here, or forwarded to
// the server under a fresh id.

func (c *client) handleRequest(m *jsonrpc.Message, out sink) {
	switch m.Method {
	case "ping":
		out.reply(jsonrpc.Response(m.ID, emptyResult))
		return
	case "initialize":
		c.handleInitialize(m, out)
		return
	case "server/discover":
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "server/discover is not supported; use initialize", Reason: jsonrpc.ReasonNotSupported})
		return
	}
	if !c.isInitialized() {
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "session not initialized: send initialize first", Reason: jsonrpc.ReasonNotInitialized})
		return
	}
	if !c.handleState(m, out) {
		c.forward(m, out, nil)
	}
}

// handleState serves the requests whose state mcpmux keeps per session;
// false means the request is the server's to answer.
func (c *client) handleState(m *jsonrpc.Message, out sink) bool {
	info := c.h.describedServer()
	switch m.Method {
	case "resources/subscribe":
		if info != nil && info.hasPath("resources", "subscribe") {
			c.subscribe(m, out)
			return true
		}
	case "resources/unsubscribe":
		if info != nil && info.hasPath("resources", "subscribe") {
			c.unsubscribe(m, out)
			return true
		}
	case "logging/setLevel":
		if info != nil && info.has("logging") {
			c.setLevel(m, out)
			return true
		}
	case "tasks/get", "tasks/result", "tasks/cancel":
		if !c.ownsTask(m) {
			c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no such task in this session", Reason: jsonrpc.ReasonUnknownTask})
			return true
		}
	case "tasks/list":
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tasks/list is not offered through mcpmux: the server would list every session's tasks", Reason: jsonrpc.ReasonNotSupported})
		return true
	}
	return false
}

func (c *client) handleInitialize(m *jsonrpc.Message, out sink) {
	if c.isInitialized() {
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
	_, info, err := c.h.waitReady(c)
	if err != nil {
		c.failWith(out, m.ID, err)
		return
	}
	version := info.negotiate(p.ProtocolVersion)
	body, err := info.forSession(version)
	if err != nil {
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "cannot build the initialize result: " + err.Error(), Reason: jsonrpc.ReasonInternal})
		return
	}
	c.initializedAs(version, p.Capabilities, p.ClientInfo)
	c.sess.Logger().Info("session initialized", "protocol", version, "client", string(p.ClientInfo))
	out.reply(jsonrpc.Response(m.ID, body))
}

// waitReady waits, for a session, until the server is ready.
func (h *Hub) waitReady(c *client) (process, *serverInfo, error) {
	return h.life.waitReady(c.ctx, h.cfg.Name, h.cfg.StartTimeout)
}

// forward sends a session's request to the server under a fresh id, with its
// progress token replaced by that id. after, if not nil, sees the answer
// before the session does (nil when none will come from the server).
func (c *client) forward(m *jsonrpc.Message, out sink, after func(*jsonrpc.Message)) {
	proc, _, err := c.h.waitReady(c)
	if err != nil {
		c.failWith(out, m.ID, err)
		return
	}
	route, tokSpan, data := c.routeOf(m, out, after)
	c.sess.Begin()
	up, err := c.h.reqs.Add(route)
	if err != nil { // idmap.ErrDuplicate, the only error Add returns
		c.sess.End()
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "request id " + string(m.ID) + " is already in flight on this session", Reason: jsonrpc.ReasonDuplicateID})
		return
	}
	upID := []byte(strconv.FormatInt(up, 10))
	idSpan, _ := m.IDSpan()
	edits := []jsonrpc.Edit{{Span: idSpan, Value: upID}}
	if route.Token != nil {
		edits = append(edits, jsonrpc.Edit{Span: tokSpan, Value: upID})
	}
	frame := jsonrpc.Splice(m.Frame, edits...)
	out.pending()
	if data != nil {
		data.up.Store(up)
	}
	if c.h.cfg.RequestTimeout > 0 {
		data.timer.Store(time.AfterFunc(c.h.cfg.RequestTimeout, func() { c.h.timeout(up) }))
	}
	if data != nil && data.serial && !c.h.turn.acquire(up, frame) {
		return // waits: sent when the interactive request before it ends
	}
	if err := c.sendUp(proc, frame); err != nil {
		if r, ok := c.h.reqs.Take(up); ok {
			c.h.fail(r, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("server cannot take the request: %v", err), Reason: jsonrpc.ReasonUpstreamUnavailable})
		}
	}
}

// routeOf is the route of a request about to be forwarded, the span of its
// progress token (when route.Token is set), and what the hub keeps with the
// route beyond the table's fields (nil when nothing).
func (c *client) routeOf(m *jsonrpc.Message, out sink, after func(*jsonrpc.Message)) (idmap.Route, jsonrpc.Span, *routeData) {
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
		// A token MCP allows (a string or a number) is replaced; anything
		// else passes as it is.
		if tok := m.Frame[tokSpan.Start:tokSpan.End]; tok[0] == '"' || (tok[0] >= '0' && tok[0] <= '9') || tok[0] == '-' {
			route.Token = tok
		}
	}
	return route, tokSpan, data
}

// deliver sends the answer to one of this session's requests and counts the
// request out of flight.
func (c *client) deliver(r idmap.Route, frame []byte, ans *jsonrpc.Message) {
	c.deliverWith(r, frame, ans, c.sess.Send)
}

// deliverWith is deliver with the session's Send or SendLater.
func (c *client) deliverWith(r idmap.Route, frame []byte, ans *jsonrpc.Message, send func([]byte) error) {
	d := dataOf(r)
	if d != nil && d.after != nil {
		d.after(ans)
	}
	if b := d.settle(); b != nil {
		b.reply(frame)
		b.done()
	} else {
		send(frame)
	}
	c.sess.End()
}

// settle counts out of flight a request that gets no answer (cancelled).
func (c *client) settle(r idmap.Route) {
	d := dataOf(r)
	if d != nil && d.after != nil {
		d.after(nil)
	}
	if b := d.settle(); b != nil {
		b.done()
	}
	c.sess.End()
}

// routeData is what the hub keeps with a route beyond the table's fields.
type routeData struct {
	batch *batch                     // the batch the request came in, if any
	timer atomic.Pointer[time.Timer] // its request_timeout, if any
	after func(*jsonrpc.Message)     // sees the answer first (subscriptions)

	h      *Hub         // for serial: the turn to release
	up     atomic.Int64 // its upstream id, once known
	serial bool
}

func dataOf(r idmap.Route) *routeData {
	d, _ := r.Data.(*routeData)
	return d
}

// settle stops the request's timer, ends its turn, and returns its batch;
// nil-safe.
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
	if proc := h.life.current(); proc != nil {
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
		c.markReady()
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
	if !c.isInitialized() {
		c.sess.Logger().Debug("dropped a notification sent before initialize", "method", m.Method)
		return
	}
	if proc := c.h.life.current(); proc != nil {
		proc.Send(m.Frame)
	}
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
	if proc := c.h.life.current(); proc != nil {
		proc.Send(jsonrpc.Splice(m.Frame, jsonrpc.Edit{Span: span, Value: []byte(strconv.FormatInt(up, 10))}))
	}
}
