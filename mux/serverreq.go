package mux

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
)

// Server-to-client requests. The server believes it has one client; in fact
// it has many sessions, and a request such as sampling/createMessage must
// reach exactly one of them, the one whose request caused it. The protocol
// has no field that says which (before 2026-07-28), so mcpmux picks: the
// owner of the related task if the request names one; else the one ready,
// capable session with a request in flight; else, among several, the one
// whose request started last ("latest"), or the one allowed to have an
// interactive request in flight at all ("serialize"). A request no session
// can take is answered at once: elicitation with "cancel", sampling with an
// error.

// srvKey names a server request as a session knows it.
type srvKey struct {
	session uint64
	id      int64
}

// serverReq is a request sent to a session, waiting for its answer.
type serverReq struct {
	up     json.RawMessage // the server's id, exactly as sent; nil for mcpmux's own
	method string
	timer  *time.Timer
	local  func(m *jsonrpc.Message) // for mcpmux's own requests: gets the answer, or nil when none will come
}

// need is what a session must have declared to take a server request.
type need struct {
	sampling    bool
	tools       bool // sampling with tools
	context     bool // sampling with includeContext
	elicitation bool
	mode        string // elicitation mode: form or url
}

// caps is what a session declared in its initialize.
type caps struct {
	sampling, samplingTools, samplingContext bool
	elicitForm, elicitURL                    bool
	roots                                    bool
}

func parseCaps(raw json.RawMessage) caps {
	var c struct {
		Sampling *struct {
			Tools   json.RawMessage `json:"tools"`
			Context json.RawMessage `json:"context"`
		} `json:"sampling"`
		Elicitation *struct {
			Form json.RawMessage `json:"form"`
			URL  json.RawMessage `json:"url"`
		} `json:"elicitation"`
		Roots json.RawMessage `json:"roots"`
	}
	var out caps
	if json.Unmarshal(raw, &c) != nil {
		return out
	}
	present := func(v json.RawMessage) bool { return len(v) > 0 && string(v) != "null" }
	if c.Sampling != nil {
		out.sampling = true
		out.samplingTools = present(c.Sampling.Tools)
		out.samplingContext = present(c.Sampling.Context)
	}
	if c.Elicitation != nil {
		// An empty elicitation capability means form mode alone.
		out.elicitForm = present(c.Elicitation.Form) || !present(c.Elicitation.URL)
		out.elicitURL = present(c.Elicitation.URL)
	}
	out.roots = present(c.Roots)
	return out
}

