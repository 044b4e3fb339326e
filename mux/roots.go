package mux

import (
	"cmp"
	"encoding/json"
	"slices"
	"sync"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// Roots. Configured roots are answered as they are. With roots = "sessions"
// mcpmux asks every ready session that declared roots for its list and
// answers the server with the union; when the union changes, the server is
// told with notifications/roots/list_changed.

type root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// rootsSeen is the union of the sessions' roots as the server last heard
// of it. Invariant: the server is told of a change exactly when the union
// differs from last.
type rootsSeen struct {
	mu   sync.Mutex
	last string // the union, as JSON
}

// changed records the union now; true when it differs from the last one.
func (r *rootsSeen) changed(union string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := union != r.last
	r.last = union
	return changed
}

// forget: the server that heard of the union has gone.
func (r *rootsSeen) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = ""
}

func (h *Hub) declaresRoots() bool {
	return h.cfg.Roots != nil || h.cfg.RootsFromSessions
}

// answerRoots answers the server's roots/list.
func (h *Hub) answerRoots(proc process, m *jsonrpc.Message) {
	list := []root{}
	if h.cfg.RootsFromSessions {
		list = append(list, h.rootsUnion()...)
	} else {
		for _, u := range h.cfg.Roots {
			list = append(list, root{URI: u})
		}
	}
	body, _ := json.Marshal(map[string]any{"roots": list})
	proc.Send(jsonrpc.Response(m.ID, body))
}

func (h *Hub) rootsUnion() []root {
	var out []root
	seen := map[string]bool{}
	for _, c := range h.sessions.all() { // a legacy session's are asked once it is ready, a modern one's with a request
		for _, r := range c.rootList() {
			if !seen[r.URI] {
				seen[r.URI] = true
				out = append(out, r)
			}
		}
	}
	slices.SortFunc(out, func(a, b root) int { return cmp.Compare(a.URI, b.URI) })
	return out
}

// refreshRoots asks a session for its roots, when mcpmux gathers them.
func (h *Hub) refreshRoots(c *client) {
	if h.cfg.RootsFromSessions && c.sessionEra() == eraModern {
		c.forgetRoots() // its next request that may take input asks again
		return
	}
	if !h.cfg.RootsFromSessions || !c.capabilities().roots {
		return
	}
	h.askSession(c, 0, "roots/list", nil, func(m *jsonrpc.Message) {
		if m == nil || m.Kind != jsonrpc.KindResult {
			return
		}
		var res struct {
			Roots []root `json:"roots"`
		}
		if json.Unmarshal(m.Result, &res) != nil {
			return
		}
		c.setRoots(res.Roots)
		h.rootsChanged()
	})
}

// rootsChanged tells the server when the union of the sessions' roots is
// not what it last saw.
func (h *Hub) rootsChanged() {
	if !h.cfg.RootsFromSessions {
		return
	}
	key, _ := json.Marshal(h.rootsUnion())
	if !h.sessions.roots.changed(string(key)) {
		return
	}
	if proc := h.life.current(); proc != nil {
		n, _ := jsonrpc.Notification("notifications/roots/list_changed", nil)
		proc.Send(n)
	}
}

// A modern session has no handshake after which mcpmux could ask it for
// its roots, and sends no notification when they change. With roots =
// "sessions", mcpmux asks for them as a modern server would: the first
// request of the session (or, over HTTP, of its client) that declares
// roots and may take input is answered input_required, with a roots/list
// input of mcpmux's own, and the retry carries the roots, which mcpmux
// keeps and takes out before the request goes on. The roots are served
// while the session lasts: over HTTP, while one of the client's requests
// or listens does. They are kept by client (session.Peer.Client) for its
// next requests, up to maxClientRoots clients.

// The input mcpmux asks a modern session for its roots with, and the
// requestState of its retry.
const (
	rootsInput = "mcpmux-roots"
	rootsState = "mcpmux-roots.1"
)

// maxClientRoots bounds the clients whose roots are kept.
const maxClientRoots = 1024

