package mux

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/mcpmux/mcpmux/jsonrpc"
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
	c := h.client(r.Session)
	if c == nil {
		return
	}
	c.deliver(r, m.WithID(r.ID))
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
	switch {
	case m.Method == "notifications/progress":
		h.routeProgress(m)
	case m.Method == "notifications/cancelled":
		// The server cancels one of its own requests; none are routed to
		// sessions yet, so there is nothing to cancel.
	case strings.HasSuffix(m.Method, "/list_changed"):
		h.broadcast(m.Frame)
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
	r, ok := h.reqs.Get(up)
	if !ok || r.Token == nil || r.Session == 0 {
		return
	}
	c := h.client(r.Session)
	if c == nil {
		return
	}
	c.sess.Send(jsonrpc.Splice(m.Frame, jsonrpc.Edit{Span: span, Value: r.Token}))
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
	if m.Method == "ping" {
		proc.Send(jsonrpc.Response(m.ID, json.RawMessage("{}")))
		return
	}
	e := &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "mcpmux does not route " + m.Method + " to clients", Reason: jsonrpc.ReasonMethodNotFound, Server: h.cfg.Name}
	proc.Send(e.Response(m.ID))
}
