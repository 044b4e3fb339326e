package mux

import (
	"encoding/json"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// Which session takes a server-to-client request. The server believes it
// has one client; in fact it has many sessions, and a request such as
// sampling/createMessage must reach exactly one of them, the one whose
// request caused it. The legacy protocol has no field that says which, so
// mcpmux picks: the owner of the related task if the request names one; else
// the one ready, capable session with a request in flight; else, among
// several, the one whose request started last ("latest"), or the one holding
// the turn ("serialize"). A request no session can take is answered at
// once: elicitation with "cancel", sampling with an error.

// need is what a session must have declared to take a server request.
type need struct {
	sampling    bool
	tools       bool // sampling with tools
	context     bool // sampling with includeContext
	elicitation bool
	mode        string // elicitation mode: form or url
	roots       bool   // roots/list
}

// caps is what a session declared in its initialize.
type caps struct {
	sampling, samplingTools, samplingContext bool
	elicitForm, elicitURL                    bool
	roots                                    bool
}

// The members of a ClientCapabilities object parseCaps reads.
var (
	capNames         = []string{"sampling", "elicitation", "roots"}
	samplingNames    = []string{"tools", "context"}
	elicitationNames = []string{"form", "url"}
)

// parseCaps reads a ClientCapabilities object in place, without decoding
// it. As before, a sampling or elicitation that is neither an object nor
// null makes the whole object unreadable: nothing is declared.
func parseCaps(raw json.RawMessage) caps {
	var out caps
	var top [3]jsonrpc.Span
	found := jsonrpc.FindMembers(raw, capNames, top[:])
	present := func(found uint64, i int, in []byte, s jsonrpc.Span) bool {
		v := in[s.Start:s.End]
		return found&(1<<i) != 0 && len(v) > 0 && string(v) != "null"
	}
	var sub [2]jsonrpc.Span
	if present(found, 0, raw, top[0]) {
		v := raw[top[0].Start:top[0].End]
		if v[0] != '{' {
			return caps{}
		}
		f := jsonrpc.FindMembers(v, samplingNames, sub[:])
		out.sampling, out.samplingTools, out.samplingContext = true, present(f, 0, v, sub[0]), present(f, 1, v, sub[1])
	}
	if present(found, 1, raw, top[1]) {
		v := raw[top[1].Start:top[1].End]
		if v[0] != '{' {
			return caps{}
		}
		f := jsonrpc.FindMembers(v, elicitationNames, sub[:])
		// An empty elicitation capability means form mode alone.
		out.elicitURL = present(f, 1, v, sub[1])
		out.elicitForm = present(f, 0, v, sub[0]) || !out.elicitURL
	}
	out.roots = present(found, 2, raw, top[2])
	return out
}

func (c caps) meets(n need) bool {
	switch {
	case n.sampling:
		return c.sampling && (!n.tools || c.samplingTools) && (!n.context || c.samplingContext)
	case n.roots:
		return c.roots
	case n.elicitation:
		if n.mode == "url" {
			return c.elicitURL
		}
		return c.elicitForm
	}
	return false
}

// needOf reads what a server request asks of the session that takes it.
func needOf(m *jsonrpc.Message) need {
	var p struct {
		Tools          json.RawMessage `json:"tools"`
		ToolChoice     json.RawMessage `json:"toolChoice"`
		IncludeContext string          `json:"includeContext"`
		Mode           string          `json:"mode"`
	}
	if m.Params != nil {
		json.Unmarshal(m.Params, &p)
	}
	if m.Method == "sampling/createMessage" {
		return need{
			sampling: true,
			tools:    len(p.Tools) > 0 || len(p.ToolChoice) > 0,
			context:  p.IncludeContext == "thisServer" || p.IncludeContext == "allServers",
		}
	}
	mode := p.Mode
	if mode == "" {
		mode = "form"
	}
	return need{elicitation: true, mode: mode}
}

// interactive methods are the ones a server may answer with a request of
// its own; under "serialize" only one of them is in flight at a time.
func interactive(method string) bool {
	switch method {
	case "tools/call", "prompts/get", "resources/read", "completion/complete":
		return true
	}
	return false
}

// chooseSession picks the session that takes a server request and the
// request of that session that caused it (its upstream id and route; for a
// legacy session taking a request that names its task, none), or nil.
func (h *Hub) chooseSession(m *message, n need) (*client, int64, idmap.Route) {
	if task, ok := m.relatedTaskID(); ok {
		owner, _ := h.tasks.owner(task)
		if c := h.sessions.get(owner); c != nil && c.isReady() && c.capabilities().meets(n) {
			return c, 0, idmap.Route{}
		}
		return nil, 0, idmap.Route{}
	}
	// A legacy session takes it if it declared the capability in its
	// initialize; a modern one if the very request that would cause it
	// declared it in its envelope.
	legacy := map[uint64]bool{}
	for _, c := range h.sessions.ready() {
		if c.capabilities().meets(n) && c.sess.Inflight() > 0 {
			legacy[c.sess.ID()] = true
		}
	}
	busy, waiting := h.flights.holder()
	able := func(r idmap.Route) bool {
		d := dataOf(r)
		if d.isListen() || waiting[routeUp(r)] || isParkedID(r.ID) {
			return false // listens and requests still waiting have caused nothing
		}
		if d != nil && d.modern != nil {
			return d.modern.caps.meets(n)
		}
		return legacy[r.Session]
	}
	// Under "serialize" the one interactive request in flight is the cause:
	// the choice is exact.
	if busy != 0 {
		if r, ok := h.flights.get(busy); ok && able(r) {
			return h.sessions.get(r.Session), busy, r
		}
	}
	// Else the latest interactive request in flight, then the latest of any
	// kind.
	up, r, ok := h.flights.latest(func(r idmap.Route) bool { return able(r) && interactive(r.Method) })
	if !ok {
		up, r, ok = h.flights.latest(able)
	}
	if !ok {
		return nil, 0, idmap.Route{}
	}
	c := h.sessions.get(r.Session)
	if c == nil {
		return nil, 0, idmap.Route{}
	}
	return c, up, r
}

// routeUp is the upstream id of a route that keeps one (it may wait at a
// gate), 0 for any other.
func routeUp(r idmap.Route) int64 {
	if d := dataOf(r); d != nil {
		return d.up.Load()
	}
	return 0
}

// undeclaredCause is the modern request that holds the turn when it did not
// declare what a server request needs: under the turn it is exactly the
// cause, which the request must not be served without (2026-07-28 refuses
// it with -32021), so the server's request goes to no other session.
func (h *Hub) undeclaredCause(n need) (int64, idmap.Route, bool) {
	busy, _ := h.flights.holder()
	if busy == 0 {
		return 0, idmap.Route{}, false
	}
	r, ok := h.flights.get(busy)
	d := dataOf(r)
	if !ok || d == nil || d.modern == nil || d.isListen() || isParkedID(r.ID) || d.modern.caps.meets(n) {
		return 0, idmap.Route{}, false
	}
	return busy, r, true
}

// required is what a need asks of the client, as a ClientCapabilities
// object (the requiredCapabilities of a -32021 error).
func (n need) required() map[string]any {
	switch {
	case n.sampling:
		s := map[string]any{}
		if n.tools {
			s["tools"] = map[string]any{}
		}
		if n.context {
			s["context"] = map[string]any{}
		}
		return map[string]any{"sampling": s}
	case n.roots:
		return map[string]any{"roots": map[string]any{}}
	case n.mode == "url":
		return map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}
	}
	return map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
}
