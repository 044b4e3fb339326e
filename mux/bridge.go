package mux

import (
	"sync"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// A bridge carries requests between a session of one MCP era and a server
// of the other. The plain proxy (request.go, route.go, serverreqs.go) calls
// the bridge of a request's pairing at fixed points, as
// httputil.ReverseProxy calls its Rewrite and ModifyResponse hooks; where
// session and server speak one era (sameEra) no hook changes anything.
type bridge interface {
	// keep sets what the bridge keeps with a request about to go up, in
	// the data of its route.
	keep(c *client, m *jsonrpc.Message, d *routeData)
	// rewrite is the request going up (meta: the span of its _meta object,
	// zero when none): it appends to edits those beyond its id and its
	// progress token, which the caller makes; none may overlap those.
	rewrite(c *client, m *jsonrpc.Message, meta jsonrpc.Span, edits []jsonrpc.Edit) []jsonrpc.Edit
	// modifyAnswer is the server's answer going down to c, for the route r
	// of upstream id up; taken reports that the bridge took the request on
	// instead (it asks the session for input) and nothing is delivered now.
	modifyAnswer(c *client, up int64, r idmap.Route, d *routeData, m *jsonrpc.Message) (frame []byte, taken bool)
	// ask is a server's request for input (sampling, elicitation, roots)
	// that the request r of session c, upstream id up, caused; false when
	// the plain proxy routes it to the session as a server request.
	ask(proc process, c *client, up int64, r idmap.Route, m *jsonrpc.Message) bool
	// serve answers a legacy session's request whose state mcpmux keeps
	// (subscriptions, its log level, tasks) as the bridge has it, or takes
	// its notification (out is nil then), for the server described by
	// info; false when the plain proxy serves or forwards it. m
	// comes by value: a pointer through an interface would move every
	// request's view to the heap.
	serve(c *client, m message, info *serverInfo, out sink) bool
}

// The fourth fixed point, a session's retry with the input a bridge asked
// for, is downBridge.retry's alone, called for every modern session's
// request before it is forwarded: a retry names the request it retries by a
// requestState only mcpmux makes, whatever the server is by then, and the
// up bridge's retries are mcpmux's own (rounds.go).

// pairing is how a request crosses the eras: both sides the same, or one of
// the two bridges.
type pairing uint8

const (
	sameEra    pairing = iota
	bridgeDown         // a modern session, a legacy server
	bridgeUp           // a legacy session, a modern server
)

func pairOf(session, server era) pairing {
	switch {
	case session == eraModern && server == eraLegacy:
		return bridgeDown
	case session != eraModern && server == eraModern:
		return bridgeUp
	}
	return sameEra
}

// bridgeOf is the bridge of a pairing.
func (h *Hub) bridgeOf(p pairing) bridge {
	switch p {
	case bridgeDown:
		return &h.down
	case bridgeUp:
		return &h.up
	}
	return plain{}
}

// plain is the bridge of sessions and a server of one era: none.
type plain struct{}

func (plain) keep(*client, *jsonrpc.Message, *routeData) {}

func (plain) rewrite(_ *client, _ *jsonrpc.Message, _ jsonrpc.Span, edits []jsonrpc.Edit) []jsonrpc.Edit {
	return edits
}

func (plain) modifyAnswer(_ *client, _ int64, r idmap.Route, _ *routeData, m *jsonrpc.Message) ([]byte, bool) {
	return m.ReplaceID(r.ID), false
}

func (plain) serve(*client, message, *serverInfo, sink) bool { return false }

func (plain) ask(process, *client, int64, idmap.Route, *jsonrpc.Message) bool { return false }

// downBridge serves modern sessions on a legacy server: it takes their
// envelope out of what goes up and shapes the answers as the modern
// revision has them (mrtr.go), turns the server's requests for input into
// input_required answers and the retries into answers to those requests
// (mrtr.go), and serves their listens itself (listen.go).
type downBridge struct {
	h      *Hub
	states stateKey     // signs the requestState of parked requests
	local  localListens // modern sessions' listens served for a legacy server

	mu     sync.Mutex           // guards rounds; taken alone, never with another
	rounds map[int64]*gathering // by upstream id: input requests gathering a round (mrtr.go)
}

func (b *downBridge) keep(*client, *jsonrpc.Message, *routeData) {}

func (b *downBridge) rewrite(_ *client, m *jsonrpc.Message, meta jsonrpc.Span, edits []jsonrpc.Edit) []jsonrpc.Edit {
	return stripEnvelope(m, meta, edits)
}

func (b *downBridge) modifyAnswer(_ *client, _ int64, r idmap.Route, _ *routeData, m *jsonrpc.Message) ([]byte, bool) {
	return b.shapeDown(m, r.ID, r.Method, true), false
}

func (b *downBridge) serve(*client, message, *serverInfo, sink) bool { return false }

func (b *downBridge) ask(proc process, c *client, up int64, r idmap.Route, m *jsonrpc.Message) bool {
	b.askModern(proc, c, up, r, m)
	return true
}

// upBridge serves legacy sessions on a modern server: it puts their
// envelope, from their initialize, on what goes up, asks them for the input
// a modern server's input_required answer wants and sends the request again
// with it (rounds.go), and holds a listen of mcpmux's own for their
// notifications (listen.go).
type upBridge struct {
	h     *Hub
	owned ownedListen // mcpmux's listen on a modern server, for legacy sessions
}

// keep: the log level the session set goes up with the request, and an
// interactive request may be answered input_required, to be sent again.
func (b *upBridge) keep(c *client, m *jsonrpc.Message, d *routeData) {
	d.level, _ = b.h.levels.explicit(c.sess.ID())
	if interactive(m.Method) {
		d.retry = &retry{}
	}
}

func (b *upBridge) rewrite(c *client, m *jsonrpc.Message, meta jsonrpc.Span, edits []jsonrpc.Edit) []jsonrpc.Edit {
	if meta.End == 0 {
		return append(edits, metaEdit(m, c.envelopeObject()))
	}
	return append(edits, injectEnvelope(m, meta, c.envelopeMembers()))
}

func (b *upBridge) modifyAnswer(c *client, up int64, r idmap.Route, d *routeData, m *jsonrpc.Message) ([]byte, bool) {
	if d != nil && d.retry != nil && m.Kind == jsonrpc.KindResult {
		if inputs, state, ok := inputRequired(m.Result); ok {
			b.putToSession(c, r, up, inputs, state)
			return nil, true
		}
	}
	return m.ReplaceID(r.ID), false
}

func (b *upBridge) ask(process, *client, int64, idmap.Route, *jsonrpc.Message) bool { return false }

// serve: a modern server has no per-session state for a legacy session to
// set. Its subscriptions are counted and reach the server through
// mcpmux's listen, its log level goes up with each of its requests, and
// the server's tasks are of a kind a 2025 session cannot use.
func (b *upBridge) serve(c *client, m message, info *serverInfo, out sink) bool {
	if m.Kind == jsonrpc.KindNotification {
		// The modern revision has no client notifications but
		// cancellation (handleCancel's): the rest are the handshake's.
		return true
	}
	switch m.Method {
	case "resources/subscribe", "resources/unsubscribe":
		uri, ok := m.paramString(pURI)
		if !ok || !info.hasPath("resources", "subscribe") {
			return false // the server explains what is wrong
		}
		if m.Method == "resources/subscribe" {
			b.h.subs.add(uri, c.sess.ID())
		} else {
			b.h.subs.remove(uri, c.sess.ID())
		}
		out.reply(jsonrpc.Response(m.ID, emptyResult))
		b.syncOwnedListen()
	case "logging/setLevel":
		c.setLevel(m.Message, out)
	case "tasks/get", "tasks/result", "tasks/cancel":
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: m.Method + " is not offered: the server speaks 2026-07-28, whose tasks a 2025 session cannot use", Reason: jsonrpc.ReasonNotSupported})
	default:
		return false
	}
	return true
}
