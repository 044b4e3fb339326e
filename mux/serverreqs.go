package mux

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/metrics"
	"github.com/mcpmux/mcpmux/protocol"
)

// srvKey names a server request as a session knows it.
type srvKey struct {
	session uint64
	id      int64
}

// serverReq is a request sent to a session, waiting for its answer.
type serverReq struct {
	up     json.RawMessage // the server's id, exactly as sent; nil for mcpmux's own
	method string
	tag    uint64 // the tag of the request that caused it, which frames about it carry
	timer  *time.Timer
	local  func(m *jsonrpc.Message) // for mcpmux's own requests: gets the answer, or nil when none will come
	asked  time.Time                // when it was sent, for a tap; zero when no tap was attached
}

// serverReqs are the requests sent to sessions on the server's behalf (or
// mcpmux's own, such as roots/list), each under an id of that session's,
// and the URL-mode elicitations each session owns. Invariant: an entry is
// answered exactly once, by the session, by its timeout, or on the
// session's or the server's departure: whoever takes it from the table
// answers it.
type serverReqs struct {
	mu           sync.Mutex
	next         map[uint64]int64 // per session: the last id given; never reused
	pending      map[srvKey]*serverReq
	elicitations map[string]uint64 // URL-mode elicitationId -> session
	// held counts each session's entries in pending and elicitations, so
	// that a session departing with none (an idle one) looks at no other's.
	held map[uint64]int
}

func newServerReqs() serverReqs {
	return serverReqs{next: make(map[uint64]int64), pending: make(map[srvKey]*serverReq), elicitations: make(map[string]uint64), held: make(map[uint64]int)}
}

// bump adds d to what a session holds.
func (t *serverReqs) bump(session uint64, d int) {
	if n := t.held[session] + d; n > 0 {
		t.held[session] = n
	} else {
		delete(t.held, session)
	}
}

// add records a request to a session under a fresh id of that session's;
// expire runs if it is not answered within timeout.
func (t *serverReqs) add(session uint64, sr *serverReq, timeout time.Duration, expire func(srvKey)) srvKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next[session]++
	key := srvKey{session, t.next[session]}
	t.pending[key] = sr
	t.bump(session, 1)
	sr.timer = time.AfterFunc(timeout, func() { expire(key) })
	return key
}

// take removes an entry; nil when it is no longer there.
func (t *serverReqs) take(key srvKey) *serverReq {
	t.mu.Lock()
	defer t.mu.Unlock()
	sr := t.pending[key]
	if sr != nil {
		delete(t.pending, key)
		t.bump(key.session, -1)
		sr.timer.Stop()
	}
	return sr
}

// takeUpstream removes the entry of the server's request with id up.
func (t *serverReqs) takeUpstream(up []byte) (srvKey, *serverReq) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, sr := range t.pending {
		if sr.local == nil && string(sr.up) == string(up) {
			delete(t.pending, k)
			t.bump(k.session, -1)
			sr.timer.Stop()
			return k, sr
		}
	}
	return srvKey{}, nil
}

// dropSession removes a departed session's entries and elicitations.
func (t *serverReqs) dropSession(session uint64) []*serverReq {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.next, session)
	left := t.held[session]
	if left == 0 {
		return nil
	}
	delete(t.held, session)
	var gone []*serverReq
	for k, sr := range t.pending {
		if left == 0 {
			return gone
		}
		if k.session == session {
			gone = append(gone, sr)
			delete(t.pending, k)
			sr.timer.Stop()
			left--
		}
	}
	for eid, s := range t.elicitations {
		if left == 0 {
			break
		}
		if s == session {
			delete(t.elicitations, eid)
			left--
		}
	}
	return gone
}

// reset removes everything: the server that asked has gone.
func (t *serverReqs) reset() map[srvKey]*serverReq {
	t.mu.Lock()
	defer t.mu.Unlock()
	gone := t.pending
	for _, sr := range gone {
		sr.timer.Stop()
	}
	t.pending = make(map[srvKey]*serverReq)
	t.elicitations = make(map[string]uint64)
	t.held = make(map[uint64]int)
	return gone
}