func (c caps) meets(n need) bool {
	switch {
	case n.sampling:
		return c.sampling && (!n.tools || c.samplingTools) && (!n.context || c.samplingContext)
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

// relatedTask reads the task a message says it belongs to, if any.
func relatedTask(m *jsonrpc.Message) (string, bool) {
	s, ok := m.ParamsPath("_meta", "io.modelcontextprotocol/related-task", "taskId")
	if !ok {
		return "", false
	}
	var id string
	if json.Unmarshal(m.Frame[s.Start:s.End], &id) != nil {
		return "", false
	}
	return id, true
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

// chooseSession picks the session that takes a server request, or nil.
func (h *Hub) chooseSession(m *jsonrpc.Message, n need) *client {
	if task, ok := relatedTask(m); ok {
		h.mu.Lock()
		owner := h.tasks[task]
		c := h.clients[owner.session]
		h.mu.Unlock()
		if c != nil && c.isReady() && c.capabilities().meets(n) {
			return c
		}
		return nil
	}
	candidates := map[uint64]bool{}
	for _, c := range h.readyClients() {
		if c.capabilities().meets(n) && c.sess.Inflight() > 0 {
			candidates[c.sess.ID()] = true
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	// Under "serialize" the one interactive request in flight is the cause:
	// the choice is exact.
	h.mu.Lock()
	busy := h.serialBusy
	queued := make(map[int64]bool, len(h.serialQueue))
	for _, q := range h.serialQueue {
		queued[q.up] = true
	}
	h.mu.Unlock()
	if busy != 0 {
		if r, ok := h.reqs.Get(busy); ok && candidates[r.Session] {
			return h.client(r.Session)
		}
	}
	// Else the session with the latest interactive request in flight, then
	// the latest of any kind; requests still queued have caused nothing.
	id, ok := h.reqs.Latest(func(r idmap.Route) bool { return candidates[r.Session] && interactive(r.Method) && !queued[routeUp(r)] })
	if !ok {
		id, ok = h.reqs.Latest(func(r idmap.Route) bool { return candidates[r.Session] && !queued[routeUp(r)] })
	}
	if !ok {
		return nil
	}
	return h.client(id)
}

// routeServerRequest sends sampling/createMessage or elicitation/create to
// the session that should take it, under an id of that session's own.
func (h *Hub) routeServerRequest(proc process, m *jsonrpc.Message) {
	n := needOf(m)
	c := h.chooseSession(m, n)
	if c == nil {
		h.log.Info("no session can take a server request", "method", m.Method)
		proc.Send(noClientAnswer(h.cfg.Name, m.Method, m.ID, jsonrpc.ReasonNoClient, "no session can take "+m.Method))
		return
	}
	sr := &serverReq{up: m.ID, method: m.Method}
	id := h.addServerReq(c, sr)
	if n.elicitation && n.mode == "url" {
		if s, ok := m.ParamsPath("elicitationId"); ok {
			var eid string
			if json.Unmarshal(m.Frame[s.Start:s.End], &eid) == nil {
				h.mu.Lock()
				h.elicitations[eid] = c.sess.ID()
				h.mu.Unlock()
			}
		}
	}
	c.sess.Logger().Debug("routed a server request", "method", m.Method, "id", id)
	c.sess.Send(outbox.Frame{Data: m.WithID([]byte(strconv.FormatInt(id, 10)))})
}

// addServerReq records a request to a session and starts its timeout.
func (h *Hub) addServerReq(c *client, sr *serverReq) int64 {
	c.mu.Lock()
	c.nextSrvID++
	id := c.nextSrvID
	c.mu.Unlock()
	key := srvKey{c.sess.ID(), id}
	h.mu.Lock()
	h.srvReqs[key] = sr
	sr.timer = time.AfterFunc(h.cfg.ServerRequestTimeout, func() { h.serverReqTimeout(key) })
	h.mu.Unlock()
	return id
}

func (h *Hub) takeServerReq(key srvKey) *serverReq {
	h.mu.Lock()
	defer h.mu.Unlock()
	sr := h.srvReqs[key]
	if sr != nil {
		delete(h.srvReqs, key)
		sr.timer.Stop()
	}
	return sr
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
	h.mu.Lock()
	proc := h.proc
	h.mu.Unlock()
	if proc != nil {
		proc.Send(noClientAnswer(h.cfg.Name, sr.method, sr.up, reason, msg))
	}
}

func (h *Hub) serverReqTimeout(key srvKey) {
	sr := h.takeServerReq(key)
	if sr == nil {
		return
	}
	if c := h.client(key.session); c != nil {
		n, _ := jsonrpc.Notification("notifications/cancelled", map[string]any{"requestId": key.id, "reason": "timeout"})
		c.sess.Send(outbox.Frame{Data: n})
	}
	h.unanswered(sr, jsonrpc.ReasonClientTimeout, fmt.Sprintf("the session did not answer %s within %s", sr.method, h.cfg.ServerRequestTimeout))
}

// answerFromSession routes a session's answer to a server request back to
// the server under the server's own id. An answer to an id the session was
// never given is dropped.
func (c *client) answerFromSession(m *jsonrpc.Message) {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	if err != nil {
		c.sess.Logger().Debug("dropped a response to nothing", "id", string(m.ID))
		return
	}
	sr := c.h.takeServerReq(srvKey{c.sess.ID(), id})
	if sr == nil {
		c.sess.Logger().Debug("dropped a response to nothing", "id", string(m.ID))
		return
	}
	if sr.local != nil {
		sr.local(m)
		return
	}
	c.h.mu.Lock()
	proc := c.h.proc
	c.h.mu.Unlock()
	if proc != nil {
		proc.Send(m.WithID(sr.up))
	}
}

// dropServerReqs answers the server for every request a departed session
// had not answered.
func (h *Hub) dropServerReqs(session uint64) {
	h.mu.Lock()
	var gone []*serverReq
	for k, sr := range h.srvReqs {
		if k.session == session {
			gone = append(gone, sr)
			delete(h.srvReqs, k)
			sr.timer.Stop()
		}
	}
	for eid, s := range h.elicitations {
		if s == session {
			delete(h.elicitations, eid)
		}
	}
	h.mu.Unlock()
	for _, sr := range gone {
		h.unanswered(sr, jsonrpc.ReasonClientGone, "the session that was asked has gone")
	}
}

// forgetServerReqs drops the requests of a server process that exited: no
// one is waiting for their answers any more. The sessions are told.
func (h *Hub) forgetServerReqs() {
	h.mu.Lock()
	reqs := h.srvReqs
	h.srvReqs = make(map[srvKey]*serverReq)
	h.elicitations = make(map[string]uint64)
	h.mu.Unlock()
	for k, sr := range reqs {
		sr.timer.Stop()
		if sr.local != nil {
			sr.local(nil)
			continue
		}
		if c := h.client(k.session); c != nil {
			n, _ := jsonrpc.Notification("notifications/cancelled", map[string]any{"requestId": k.id, "reason": "server exited"})
			c.sess.Send(outbox.Frame{Data: n})
		}
	}
}

// serverCancelled forwards the server's cancellation of one of its own
// requests to the session that has it.
func (h *Hub) serverCancelled(m *jsonrpc.Message) {
	s, ok := m.ParamsPath("requestId")
	if !ok {
		return
	}
	up := m.Frame[s.Start:s.End]
	h.mu.Lock()
	var key srvKey
	var found *serverReq
	for k, sr := range h.srvReqs {
		if sr.local == nil && string(sr.up) == string(up) {
			key, found = k, sr
			break
		}
	}
	if found != nil {
		delete(h.srvReqs, key)
		found.timer.Stop()
	}
	h.mu.Unlock()
	if found == nil {
		return
	}
	if c := h.client(key.session); c != nil {
		c.sess.Send(outbox.Frame{Data: jsonrpc.Splice(m.Frame, jsonrpc.Edit{Span: s, Value: []byte(strconv.FormatInt(key.id, 10))})})
	}
}

// askSession sends a request of mcpmux's own to a session; done gets the
// answer, or nil when none will come.
func (h *Hub) askSession(c *client, method string, params any, done func(*jsonrpc.Message)) {
	id := h.addServerReq(c, &serverReq{method: method, local: done})
	frame, err := jsonrpc.Request(json.RawMessage(strconv.FormatInt(id, 10)), method, params)
	if err != nil {
		return
	}
	c.sess.Send(outbox.Frame{Data: frame})
}

// Roots. Configured roots are answered as they are. With roots = "sessions"
// mcpmux asks every ready session that declared roots for its list and
// answers the server with the union; when the union changes, the server is
// told with notifications/roots/list_changed.

type root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

func (h *Hub) declaresRoots() bool {
	return h.cfg.Roots != nil || h.cfg.RootsFromSessions
}

// answerRoots answers the server's roots/list.
func (h *Hub) answerRoots(proc process, m *jsonrpc.Message) {
	var list []root
	if h.cfg.RootsFromSessions {
		list = h.rootsUnion()
	} else {
		for _, u := range h.cfg.Roots {
			list = append(list, root{URI: u})
		}
	}
	if list == nil {
		list = []root{}
	}
	body, _ := json.Marshal(map[string]any{"roots": list})
	proc.Send(jsonrpc.Response(m.ID, body))
}

func (h *Hub) rootsUnion() []root {
	var out []root
	seen := map[string]bool{}
	for _, c := range h.readyClients() {
		c.mu.Lock()
		rs := c.roots
		c.mu.Unlock()
		for _, r := range rs {
			if !seen[r.URI] {
				seen[r.URI] = true
				out = append(out, r)
			}
		}
	}
	slices.SortFunc(out, func(a, b root) int {
		if a.URI < b.URI {
			return -1
		}
		if a.URI > b.URI {
			return 1
		}
		return 0
	})
	return out
}

// refreshRoots asks a session for its roots, when mcpmux gathers them.
func (h *Hub) refreshRoots(c *client) {
	if !h.cfg.RootsFromSessions || !c.capabilities().roots {
		return
	}
	h.askSession(c, "roots/list", nil, func(m *jsonrpc.Message) {
		if m == nil || m.Kind != jsonrpc.KindResult {
			return
		}
		var res struct {
			Roots []root `json:"roots"`
		}
		if json.Unmarshal(m.Result, &res) != nil {
			return
		}
		c.mu.Lock()
		c.roots = res.Roots
		c.mu.Unlock()
		h.rootsChanged()
	})
}

// rootsChanged tells the server when the union of the sessions' roots is
// not what it last saw.
func (h *Hub) rootsChanged() {
	if !h.cfg.RootsFromSessions {
		return
	}
	union := h.rootsUnion()
	key, _ := json.Marshal(union)
	h.mu.Lock()
	changed := string(key) != h.lastRoots
	h.lastRoots = string(key)
	proc := h.proc
	h.mu.Unlock()
	if changed && proc != nil {
		n, _ := jsonrpc.Notification("notifications/roots/list_changed", nil)
		proc.Send(n)
	}
}

// routeUp is the upstream id of a serialized route, 0 for any other.
func routeUp(r idmap.Route) int64 {
	if d := dataOf(r); d != nil && d.serial {
		return d.up.Load()
	}
	return 0
}
