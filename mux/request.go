package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/metrics"
	"github.com/mcpmux/mcpmux/outbox"
)

// A session's requests and notifications: answered here, or forwarded to
// the server under a fresh id.

func (c *client) handleRequest(msg *jsonrpc.Message, out sink) {
	req := viewOf(msg)
	m := &req
	switch m.Method {
	case "ping":
		if _, modern := envelopeOf(m); !modern && c.sessionEra() != eraModern {
			out.reply(jsonrpc.Response(m.ID, emptyResult))
			return
		} // else removed in 2026-07-28: handleModern refuses it
	case "initialize":
		aside(func() { c.handleInitialize(msg, out) })
		return
	case "server/discover":
		c.handleDiscover(msg, out)
		return
	}
	env, enveloped := envelopeOf(m)
	if enveloped || c.sessionEra() != eraUnknown {
		// Both eras: a tool the server's view hides is unknown, and the
		// server never sees the call.
		if e := c.h.view.load().refusal(m); e != nil {
			c.fail(out, m.ID, e)
			return
		}
	}
	switch c.sessionEra() {
	case eraModern:
		c.handleModern(m, env, enveloped, out)
	case eraLegacy:
		c.handleLegacy(m, out)
	default:
		if enveloped {
			c.becomeModern(env.info)
			c.logModern(env)
			c.handleModern(m, env, true, out)
			return
		}
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "session not initialized: send initialize first (or a request with the 2026-07-28 _meta envelope)", Reason: jsonrpc.ReasonNotInitialized})
	}
}

// logModern logs a session's becoming modern: news for a session that
// lives on, and for one of one request (one a request) a debug line on
// the hub's logger, which makes no logger of the session's own.
func (c *client) logModern(env envelope) {
	if !c.sess.Peer().OneRequest {
		c.sess.Logger().Info("session initialized", "protocol", env.version, "era", eraModern, "client", string(env.info))
		return
	}
	if c.h.log.Enabled(context.Background(), slog.LevelDebug) {
		c.h.log.Debug("session initialized", "session", c.sess.ID(), "protocol", env.version, "era", eraModern, "client", string(env.info))
	}
}

// handleLegacy serves a request of an initialized legacy session.
func (c *client) handleLegacy(m *message, out sink) {
	info := c.h.describedServer()
	if info != nil && c.h.bridgeOf(pairOf(eraLegacy, info.era)).serve(c, *m, info, out) {
		return
	}
	if c.listFromMemory(m, info, out) {
		return
	}
	if !c.handleState(m, info, out) {
		c.forward(m, out, fwd{after: c.listObserver(m)})
	}
}

// handleState serves the requests whose state mcpmux keeps per legacy
// session, as the server described by info (nil: not yet) allows; false
// means the request is the server's to answer.
func (c *client) handleState(m *message, info *serverInfo, out sink) bool {
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
			c.setLevel(m.Message, out)
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
	switch c.sessionEra() {
	case eraLegacy:
		// Some clients open their session again on the same connection
		// (FastMCP does on every re-entry), as a server they spawned would
		// let them: answered again, with what the session declares now.
		c.sess.Logger().Debug("session initialized again")
	case eraModern:
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "this session speaks 2026-07-28 (it sent requests with the _meta envelope): initialize has no place in it", Reason: jsonrpc.ReasonInvalidRequest})
		return
	}
	p, err := initializeParams(m.Params)
	if err != nil {
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid initialize params: " + err.Error(), Reason: jsonrpc.ReasonInvalidRequest})
		return
	}
	info, err := c.description()
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
	c.sess.Logger().Info("session initialized", "protocol", version, "client", string(p.ClientInfo), "server_era", info.era.String())
	out.reply(jsonrpc.Response(m.ID, body))
}

// initParams are what mcpmux reads of an initialize request's params.
type initParams struct {
	ProtocolVersion string
	Capabilities    json.RawMessage // copies, kept for the session's life
	ClientInfo      json.RawMessage
}