// elicit records that a session owns a URL elicitation.
func (t *serverReqs) elicit(id string, session uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.elicitations[id]; ok {
		t.bump(old, -1)
	}
	t.elicitations[id] = session
	t.bump(session, 1)
}

// takeElicitation removes a URL elicitation and returns its owner.
func (t *serverReqs) takeElicitation(id string) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.elicitations[id]
	if ok {
		delete(t.elicitations, id)
		t.bump(s, -1)
	}
	return s, ok
}

// routeServerRequest sends sampling/createMessage or elicitation/create to
// the session that should take it, under an id of that session's own.
func (u *upstreamHandler) routeServerRequest(proc process, m *message) {
	h := u.h
	n := needOf(m.Message)
	if up, cause, ok := h.undeclaredCause(n); ok {
		h.learn(cause)
		h.refuseUndeclared(proc, up, cause, m.Message, n)
		h.cfg.Metrics.ServerRequest(m.Method, metrics.MissingCapability)
		return
	}
	c, up, cause := h.chooseSession(m, n)
	h.learn(cause)
	if c == nil {
		h.log.Info("no session can take a server request", "method", m.Method)
		proc.Send(noClientAnswer(h.cfg.Name, m.Method, m.ID, jsonrpc.ReasonNoClient, "no session can take "+m.Method))
		h.cfg.Metrics.ServerRequest(m.Method, metrics.NoClient)
		return
	}
	if c.sessionEra() == eraModern && h.describedServer().era == eraModern {
		// A modern server asks a modern session for input in its answers,
		// never in requests (it sends them only for a legacy session's).
		e := &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "mcpmux does not route " + m.Method + " to a 2026-07-28 session", Reason: jsonrpc.ReasonMethodNotFound, Server: h.cfg.Name}
		proc.Send(e.Response(m.ID))
		return
	}
	h.cfg.Metrics.ServerRequest(m.Method, metrics.Routed)
	if h.bridgeOf(pairOf(c.sessionEra(), eraLegacy)).ask(proc, c, up, cause, m.Message) {
		return // a modern session: asked in an answer, not a request
	}
	sr := &serverReq{up: m.ID, method: m.Method, tag: cause.Tag}
	taps := h.cfg.Taps.active()
	if taps != nil {
		sr.asked = time.Now()
	}
	key := h.asks.add(c.sess.ID(), sr, h.cfg.ServerRequestTimeout, h.serverReqTimeout)
	if n.elicitation && n.mode == "url" {
		if eid, ok := m.paramString(pElicitationID); ok {
			h.asks.elicit(eid, c.sess.ID())
		}
	}
	c.sess.Logger().Debug("routed a server request", "method", m.Method, "id", key.id)
	frame := m.WithID([]byte(strconv.FormatInt(key.id, 10)))
	if taps != nil {
		h.cfg.Taps.tell(taps, h.cfg.Name, c, TapEvent{Dir: "down", Kind: "request", Method: m.Method, ID: upID(key.id), UpstreamID: slices.Clone(m.ID)}, m.Frame)
	}
	c.sendAbout(cause.Tag, frame)
}

// learn records that cause's kind asks: under "auto", requests of that
// kind take turns from now on, in this run and the next.
func (h *Hub) learn(cause idmap.Route) {
	d := dataOf(cause)
	if d == nil || !h.flights.learn(d.kind) {
		return
	}
	h.log.Info("a kind of request causes the server's own requests: from now on such requests take turns, so that each server request reaches the session whose request caused it; others run at once", "kind", d.kind, "server_requests", "auto")
	if m := h.cfg.Memory; m != nil {
		if err := m.RememberAsks(d.kind); err != nil {
			h.log.Warn("cannot remember which requests cause the server's own; they will not take turns from its start next time", "kind", d.kind, "error", err)
		}
	}
}

