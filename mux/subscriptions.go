package mux

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// subscriptions counts the sessions subscribed to each resource URI.
// Invariant: a URI is present exactly while some session holds it, so the
// server has seen one subscribe for it and no unsubscribe since.
type subscriptions struct {
	hook func() // tests: runs inside the critical section of add

	mu        sync.Mutex
	byURI     map[string]map[uint64]bool
	bySession map[uint64]map[string]bool // the same holdings by session: a departure visits only its own
}

func newSubscriptions(hook func()) subscriptions {
	return subscriptions{hook: hook, byURI: make(map[string]map[uint64]bool), bySession: make(map[uint64]map[string]bool)}
}

// add counts a session in on uri. first: no session held it before, so the
// server must hear of it; already: this session held it.
func (s *subscriptions) add(uri string, session uint64) (first, already bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hook != nil {
		s.hook()
	}
	holders := s.byURI[uri]
	if holders[session] {
		return false, true
	}
	if holders == nil {
		holders = map[uint64]bool{}
		s.byURI[uri] = holders
	}
	holders[session] = true
	if s.bySession[session] == nil {
		s.bySession[session] = map[string]bool{}
	}
	s.bySession[session][uri] = true
	return len(holders) == 1, false
}

// remove counts a session out of uri. last: it was the last holder, so the
// server must hear of it; held: the session held it at all.
func (s *subscriptions) remove(uri string, session uint64) (last, held bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	holders := s.byURI[uri]
	if !holders[session] {
		return false, false
	}
	delete(holders, session)
	s.forgetLocked(session, uri)
	if len(holders) == 0 {
		delete(s.byURI, uri)
		return true, true
	}
	return false, true
}

// drop counts a departed session out of everything; it returns the URIs it
// was the last holder of.
func (s *subscriptions) drop(session uint64) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last []string
	for uri := range s.bySession[session] {
		holders := s.byURI[uri]
		delete(holders, session)
		if len(holders) == 0 {
			delete(s.byURI, uri)
			last = append(last, uri)
		}
	}
	delete(s.bySession, session)
	return last
}

// forgetLocked takes uri out of a session's holdings.
func (s *subscriptions) forgetLocked(session uint64, uri string) {
	mine := s.bySession[session]
	delete(mine, uri)
	if len(mine) == 0 {
		delete(s.bySession, session)
	}
}

// holders are the sessions subscribed to uri, or to a prefix of it (a
// sub-resource).
func (s *subscriptions) holders(uri string) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[uint64]bool{}
	var out []uint64
	for sub, holders := range s.byURI {
		if uri != sub && !strings.HasPrefix(uri, sub) {
			continue
		}
		for id := range holders {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	return out
}

// uris is every URI held, sorted.
func (s *subscriptions) uris() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.byURI))
	for uri := range s.byURI {
		out = append(out, uri)
	}
	slices.Sort(out)
	return out
}

var emptyResult = json.RawMessage("{}")

// subscribe counts a session in on a URI; the server sees only the first.
func (c *client) subscribe(m *message, out sink) {
	uri, ok := m.paramString(pURI)
	if !ok {
		c.forward(m, out, fwd{}) // the server explains what is wrong
		return
	}
	h, id := c.h, c.sess.ID()
	first, _ := h.subs.add(uri, id)
	if !first {
		out.reply(jsonrpc.Response(m.ID, emptyResult))
		return
	}
	c.forward(m, out, fwd{after: func(ans *jsonrpc.Message) {
		if ans == nil || ans.Kind != jsonrpc.KindResult {
			h.subs.remove(uri, id) // refused or lost: the session holds nothing
		}
	}})
}

// unsubscribe counts a session out; the server sees the last one.
func (c *client) unsubscribe(m *message, out sink) {
	uri, ok := m.paramString(pURI)
	if !ok {
		c.forward(m, out, fwd{})
		return
	}
	last, _ := c.h.subs.remove(uri, c.sess.ID())
	if last {
		c.forward(m, out, fwd{})
		return
	}
	out.reply(jsonrpc.Response(m.ID, emptyResult))
}

// routeUpdated sends notifications/resources/updated to the sessions
// subscribed to that URI, or to a prefix of it.
func (h *Hub) routeUpdated(m *message) {
	uri, ok := m.paramString(pURI)
	if !ok {
		return
	}
	for _, id := range h.subs.holders(uri) {
		if c := h.sessions.get(id); c != nil {
			c.send(m.Frame)
		} else if l := h.down.local.holder(id); l != nil {
			if c := h.sessions.get(l.session); c != nil {
				c.sendAbout(l.tag, stamp(m.Frame, l.id))
			}
		}
	}
}
