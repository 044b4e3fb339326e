package mux

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/protocol"
)

// upstreamHandler is the hub as one process's stdout reader sees it: the
// routing of everything the server sends (answers, notifications, its own
// requests) to the sessions. Its methods run on that reader's goroutine,
// one at a time, and never block: every send is a queue.
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
	switch m.Kind {
	case jsonrpc.KindResult, jsonrpc.KindError:
		u.routeResponse(m)
	case jsonrpc.KindNotification:
		u.routeNotification(m)
	case jsonrpc.KindRequest:
		u.serverRequest(m)
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
	u.failAnswer(up, r, &jsonrpc.Error{
		Code:    jsonrpc.CodeInternalError,
		Message: "the server's answer of " + strconv.FormatInt(size, 10) + " bytes is over max_message_bytes",
		Reason:  jsonrpc.ReasonTooLarge,
	})
}

// failAnswer fails a request taken from the table whose answer cannot be
// delivered: mcpmux's own call wakes empty-handed, a request parked for
// its session's retry has the retry answered with e, any other gets e.
func (u *upstreamHandler) failAnswer(up int64, r idmap.Route, e *jsonrpc.Error) {
	h := u.h
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
	u.failAnswer(up, r, &jsonrpc.Error{
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
			h.up.ownedListenEnded(up, m.Error)
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
	u.recordOwnership(r, d, up, m)
	c := h.sessions.get(r.Session)
	if c == nil {
		h.settle(d)
		return
	}
	taps := h.cfg.Taps.active()
	if taps != nil {
		h.cfg.Taps.tellAnswer(taps, h.cfg.Name, c, "down", r, upID(up), m.Kind == jsonrpc.KindError, m.Frame)
	}
	shown, m := shownAndSeen(h.view.load(), r, d, m)
	release := u.recycler(r, d, shown, m, taps)
	frame, taken := u.answerFrame(c, up, r, d, shown)
	if taken {
		return // the bridge took the request on
	}
	// The answer waits for the end of the run of messages the reader has at
	// hand (Flush, above), so a burst of answers to one session costs one
	// write.
	if len(u.held) < maxHeld {
		if len(u.held) == 0 || u.held[len(u.held)-1] != c {
			u.held = append(u.held, c)
		}
		c.deliverWith(r, outbox.Frame{Data: frame, Release: release}, m, c.sess.SendLater)
		return
	}
	c.deliverWith(r, outbox.Frame{Data: frame, Release: release}, m, c.sess.Send)
}

// recycler is the Release of a plain answer's frame: one that nothing but
// its session's outbox will refer to once routed (no tap saw it, no view,
// batch, listen or task bookkeeping kept a piece of it), so that its
// buffer, the reader's, can be reused once the session's writer is done
// with it. An era bridge keeps nothing of an answer it passes on (the down
// bridge shapes it, the up bridge puts the id back); an input round the up
// bridge takes on keeps pieces of it, but is never delivered, so the
// Release is never called. Only large frames come from a pool
// (jsonrpc.Recycle); others, and answers that are not plain, get nil.
func (u *upstreamHandler) recycler(r idmap.Route, d *routeData, shown, seen *jsonrpc.Message, taps []*Tap) func() {
	if r.Task || taps != nil || shown != seen || seen.Kind != jsonrpc.KindResult || len(seen.Frame) <= recycleMin {
		return nil
	}
	if d != nil && (d.batch != nil || d.after != nil || d.listen) {
		return nil
	}
	frame := seen.Frame
	return func() { jsonrpc.Recycle(frame) }
}

// recycleMin is the size above which the server's reader gives a frame a
// pooled buffer (jsonrpc's 64 KiB).
const recycleMin = 64 << 10

// shownAndSeen are the server's answer m as its session is to get it
// (through the tool view) and as what learns from it (routeData.after: the
// lists kept, subscriptions) is to see it: what the server said, intact,
// although answerFrame rewrites the frame it is given in place.
func shownAndSeen(v ToolView, r idmap.Route, d *routeData, m *jsonrpc.Message) (shown, seen *jsonrpc.Message) {
	shown, seen = v.filterAnswer(r.Method, m), m
	if shown == m && d != nil && d.after != nil {
		if own, err := jsonrpc.Parse(bytes.Clone(m.Frame)); err == nil {
			seen = own
		}
	}
	return shown, seen
}

// recordOwnership notes what an answer gives its session alone: a task it
// created, URL elicitations it now owns.
func (u *upstreamHandler) recordOwnership(r idmap.Route, d *routeData, up int64, m *jsonrpc.Message) {
	switch {
	case m.Kind != jsonrpc.KindResult:
		u.recordElicitations(r.Session, m.Error)
	case r.Task:
		// Only a task-augmented request can create a task: other results,
		// however large, are not walked again.
		u.recordTask(r.Session, up, r.Token, m.Result)
	case d != nil && d.modern != nil && d.modern.tasks:
		u.recordModernTask(r.Session, up, r.Token, m.Result)
	}
}

// answerFrame is the server's answer as the session gets it: under the
// session's id, and shaped by the bridge of its pairing; taken reports
// that the bridge took the request on instead. The frame is the reader's:
// the session's id goes in in place when it fits (m's spans are stale
// after this; deliver's callers look at its Kind only).
func (u *upstreamHandler) answerFrame(c *client, up int64, r idmap.Route, d *routeData, m *jsonrpc.Message) (frame []byte, taken bool) {
	h := u.h
	switch {
	case d == nil:
		return m.ReplaceID(r.ID), false
	case d.listen:
		if s, ok := jsonrpc.FindPath(m.Result, "_meta", protocol.MetaSubscriptionID); ok {
			rs := jsonrpc.SpanOf(m.Frame, m.Result)
			idSpan, _ := m.IDSpan()
			return jsonrpc.Splice(m.Frame, jsonrpc.Edit{Span: idSpan, Value: r.ID}, jsonrpc.Edit{Span: jsonrpc.Span{Start: rs.Start + s.Start, End: rs.Start + s.End}, Value: r.ID}), false
		}
		return m.ReplaceID(r.ID), false
	}
	return h.bridgeOf(d.pair).modifyAnswer(c, up, r, d, m)
}

func (u *upstreamHandler) routeNotification(msg *jsonrpc.Message) {
	h := u.h
	view := viewOf(msg)
	m := &view
	switch m.Method {
	case "notifications/progress":
		u.routeProgress(m)
		return
	case "notifications/cancelled":
		u.serverCancelled(m)
		return
	case "notifications/elicitation/complete":
		u.routeElicitationComplete(m)
		return
	case "notifications/tasks/status":
		u.taskStatus(msg)
	}
	if taps := h.cfg.Taps.active(); taps != nil {
		h.cfg.Taps.tell(taps, h.cfg.Name, nil, TapEvent{Dir: "down", Kind: "notification", Method: m.Method}, m.Frame)
	}
	if u.routeTagged(m) || u.toTaskOwner(m) {
		return
	}
	switch {
	case m.Method == "notifications/resources/updated":
		h.routeUpdated(m)
	case m.Method == "notifications/message":
		u.routeLogMessage(m)
	case strings.HasSuffix(m.Method, "/list_changed"):
		h.broadcast(m.Frame)
		h.down.toLocalListens(msg)
	default:
		h.broadcast(m.Frame)
	}
}

// routeProgress sends a progress notification to the owner of its token,
// with the token the owner chose. Progress for a finished or unknown
// request is dropped.
func (u *upstreamHandler) routeProgress(m *message) {
	h := u.h
	span, ok := m.p.param(pProgressToken)
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
		if taps := h.cfg.Taps.active(); taps != nil {
			h.cfg.Taps.tell(taps, h.cfg.Name, c, TapEvent{Dir: "down", Kind: "notification", Method: m.Method}, m.Frame)
		}
		c.sendAbout(tag, jsonrpc.Splice(m.Frame, jsonrpc.Edit{Span: span, Value: token}))
	}
}

// serverRequest answers a request the server sends to its client: mcpmux
// answers ping and roots/list itself, and routes sampling and elicitation
// to the session that should take them; anything else is refused.
func (u *upstreamHandler) serverRequest(m *jsonrpc.Message) {
	h := u.h
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
		if h.down.rootsFromCause(proc, m) {
			return
		}
	case "sampling/createMessage", "elicitation/create":
		// A modern server asks for input in its answers; it sends these
		// only while serving a legacy session's request in that session's
		// revision (envelopeMembers), and they go to that session.
		view := viewOf(m)
		u.routeServerRequest(proc, &view)
		return
	}
	e := &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "mcpmux does not route " + m.Method + " to clients", Reason: jsonrpc.ReasonMethodNotFound, Server: h.cfg.Name}
	proc.Send(e.Response(m.ID))
}