// refuseUndeclared answers a server request that the modern request
// causing it did not declare the capability for: the server is told no
// client takes it, the request is cancelled at the server and refused
// with -32021, naming what it lacked.
func (h *Hub) refuseUndeclared(proc process, up int64, cause idmap.Route, m *jsonrpc.Message, n need) {
	proc.Send(noClientAnswer(h.cfg.Name, m.Method, m.ID, jsonrpc.ReasonMissingCapability, "the request that caused "+m.Method+" did not declare the capability"))
	r, ok := h.flights.take(up)
	if !ok {
		return // answered meanwhile
	}
	proc.Send(cancelFrame(up, "the client did not declare the capability the server asked for"))
	h.log.Debug("refused a modern request that did not declare what its server request needs", "method", m.Method, "for", cause.Method)
	h.fail(r, &jsonrpc.Error{
		Code: protocol.CodeMissingCapability, Message: r.Method + " needs " + m.Method + ", which the request did not declare in its clientCapabilities",
		Reason: jsonrpc.ReasonMissingCapability, Extra: map[string]any{"requiredCapabilities": n.required()},
	})
}

// askSession sends a request of mcpmux's own to a session; done gets the
// answer, or nil when none will come.
// tag is that of the request it is about, 0 for none.
func (h *Hub) askSession(c *client, tag uint64, method string, params any, done func(*jsonrpc.Message)) {
	key := h.asks.add(c.sess.ID(), &serverReq{method: method, local: done, tag: tag}, h.cfg.ServerRequestTimeout, h.serverReqTimeout)
	frame, err := jsonrpc.Request(json.RawMessage(strconv.FormatInt(key.id, 10)), method, params)
	if err != nil {
		h.asks.take(key)
		return
	}
	c.sendAbout(tag, frame)
}

// noClientAnswer is what the server gets when no session answers its
// request: elicitation is declined as "cancel", the rest get an error.
func noClientAnswer(server, method string, id json.RawMessage, reason, msg string) []byte {
	if method == "elicitation/create" {
		return jsonrpc.Response(id, json.RawMessage(`{"action":"cancel"}`))
	}
	e := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg, Reason: reason, Server: server}
	return e.Response(id)
}

// unanswered answers the server for a request its session will not answer.
func (h *Hub) unanswered(sr *serverReq, reason, msg string) {
	if sr.local != nil {
		sr.local(nil)
		return
	}
	h.cfg.Metrics.ServerRequest(sr.method, reason) // client_gone, client_timeout
	if proc := h.life.current(); proc != nil {
		proc.Send(noClientAnswer(h.cfg.Name, sr.method, sr.up, reason, msg))
	}
}

func (h *Hub) serverReqTimeout(key srvKey) {
	sr := h.asks.take(key)
	if sr == nil {
		return
	}
	if c := h.sessions.get(key.session); c != nil {
		n, _ := jsonrpc.Notification("notifications/cancelled", map[string]any{"requestId": key.id, "reason": "timeout"})
		c.sendAbout(sr.tag, n)
	}
	h.unanswered(sr, jsonrpc.ReasonClientTimeout, fmt.Sprintf("the session did not answer %s within %s", sr.method, h.cfg.ServerRequestTimeout))
}

// answerFromSession routes a session's answer to a server request back to
// the server under the server's own id. An answer to an id the session was
// never given is dropped.
func (c *client) answerFromSession(m *jsonrpc.Message) {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	var sr *serverReq
	if err == nil {
		sr = c.h.asks.take(srvKey{c.sess.ID(), id})
	}
	switch {
	case sr == nil:
		c.sess.Logger().Debug("dropped a response to nothing", "id", string(m.ID))
	case sr.local != nil:
		sr.local(m)
	default:
		c.h.cfg.Metrics.ServerRequest(sr.method, metrics.Answered)
		if proc := c.h.life.current(); proc != nil {
			frame := m.WithID(sr.up)
			if taps := c.h.cfg.Taps.active(); taps != nil {
				c.h.cfg.Taps.tellAnswer(taps, c.h.cfg.Name, c, "up", idmap.Route{Method: sr.method, ID: m.ID, Started: sr.asked}, slices.Clone(sr.up), m.Kind == jsonrpc.KindError, frame)
			}
			proc.Send(frame)
		}
	}
}