// initializeParams reads params (valid JSON, as a parsed message's are) by
// scanning them, as the rest of a session's path reads frames: a session's
// goroutine, which an idle session keeps, never grows its stack for
// encoding/json's recursive decoder (nor a log attribute for fmt's). Params
// that are not an object read as none.
func initializeParams(params []byte) (p initParams, err error) {
	if len(params) == 0 || params[0] != '{' {
		return p, nil
	}
	var spans [3]jsonrpc.Span
	found := jsonrpc.FindMembers(params, initParamNames, spans[:])
	raw := func(i int) []byte {
		if found&(1<<i) == 0 {
			return nil
		}
		return params[spans[i].Start:spans[i].End]
	}
	if v := raw(0); v != nil && string(v) != "null" {
		s, ok := jsonrpc.Unquote(v)
		if !ok {
			return p, fmt.Errorf("protocolVersion is %.40s, not a string", v)
		}
		p.ProtocolVersion = s
	}
	p.Capabilities, p.ClientInfo = bytes.Clone(raw(1)), bytes.Clone(raw(2))
	return p, nil
}

var initParamNames = []string{"protocolVersion", "capabilities", "clientInfo"}

// description is what the session's initialize or discover is answered
// from.
func (c *client) description() (info *serverInfo, err error) {
	h := c.h
	if info, ok := h.life.describedNow(); ok {
		return info, nil
	}
	c.use() // nothing remembered: the server is wanted to say
	err = c.sess.Await(c.ctx, func(ctx context.Context) error {
		info, err = h.life.description(ctx, h.cfg.Name, h.startWait())
		return err
	})
	return info, err
}

// waitReady waits, for a session, until the server is ready. The wait
// holds up the session's reading, so it watches for the client leaving
// meanwhile (session.Await): a session that leaves while its server
// starts is gone at once.
func (c *client) waitReady() (proc process, info *serverInfo, err error) {
	h := c.h
	c.use()
	if proc, info, ok := h.life.readyNow(); ok {
		return proc, info, nil
	}
	err = c.sess.Await(c.ctx, func(ctx context.Context) error {
		proc, info, err = h.life.waitReady(ctx, h.cfg.Name, h.startWait())
		return err
	})
	return proc, info, err
}

// fwd is how a request is forwarded, beyond the request itself.
type fwd struct {
	after  func(*jsonrpc.Message) // sees the answer before the session does (nil when none will come)
	modern *modernReq             // what a modern session's request declared; nil for a legacy session
	level  string                 // the log level a modern request asks for; "" none
	listen bool                   // subscriptions/listen: long-lived, not counted in flight
}

// forward sends a session's request to the server under a fresh id, with its
// progress token replaced by that id, and its envelope as the server's era
// needs it: taken out for a legacy server, put in (from the session's
// initialize) for a modern one.
func (c *client) forward(m *message, out sink, f fwd) {
	proc, info, err := c.waitReady()
	if err != nil {
		c.failWith(out, m.ID, err)
		return
	}
	pair := pairOf(c.sessionEra(), info.era)
	route, tokSpan, data := c.routeOf(m, out, f, pair)
	if !f.listen {
		c.sess.Begin()
	}
	up, err := c.h.flights.begin(route)
	if err != nil { // idmap.ErrDuplicate, the only error Add returns
		if !f.listen {
			c.sess.End()
		}
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "request id " + string(m.ID) + " is already in flight on this session", Reason: jsonrpc.ReasonDuplicateID})
		return
	}
	frame := jsonrpc.Splice(m.Frame, c.edits(m, pair, up, route.Token != nil, tokSpan)...)
	if taps := c.h.cfg.Taps.active(); taps != nil {
		c.h.cfg.Taps.tell(taps, c.h.cfg.Name, c, TapEvent{Dir: "up", Kind: "request", Method: m.Method, ID: slices.Clone(m.ID), UpstreamID: upID(up)}, frame)
	}
	out.pending()
	if data != nil && data.retry != nil {
		data.retry.frame = frame
	}
	if !c.h.flights.admit(queued{session: route.Session, up: up, frame: frame, d: data}) {
		return // waits at a gate, sent when a slot frees; or already failed
	}
	if err := c.sendUp(proc, frame); err != nil {
		if r, ok := c.h.flights.take(up); ok {
			c.h.fail(r, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("server cannot take the request: %v", err), Reason: jsonrpc.ReasonUpstreamUnavailable})
		}
		return
	}
	c.h.flights.sent(up, data)
}

