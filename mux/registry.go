package mux

import (
	"sync"
	"sync/atomic"
)

// registry is the set of a hub's sessions. Invariant: it never holds more
// than max sessions (NoLimit: no bound). Lists it hands out are copies, so the
// caller may act on each session with no lock held.
type registry struct {
	ids *atomic.Uint64 // session ids, shared by the daemon's hubs so that logs name each once
	max int

	mu      sync.Mutex
	clients map[uint64]*client
	inUse   int // how many of clients want the server (client.using), kept as they come, go and turn

	roots rootsSeen // the union of the sessions' roots, as the server last heard of it
	// clientRoots is the roots of modern clients over HTTP, kept for their
	// next requests
	clientRoots clientRoots
}

func newRegistry(ids *atomic.Uint64, max int) registry {
	if ids == nil {
		ids = new(atomic.Uint64)
	}
	return registry{ids: ids, max: max, clients: make(map[uint64]*client)}
}

// nextID is the id of the next session.
func (r *registry) nextID() uint64 { return r.ids.Add(1) }

// add admits a session; false means the registry is full.
func (r *registry) add(c *client) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.max > 0 && len(r.clients) >= r.max {
		return false
	}
	r.clients[c.sess.ID()] = c
	if c.using.Load() {
		r.inUse++
	}
	return true
}

// markUsing turns a session's using on; false when it was on already.
// It counts the session in only while the registry holds it.
func (r *registry) markUsing(c *client) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.using.Swap(true) {
		return false
	}
	if r.clients[c.sess.ID()] == c {
		r.inUse++
	}
	return true
}

func (r *registry) remove(id uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.clients[id]; c != nil && c.using.Load() {
		r.inUse--
	}
	delete(r.clients, id)
}

// get is the session with an id; nil when it has gone.
func (r *registry) get(id uint64) *client {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.clients[id]
}

func (r *registry) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.clients)
}

// using is how many sessions want the server (see client.use).
func (r *registry) using() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inUse
}

func (r *registry) full() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.max > 0 && len(r.clients) >= r.max
}

// all is every session, in no order.
func (r *registry) all() []*client {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*client, 0, len(r.clients))
	for _, c := range r.clients {
		out = append(out, c)
	}
	return out
}

// ready is every session that has completed its handshake.
func (r *registry) ready() []*client {
	cs := r.all()
	out := cs[:0]
	for _, c := range cs {
		if c.isReady() {
			out = append(out, c)
		}
	}
	return out
}