// clientRoots is the roots of modern clients whose requests are sessions
// of their own, by client, as they last gave them.
type clientRoots struct {
	mu   sync.Mutex
	byID map[string][]root
}

func (r *clientRoots) get(client string) ([]root, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs, ok := r.byID[client]
	return rs, ok
}

// set keeps a client's roots, forgetting another client's when full.
func (r *clientRoots) set(client string, rs []root) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID == nil {
		r.byID = make(map[string][]root)
	}
	if _, ok := r.byID[client]; !ok && len(r.byID) >= maxClientRoots {
		for k := range r.byID {
			delete(r.byID, k)
			break
		}
	}
	r.byID[client] = rs
}

// forgetRoots: a modern session said its roots changed (over a
// connection, where it can send notifications).
func (c *client) forgetRoots() {
	if c.rootList() == nil {
		return
	}
	c.setRoots(nil)
	c.h.rootsChanged()
}

// rootsClient is the client a modern session's roots are kept under; ""
// when they live and die with the session.
func (c *client) rootsClient() string {
	if p := c.sess.Peer(); p.OneRequest {
		return p.Client
	}
	return ""
}

// modernRoots gathers a modern session's roots, with roots = "sessions":
// it takes them from the retry of mcpmux's roots input (giving back the
// request without it), from what its client gave before, or asks for them
// (answering the request, and then handled is true).
func (c *client) modernRoots(m *message, mr *modernReq, out sink) (next *message, handled bool) {
	h := c.h
	if !h.cfg.RootsFromSessions || !mr.caps.roots {
		return m, false
	}
	s, ok := m.p.param(pRequestState)
	if state, _ := stringIn(m.Frame, s, ok); state == rootsState {
		next, err := c.takeRoots(m)
		if err != nil {
			c.fail(out, m.ID, err)
			return nil, true
		}
		return next, false
	}
	if c.rootList() != nil {
		return m, false
	}
	if rs, ok := h.sessions.clientRoots.get(c.rootsClient()); ok && c.rootsClient() != "" {
		c.setRoots(rs)
		h.rootsChanged()
		return m, false
	}
	if !inputMethod(m.Method) {
		return m, false // only a request that may take input is asked for it
	}
	body, _ := json.Marshal(map[string]any{
		"resultType":    "input_required",
		"inputRequests": map[string]any{rootsInput: map[string]any{"method": "roots/list", "params": map[string]any{}}},
		"requestState":  rootsState,
	})
	c.sess.Logger().Debug("asked a modern session for its roots", "id", string(m.ID))
	out.reply(jsonrpc.Response(m.ID, body))
	return nil, true
}

// takeRoots keeps the roots a retry carries and returns the request
// without mcpmux's input and requestState.
func (c *client) takeRoots(m *message) (*message, *jsonrpc.Error) {
	var p map[string]json.RawMessage
	var res struct {
		Roots []root `json:"roots"`
	}
	if json.Unmarshal(m.Params, &p) != nil || json.Unmarshal(jsonrpc.Member(p["inputResponses"], rootsInput), &res) != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the retry carries no roots/list result under inputResponses." + rootsInput, Reason: jsonrpc.ReasonInvalidRequestState}
	}
	delete(p, "requestState")
	delete(p, "inputResponses")
	frame, err := jsonrpc.Request(m.ID, m.Method, p)
	var next *jsonrpc.Message
	if err == nil {
		next, err = jsonrpc.Parse(frame)
	}
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "cannot take the roots out of the retry: " + err.Error(), Reason: jsonrpc.ReasonInvalidRequest}
	}
	rs := res.Roots
	if rs == nil {
		rs = []root{}
	}
	c.setRoots(rs)
	if client := c.rootsClient(); client != "" {
		c.h.sessions.clientRoots.set(client, rs)
	}
	c.sess.Logger().Debug("a modern session gave its roots", "count", len(rs))
	c.h.rootsChanged()
	v := viewOf(next)
	return &v, nil
}