// edits are the rewrites of a forwarded request: its id, its progress
// token, and its envelope as the pairing needs.
func (c *client) edits(m *message, pair pairing, up int64, hasToken bool, tokSpan jsonrpc.Span) []jsonrpc.Edit {
	// One allocation holds the edits and the id they write.
	buf := new(struct {
		edits [5]jsonrpc.Edit
		id    [20]byte
	})
	upID := strconv.AppendInt(buf.id[:0], up, 10)
	idSpan, _ := m.IDSpan()
	edits := buf.edits[:1]
	edits[0] = jsonrpc.Edit{Span: idSpan, Value: upID}
	if hasToken {
		edits = append(edits, jsonrpc.Edit{Span: tokSpan, Value: upID})
	}
	meta, _ := m.p.meta(m.Frame)
	return c.h.bridgeOf(pair).rewrite(c, m.Message, meta, edits)
}

// routeOf is the route of a request about to be forwarded, the span of its
// progress token (when route.Token is set), and what the hub keeps with the
// route beyond the table's fields (nil when nothing).
func (c *client) routeOf(m *message, out sink, f fwd, pair pairing) (idmap.Route, jsonrpc.Span, *routeData) {
	route := idmap.Route{Session: c.sess.ID(), ID: m.ID, Method: m.Method, Tag: out.tag(), Started: time.Now()}
	_, route.Task = m.p.param(pTask)
	kind := ""
	if interactive(m.Method) && c.h.flights.turn.policy == ServerRequestsAuto {
		kind = kindOf(m)
	}
	serial := c.h.flights.takesTurn(m.Method, kind)
	limited := c.h.flights.limit.max > 0 && !f.listen
	b, inBatch := out.(*batch)
	var data *routeData
	if inBatch || c.h.cfg.RequestTimeout > 0 || f.after != nil || serial || limited || pair != sameEra || f.modern != nil || f.listen || kind != "" {
		// Set before the route is published: other goroutines settle it.
		data = &routeData{batch: b, after: f.after, kind: kind, serial: serial, limited: limited, pair: pair, modern: f.modern, level: f.level, listen: f.listen}
		c.h.bridgeOf(pair).keep(c, m.Message, data)
		route.Data = data
	}
	tokSpan, hasToken := m.p.inMeta(mProgressToken)
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
	c.deliverWith(r, outbox.Frame{Data: frame}, ans, c.sess.Send)
}

// deliverWith is deliver with the session's Send or SendLater, of a frame
// that may carry its Release. The answer is the last frame about the tag
// the request came in under.
func (c *client) deliverWith(r idmap.Route, f outbox.Frame, ans *jsonrpc.Message, send func(outbox.Frame) error) {
	frame := f.Data
	c.countDone(r, answerOutcome(ans, frame))
	d := dataOf(r)
	if d != nil && d.after != nil {
		d.after(ans)
	}
	c.h.settle(d)
	if b := d.batchOf(); b != nil {
		b.reply(frame)
		b.done()
	} else {
		f.Tag, f.Last = r.Tag, true
		send(f)
	}
	if !d.isListen() {
		c.sess.End()
	}
}

// settle counts out of flight a request that gets no answer (cancelled);
// the transport hears that nothing more comes about its tag.
func (c *client) settle(r idmap.Route) {
	c.countDone(r, metrics.Cancelled)
	d := dataOf(r)
	if d != nil && d.after != nil {
		d.after(nil)
	}
	c.h.settle(d)
	if b := d.batchOf(); b != nil {
		b.done()
	} else if r.Tag != 0 {
		c.sess.Send(outbox.Frame{Tag: r.Tag, Last: true})
	}
	if !d.isListen() {
		c.sess.End()
	}
}

