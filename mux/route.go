package mux

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/protocol"
)

// upstreamHandler is the hub as one process's stdout reader sees it. Its
// methods run on that reader's goroutine, one at a time, and never block:
// every send is a queue.
type upstreamHandler struct {
	h *Hub

	// held are the sessions that have answers queued by SendLater since the
	// last Flush; only the reader goroutine touches it.
	held []*client
}

// maxHeld bounds the sessions one run of answers is held for: past it,
// answers are sent at once.
const maxHeld = 1024

// HandleMessage routes one message from the server.
func (u *upstreamHandler) HandleMessage(m *jsonrpc.Message) {
	h := u.h
	switch m.Kind {
	case jsonrpc.KindResult, jsonrpc.KindError:
		u.routeResponse(m)
	case jsonrpc.KindNotification:
		h.routeNotification(m)
	case jsonrpc.KindRequest:
		h.serverRequest(m)
	}
}

// Flush implements upstream.Handler: once the reader has handled a run of
// messages, the answers it held go out, one write per session.
func (u *upstreamHandler) Flush() {
	for i, c := range u.held {
		c.sess.Flush()
		u.held[i] = nil
	}
	u.held = u.held[:0]
}

// HandleTooLarge fails the request whose answer was too large to carry.
func (u *upstreamHandler) HandleTooLarge(id json.RawMessage, size int64) {
	h := u.h
	up, ok := upstreamID(id)
	if !ok {
		return
	}
	r, ok := h.flights.take(up)
	if !ok {
		return
	}
	h.failAnswer(up, r, &jsonrpc.Error{
		Code:    jsonrpc.CodeInternalError,
		Message: "the server's answer of " + strconv.FormatInt(size, 10) + " bytes is over max_message_bytes",
		Reason:  jsonrpc.ReasonTooLarge,
	})
}

// failAnswer fails a request taken from the table whose answer cannot be
// delivered: mcpmux's own call wakes empty-handed, a request parked for
// its session's retry has the retry answered with e, any other gets e.
func (h *Hub) failAnswer(up int64, r idmap.Route, e *jsonrpc.Error) {
	switch {
	case r.Session == 0:
		h.calls.wake(up, nil)
	case isParkedID(r.ID):
		h.settle(dataOf(r))
		h.flights.parkedEnded(up, nil, e)
	default:
		h.fail(r, e)
	}
}

// HandleInvalidAnswer fails the request whose answer the server sent as a
// line that is not valid JSON-RPC: its session hears of it at once, rather
// than never.
func (u *upstreamHandler) HandleInvalidAnswer(id json.RawMessage, err error) bool {
	h := u.h
	up, ok := upstreamID(id)
	if !ok {
		return false
	}
	r, ok := h.flights.take(up)
	if !ok {
		return false
	}
	detail := err.Error()
	var e *jsonrpc.Error
	if errors.As(err, &e) {
		detail = e.Message
	}
	h.failAnswer(up, r, &jsonrpc.Error{
		Code:    jsonrpc.CodeInternalError,
		Message: "the server's answer is not valid JSON-RPC: " + detail,
		Reason:  jsonrpc.ReasonInvalidAnswer,
	})
	return true
}

// upstreamID reads an id mcpmux gave a request: a positive integer.
func upstreamID(id json.RawMessage) (int64, bool) {
	n, err := strconv.ParseInt(string(id), 10, 64)
	return n, err == nil && n > 0
}

