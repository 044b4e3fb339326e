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
	for _, c := range h.sessions.ready() {
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