// routeData is what the hub keeps with a route beyond the table's fields.
type routeData struct {
	batch *batch                 // the batch the request came in, if any
	timer *time.Timer            // its request_timeout, if any; under flights.mu
	after func(*jsonrpc.Message) // sees the answer first (subscriptions)

	up      atomic.Int64 // its upstream id, once routed
	kind    string       // under "auto", an interactive request's kind (kindOf)
	serial  bool         // it takes the turn
	limited bool         // it takes a max_concurrency slot
	sent    atomic.Bool  // it went to the server (it may have waited at a gate)

	pair   pairing
	modern *modernReq // a modern session's request: what it declared
	level  string     // the log level the request carries to a modern server; "" none
	listen bool       // subscriptions/listen: long-lived, outside max_inflight and request_timeout
	retry  *retry     // a legacy session's request to a modern server that may need input
}

func dataOf(r idmap.Route) *routeData {
	d, _ := r.Data.(*routeData)
	return d
}

func (d *routeData) isListen() bool { return d != nil && d.listen }

// batchOf is the batch the request came in; nil-safe.
func (d *routeData) batchOf() *batch {
	if d == nil {
		return nil
	}
	return d.batch
}

// timeout fails a request that outlived request_timeout and cancels it
// upstream, unless its answer won the race.
func (h *Hub) timeout(up int64) {
	r, ok := h.flights.take(up)
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
		c.h.up.legacyJoined()
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
	switch c.sessionEra() {
	case eraUnknown:
		c.sess.Logger().Debug("dropped a notification sent before initialize", "method", m.Method)
		return
	case eraLegacy:
		if info := c.h.describedServer(); info != nil && c.h.bridgeOf(pairOf(eraLegacy, info.era)).serve(c, viewOf(m), info, nil) {
			return
		}
	}
	if proc := c.h.life.current(); proc != nil {
		if taps := c.h.cfg.Taps.active(); taps != nil {
			c.h.cfg.Taps.tell(taps, c.h.cfg.Name, c, TapEvent{Dir: "up", Kind: "notification", Method: m.Method}, m.Frame)
		}
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
	if c.h.down.endLocalListen(c, id) || c.h.up.cancelBetweenRounds(c, id) {
		return // mcpmux's own listen, or a request between two rounds
	}
	up, r, ok := c.h.flights.cancel(c.sess.ID(), id)
	if !ok {
		c.sess.Logger().Debug("dropped a cancellation of a request not in flight", "id", string(id))
		return
	}
	unsent := !wentUp(r)
	c.settle(r)
	if unsent {
		return // it waited at a gate: the server never heard of it
	}
	if proc := c.h.life.current(); proc != nil {
		frame := jsonrpc.Splice(m.Frame, jsonrpc.Edit{Span: span, Value: []byte(strconv.FormatInt(up, 10))})
		if taps := c.h.cfg.Taps.active(); taps != nil {
			c.h.cfg.Taps.tell(taps, c.h.cfg.Name, c, TapEvent{Dir: "up", Kind: "notification", Method: m.Method, ID: slices.Clone(id), UpstreamID: upID(up)}, frame)
		}
		proc.Send(frame)
	}
}

// wentUp reports whether a request was sent to the server (a request with
// no route data always is).
func wentUp(r idmap.Route) bool {
	d := dataOf(r)
	return d == nil || d.sent.Load()
}

// aside runs fn on a goroutine of its own and waits for it; a panic in fn
// goes on in the caller, as if fn had run there. A session's goroutine
// stays parked in its read for as long as the session idles, keeping the
// stack its deepest work grew: the handshake, which decodes, negotiates
// and logs far deeper than routing, runs aside, so that an idle session
// keeps the small stack it started with.
func aside(fn func()) {
	done := make(chan *asidePanic, 1)
	go func() { // waited for below
		defer func() {
			if p := recover(); p != nil {
				done <- &asidePanic{value: p, stack: debug.Stack()}
				return
			}
			done <- nil
		}()
		fn()
	}()
	if p := <-done; p != nil {
		panic(p)
	}
}

// asidePanic is a panic of a function aside ran, with the stack it was
// raised on: the caller's recovery logs this one's.
type asidePanic struct {
	value any
	stack []byte
}

func (p *asidePanic) String() string {
	return fmt.Sprintf("%v\n\n(raised on its own goroutine)\n%s", p.value, p.stack)
}