func (u *upstreamHandler) routeResponse(m *jsonrpc.Message) {
	h := u.h
	up, ok := upstreamID(m.ID)
	if !ok {
		h.log.Warn("server answered an id mcpmux never sent", "id", string(m.ID))
		return
	}
	r, ok := h.flights.take(up)
	if !ok {
		h.log.Debug("dropped a late answer", "id", up)
		return
	}
	if r.Session == 0 {
		if r.Method == "subscriptions/listen" {
			h.ownedListenEnded(up)
		}
		h.calls.wake(up, m)
		return
	}
	d := dataOf(r)
	if isParkedID(r.ID) {
		// Answered while it waits for its session's retry: the retry gets it.
		h.settle(d)
		h.flights.parkedEnded(up, m, nil)
		return
	}
	h.recordOwnership(r, d, up, m)
	c := h.sessions.get(r.Session)
	if c == nil {
		h.settle(d)
		return
	}
	if d != nil && d.retry != nil && m.Kind == jsonrpc.KindResult {
		if inputs, state, ok := inputRequired(m.Result); ok {
			h.putToSession(c, r, up, inputs, state)
			return
		}
	}
	frame := h.answerFrame(m, r, d)
	// The answer waits for the end of the run of messages the reader has at
	// hand (Flush, above), so a burst of answers to one session costs one
	// write.
	if len(u.held) < maxHeld {
		if len(u.held) == 0 || u.held[len(u.held)-1] != c {
			u.held = append(u.held, c)
		}
		c.deliverWith(r, frame, m, c.sess.SendLater)
		return
	}
	c.deliver(r, frame, m)
}

// recordOwnership notes what an answer gives its session alone: a task it
// created, URL elicitations it now owns.
func (h *Hub) recordOwnership(r idmap.Route, d *routeData, up int64, m *jsonrpc.Message) {
	switch {
	case m.Kind != jsonrpc.KindResult:
		h.recordElicitations(r.Session, m.Error)
	case r.Task:
		// Only a task-augmented request can create a task: other results,
		// however large, are not walked again.
		h.recordTask(r.Session, up, r.Token, m.Result)
	case d != nil && d.modern != nil && d.modern.tasks:
		h.recordModernTask(r.Session, up, r.Token, m.Result)
	}
}

// answerFrame is the server's answer as the session gets it: under the
// session's id, and shaped for the session's era. The frame is the
// reader's: the session's id goes in in place when it fits (m's spans are
// stale after this; deliver's callers look at its Kind only).
func (h *Hub) answerFrame(m *jsonrpc.Message, r idmap.Route, d *routeData) []byte {
	switch {
	case d == nil || (d.pair == sameEra && !d.listen):
	case d.pair == bridgeDown:
		return h.shapeDown(m, r.ID, r.Method)
	case d.listen:
		if s, ok := jsonrpc.FindPath(m.Result, "_meta", protocol.MetaSubscriptionID); ok {
			rs := jsonrpc.SpanOf(m.Frame, m.Result)
			idSpan, _ := m.IDSpan()
			return jsonrpc.Splice(m.Frame, jsonrpc.Edit{Span: idSpan, Value: r.ID}, jsonrpc.Edit{Span: jsonrpc.Span{Start: rs.Start + s.Start, End: rs.Start + s.End}, Value: r.ID})
		}
	}
	return m.ReplaceID(r.ID)
}

// cacheable are the methods whose modern results carry cache hints.
var cacheable = map[string]bool{
	"tools/list": true, "prompts/list": true, "resources/list": true,
	"resources/templates/list": true, "resources/read": true,
}

// asksForInput: a result carries input requests (a non-empty inputRequests
// object).
func asksForInput(result json.RawMessage) bool {
	in := jsonrpc.Member(result, "inputRequests")
	return len(in) > 1 && in[0] == '{' && !jsonrpc.EmptyObject(in)
}