// dropServerReqs answers the server for every request a departed session
// had not answered.
func (h *Hub) dropServerReqs(session uint64) {
	for _, sr := range h.asks.dropSession(session) {
		h.unanswered(sr, jsonrpc.ReasonClientGone, "the session that was asked has gone")
	}
}

// forgetServerReqs drops the requests of a server process that exited: no
// one is waiting for their answers any more. The sessions are told.
func (h *Hub) forgetServerReqs() {
	for k, sr := range h.asks.reset() {
		if sr.local != nil {
			sr.local(nil)
			continue
		}
		if c := h.sessions.get(k.session); c != nil {
			n, _ := jsonrpc.Notification("notifications/cancelled", map[string]any{"requestId": k.id, "reason": "server exited"})
			c.sendAbout(sr.tag, n)
		}
	}
}

// serverCancelled forwards the server's cancellation of one of its own
// requests to the session that has it.
func (u *upstreamHandler) serverCancelled(m *message) {
	h := u.h
	s, ok := m.p.param(pRequestID)
	if !ok {
		return
	}
	if u.listenEnded(m.Message, s) {
		return
	}
	key, sr := h.asks.takeUpstream(m.Frame[s.Start:s.End])
	if sr == nil {
		return
	}
	if c := h.sessions.get(key.session); c != nil {
		frame := jsonrpc.Splice(m.Frame, jsonrpc.Edit{Span: s, Value: []byte(strconv.FormatInt(key.id, 10))})
		if taps := h.cfg.Taps.active(); taps != nil {
			h.cfg.Taps.tell(taps, h.cfg.Name, c, TapEvent{Dir: "down", Kind: "notification", Method: m.Method, ID: upID(key.id), UpstreamID: slices.Clone(sr.up)}, m.Frame)
		}
		c.sendAbout(sr.tag, frame)
	}
}

// listenEnded: a modern server's notifications/cancelled ends one of its
// listens (the only thing it may cancel); its owner is told, under its own
// id. False when requestId names no listen.
func (u *upstreamHandler) listenEnded(m *jsonrpc.Message, s jsonrpc.Span) bool {
	h := u.h
	up, ok := upstreamID(m.Frame[s.Start:s.End])
	if !ok {
		return false
	}
	r, ok := h.flights.get(up)
	if !ok || (r.Session != 0 || r.Method != "subscriptions/listen") && !dataOf(r).isListen() {
		return false
	}
	if r, ok = h.flights.take(up); !ok {
		return true
	}
	if r.Session == 0 {
		h.up.ownedListenEnded(up, nil)
		return true
	}
	if c := h.sessions.get(r.Session); c != nil {
		c.sendAbout(r.Tag, jsonrpc.Splice(m.Frame, jsonrpc.Edit{Span: s, Value: r.ID}))
		c.settle(r)
	}
	return true
}

// routeElicitationComplete tells the one session that owns a URL
// elicitation that it completed; an unknown id is dropped.
func (u *upstreamHandler) routeElicitationComplete(m *message) {
	h := u.h
	id, ok := m.paramString(pElicitationID)
	if !ok {
		return
	}
	if session, known := h.asks.takeElicitation(id); known {
		if c := h.sessions.get(session); c != nil {
			c.send(m.Frame)
		}
	}
}

// recordElicitations notes, from a -32042 error, the URL elicitations the
// session that receives it now owns.
func (u *upstreamHandler) recordElicitations(session uint64, e json.RawMessage) {
	h := u.h
	if len(e) == 0 {
		return // a result
	}
	var body struct {
		Code int `json:"code"`
		Data struct {
			Elicitations []struct {
				ID string `json:"elicitationId"`
			} `json:"elicitations"`
		} `json:"data"`
	}
	if json.Unmarshal(e, &body) != nil || body.Code != -32042 {
		return
	}
	for _, el := range body.Data.Elicitations {
		if el.ID != "" {
			h.asks.elicit(el.ID, session)
		}
	}
}
