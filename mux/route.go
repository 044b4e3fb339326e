package mux

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
)

// upstreamHandler is the hub as the server's reader sees it. Its methods run
// on that reader's goroutine and never block: every send is a queue.
type upstreamHandler Hub

// HandleMessage routes one message from the server.
func (u *upstreamHandler) HandleMessage(m *jsonrpc.Message) {
	h := (*Hub)(u)
	switch m.Kind {
	case jsonrpc.KindResult, jsonrpc.KindError:
		h.routeResponse(m)
	case jsonrpc.KindNotification:
		h.routeNotification(m)
	case jsonrpc.KindRequest:
		h.serverRequest(m)
	}
}

// Flush implements upstream.Handler: once the reader has handled a run of
// messages, the answers it queued go out, one write per session.
func (u *upstreamHandler) Flush() {
	h := (*Hub)(u)
	for i, c := range h.held {
		c.sess.Flush()
		h.held[i] = nil
	}
	h.held = h.held[:0]
}

// HandleTooLarge fails the request whose answer was too large to carry.
func (u *upstreamHandler) HandleTooLarge(id json.RawMessage, size int64) {
	h := (*Hub)(u)
	up, ok := upstreamID(id)
	if !ok {
		return
	}
	r, ok := h.reqs.Take(up)
	if !ok {
		return
	}
	if r.Session == 0 {
		h.wake(up, nil)
		return
	}
	h.fail(r, &jsonrpc.Error{
		Code:    jsonrpc.CodeInternalError,
		Message: "the server's answer of " + strconv.FormatInt(size, 10) + " bytes is over max_message_bytes",
		Reason:  jsonrpc.ReasonTooLarge,
	})
}

// upstreamID reads an id mcpmux gave a request: a positive integer.
func upstreamID(id json.RawMessage) (int64, bool) {
	n, err := strconv.ParseInt(string(id), 10, 64)
	return n, err == nil && n > 0
}

func (h *Hub) routeResponse(m *jsonrpc.Message) {
	up, ok := upstreamID(m.ID)
	if !ok {
		h.log.Warn("server answered an id mcpmux never sent", "id", string(m.ID))
		return
	}
	r, ok := h.reqs.Take(up)
	if !ok {
		h.log.Debug("dropped a late answer", "id", up)
		return
	}
	if r.Session == 0 {
		h.wake(up, m)
		return
	}
	if m.Kind == jsonrpc.KindResult && r.Task {
		// Only a task-augmented request can create a task: other results,
		// however large, are not walked again.
		h.recordTask(r.Session, up, r.Token, m.Result)
	} else {
		h.recordElicitations(r.Session, m.Error)
	}
	c := h.client(r.Session)
	if c == nil {
		dataOf(r).settle()
		return
	}
	// The frame is ours: the session's id goes in in place when it fits
	// (m's spans are stale after this; deliver's callers look at its Kind
	// only).
	frame := m.ReplaceID(r.ID)
	// The answer waits for the end of the run of messages the reader
	// has at hand (Flush, above), so a burst of answers to one session
	// costs one write.
	if len(h.held) < maxHeld {
		if len(h.held) == 0 || h.held[len(h.held)-1] != c {
			h.held = append(h.held, c)
		}
		c.deliverWith(r, frame, m, c.sess.SendLater)
		return
	}
	c.deliver(r, frame, m)
}

// maxHeld bounds the sessions one run of answers is held for: past it,
// answers are sent at once.
const maxHeld = 1024

// recordElicitations notes, from a -32042 error, the URL elicitations the
// session that receives it now owns.
func (h *Hub) recordElicitations(session uint64, e json.RawMessage) {
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
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, el := range body.Data.Elicitations {
		if el.ID != "" {
			h.elicitations[el.ID] = session
		}
	}
}

// wake hands an answer to a request of mcpmux's own; nil means none will come.
func (h *Hub) wake(up int64, m *jsonrpc.Message) {
	h.mu.Lock()
	w := h.waiters[up]
	delete(h.waiters, up)
	h.mu.Unlock()
	if w == nil {
		return
	}
	if m != nil {
		w <- m // buffered for one
	}
	close(w)
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
	if h.toTaskOwner(m) {
		return
	}
	switch {
	case m.Method == "notifications/resources/updated":
		h.routeUpdated(m)
	case m.Method == "notifications/message":
		h.routeLogMessage(m)
	case strings.HasSuffix(m.Method, "/list_changed"):
		h.broadcast(m.Frame)
	default:
		h.broadcast(m.Frame)
	}
}

// routeElicitationComplete tells the one session that owns a URL
// elicitation that it completed; an unknown id is dropped.
func (h *Hub) routeElicitationComplete(m *jsonrpc.Message) {
	s, ok := m.ParamsPath("elicitationId")
	if !ok {
		return
	}
	var id string
	if json.Unmarshal(m.Frame[s.Start:s.End], &id) != nil {
		return
	}
	h.mu.Lock()
	session, known := h.elicitations[id]
	delete(h.elicitations, id)
	c := h.clients[session]
	h.mu.Unlock()
	if known && c != nil {
		c.sess.Send(outbox.Frame{Data: m.Frame})
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
	session, token := uint64(0), json.RawMessage(nil)
	if r, ok := h.reqs.Get(up); ok {
		session, token = r.Session, r.Token
	} else if s, t, ok := h.taskProgress(up); ok {
		session, token = s, t // a task's progress outlives its creating request
	}
	if token == nil || session == 0 {
		return
	}
	c := h.client(session)
	if c == nil {
		return
	}
	c.sess.Send(outbox.Frame{Data: jsonrpc.Splice(m.Frame, jsonrpc.Edit{Span: span, Value: token})})
}

// serverRequest answers a request the server sends to its client: mcpmux
// answers ping itself; the rest are not routed to sessions yet.
func (h *Hub) serverRequest(m *jsonrpc.Message) {
	h.mu.Lock()
	proc := h.proc
	h.mu.Unlock()
	if proc == nil {
		return
	}
	switch m.Method {
	case "ping":
		proc.Send(jsonrpc.Response(m.ID, json.RawMessage("{}")))
		return
	case "roots/list":
		if h.declaresRoots() {
			h.answerRoots(proc, m)
			return
		}
	case "sampling/createMessage", "elicitation/create":
		h.routeServerRequest(proc, m)
		return
	}
	e := &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "mcpmux does not route " + m.Method + " to clients", Reason: jsonrpc.ReasonMethodNotFound, Server: h.cfg.Name}
	proc.Send(e.Response(m.ID))
}