// shapeDown is a legacy server's answer as a modern session gets it, under
// id: a result says it is complete, or that it needs input when it asks
// for some (and how long it may be cached, for the
// lists), and the retired resource-not-found code becomes -32602.
func (h *Hub) shapeDown(m *jsonrpc.Message, id json.RawMessage, method string) []byte {
	idSpan, _ := m.IDSpan()
	edits := []jsonrpc.Edit{{Span: idSpan, Value: id}}
	switch m.Kind {
	case jsonrpc.KindResult:
		if len(m.Result) == 0 || m.Result[0] != '{' {
			break
		}
		add := map[string]json.RawMessage{"resultType": json.RawMessage(`"complete"`)}
		if inputMethod(method) && asksForInput(m.Result) {
			// A server of both eras opened legacy may still answer a later
			// round with input requests of its own (the go-sdk does, once it
			// has fulfilled the first round by requests): they are what it
			// says, and the retry, with its own requestState, goes to it.
			add["resultType"] = json.RawMessage(`"input_required"`)
		} else if cacheable[method] {
			add["ttlMs"], add["cacheScope"] = json.RawMessage(`0`), json.RawMessage(`"private"`)
		}
		have := func(k string) bool { _, ok := jsonrpc.FindPath(m.Result, k); return ok }
		edits = append(edits, jsonrpc.InsertMembers(m.Frame, jsonrpc.SpanOf(m.Frame, m.Result), add, have))
	case jsonrpc.KindError:
		if s, ok := jsonrpc.FindPath(m.Error, "code"); ok && string(m.Error[s.Start:s.End]) == strconv.Itoa(protocol.CodeLegacyResourceMissing) {
			es := jsonrpc.SpanOf(m.Frame, m.Error)
			edits = append(edits, jsonrpc.Edit{Span: jsonrpc.Span{Start: es.Start + s.Start, End: es.Start + s.End}, Value: []byte(strconv.Itoa(jsonrpc.CodeInvalidParams))})
		}
	}
	return jsonrpc.Splice(m.Frame, edits...)
}

func (h *Hub) routeNotification(m *jsonrpc.Message) {
	switch m.Method {
	case "notifications/progress":
		h.routeProgress(m)
		return
	case "notifications/cancelled":
		h.serverCancelled(m)
		return
	case "notifications/elicitation/complete":
		h.routeElicitationComplete(m)
		return
	case "notifications/tasks/status":
		h.taskStatus(m)
	}
	if h.routeTagged(m) || h.toTaskOwner(m) {
		return
	}
	switch {
	case m.Method == "notifications/resources/updated":
		h.routeUpdated(m)
	case m.Method == "notifications/message":
		h.routeLogMessage(m)
	case strings.HasSuffix(m.Method, "/list_changed"):
		h.broadcast(m.Frame)
		h.toLocalListens(m)
	default:
		h.broadcast(m.Frame)
	}
}

// routeProgress sends a progress notification to the owner of its token,
// with the token the owner chose. Progress for a finished or unknown
// request is dropped.
func (h *Hub) routeProgress(m *jsonrpc.Message) {
	span, ok := m.ParamsPath("progressToken")
	if !ok {
		return
	}
	up, ok := upstreamID(m.Frame[span.Start:span.End])
	if !ok {
		h.log.Debug("dropped progress with a token mcpmux never gave")
		return
	}
	session, token, tag := uint64(0), json.RawMessage(nil), uint64(0)
	if r, ok := h.flights.get(up); ok {
		session, token, tag = r.Session, r.Token, r.Tag
	} else if s, t, ok := h.tasks.progress(up); ok {
		session, token = s, t // a task's progress outlives its creating request
	}
	if token == nil || session == 0 {
		return
	}
	if c := h.sessions.get(session); c != nil {
		c.sendAbout(tag, jsonrpc.Splice(m.Frame, jsonrpc.Edit{Span: span, Value: token}))
	}
}

// serverRequest answers a request the server sends to its client: mcpmux
// answers ping and roots/list itself, and routes sampling and elicitation
// to the session that should take them; anything else is refused.
func (h *Hub) serverRequest(m *jsonrpc.Message) {
	proc := h.life.current()
	if proc == nil {
		return
	}
	switch m.Method {
	case "ping":
		proc.Send(jsonrpc.Response(m.ID, emptyResult))
		return
	case "roots/list":
		if h.declaresRoots() {
			h.answerRoots(proc, m)
			return
		}
		if h.rootsFromCause(proc, m) {
			return
		}
	case "sampling/createMessage", "elicitation/create":
		if info := h.describedServer(); info != nil && info.era == eraModern {
			break // a modern server asks for input in its answers, never in requests
		}
		h.routeServerRequest(proc, m)
		return
	}
	e := &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "mcpmux does not route " + m.Method + " to clients", Reason: jsonrpc.ReasonMethodNotFound, Server: h.cfg.Name}
	proc.Send(e.Response(m.ID))
}
