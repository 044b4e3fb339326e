// Package idmap holds the rewrite tables of one shared server: which session
// sent each request that is in flight upstream, under which id, and with which
// progress token. It is pure data: no I/O, no goroutines.
//
// Every request forwarded to a server gets a fresh upstream id from a counter
// that never repeats for the life of the Table. The session's own id is kept
// as the exact bytes it sent, so that 7 and "7", or an integer too large for
// a float64, come back as they were. The upstream id doubles as the progress
// token mcpmux puts in the request, so one table answers both "whose response
// is this?" and "whose progress is this?".
package idmap

import (
	"encoding/json"
	"errors"
	"sync"
	"time"
)

var (
	// ErrDuplicate: the session already has a request with this id in flight.
	ErrDuplicate = errors.New("idmap: request id already in flight on this session")
)

// Route is where the answer to one upstream request goes.
type Route struct {
	Session uint64          // the session that sent it; 0 is mcpmux itself
	ID      json.RawMessage // its id exactly as sent
	Method  string
	Token   json.RawMessage // its progress token exactly as sent; nil when it had none
	Task    bool            // task-augmented (params.task): its result may create a task
	Tag     uint64          // the transport's tag of the frame it came in; frames about it carry it back
	Started time.Time
	Data    any // the caller's; carried untouched
}

type key struct {
	session uint64
	id      string
}

// Table maps upstream ids to routes. It is safe for concurrent use; the zero
// value is an empty table.
type Table struct {
	mu     sync.Mutex
	next   int64
	routes map[int64]Route
	byKey  map[key]int64
	// count is each session's requests in byKey: a session that departs
	// with none in flight (an idle one) is done without a look at the
	// others', and one with some stops looking once it found them all.
	count map[uint64]int
}

// counted adds d to a session's count of requests in flight.
func (t *Table) counted(session uint64, d int) {
	if n := t.count[session] + d; n > 0 {
		t.count[session] = n
	} else {
		delete(t.count, session)
	}
}

// Add records a route and returns the upstream id to send the request under.
func (t *Table) Add(r Route) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.routes == nil {
		t.routes, t.byKey, t.count = make(map[int64]Route), make(map[key]int64), make(map[uint64]int)
	}
	k := key{r.Session, string(r.ID)}
	if _, dup := t.byKey[k]; dup {
		return 0, ErrDuplicate
	}
	t.next++
	t.routes[t.next], t.byKey[k] = r, t.next
	t.counted(r.Session, 1)
	return t.next, nil
}

// Take removes and returns the route of an upstream id. ok is false for an id
// that is not in flight: a late answer after a cancellation or a restart.
func (t *Table) Take(up int64) (r Route, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok = t.routes[up]; ok {
		delete(t.routes, up)
		delete(t.byKey, key{r.Session, string(r.ID)})
		t.counted(r.Session, -1)
	}
	return r, ok
}

// Get returns the route of an upstream id without removing it.
func (t *Table) Get(up int64) (r Route, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok = t.routes[up]
	return r, ok
}

// Cancel removes the request a session sent under id and returns its
// upstream id. ok is false when that session has no such request in flight,
// so a session can only ever cancel its own requests.
func (t *Table) Cancel(session uint64, id json.RawMessage) (up int64, r Route, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := key{session, string(id)}
	if up, ok = t.byKey[k]; ok {
		r = t.routes[up]
		delete(t.routes, up)
		delete(t.byKey, k)
		t.counted(session, -1)
	}
	return up, r, ok
}

// DropSession removes every request of a session and returns their upstream
// ids, in no particular order.
func (t *Table) DropSession(session uint64) map[int64]Route {
	t.mu.Lock()
	defer t.mu.Unlock()
	left := t.count[session]
	if left == 0 {
		return nil
	}
	out := make(map[int64]Route, left)
	for k, up := range t.byKey {
		if k.session != session {
			continue
		}
		out[up] = t.routes[up]
		delete(t.routes, up)
		delete(t.byKey, k)
		if left--; left == 0 {
			break
		}
	}
	delete(t.count, session)
	return out
}

// Reset removes every route and returns them, keyed by upstream id. The
// counter goes on: ids are never reused, across restarts of the server too.
func (t *Table) Reset() map[int64]Route {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.routes
	t.routes, t.byKey, t.count = nil, nil, nil
	return out
}

// Len is the number of requests in flight.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.routes)
}

// LatestRoute returns the in-flight request of a session that started last
// among those for which keep returns true, with its upstream id; ok is false
// when there is none. keep runs under the table's lock: it must not call
// the table.
func (t *Table) LatestRoute(keep func(Route) bool) (up int64, r Route, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, cand := range t.routes {
		if cand.Session != 0 && keep(cand) && (!ok || cand.Started.After(r.Started)) {
			up, r, ok = id, cand, true
		}
	}
	return up, r, ok
}

// Move gives the request in flight under upstream id up to session (its
// own, or a later one that takes up a request that outlived the session
// that sent it) under a new downstream id, progress token and tag: that
// session answers it under that id, and hears of its progress under that
// token (nil: none), from now on. It fails with ErrDuplicate when the
// session has another request with that id in flight, and reports false
// when up is not in flight.
func (t *Table) Move(up int64, session uint64, id, token json.RawMessage, tag uint64) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.routes[up]
	if !ok {
		return false, nil
	}
	k := key{session, string(id)}
	if other, dup := t.byKey[k]; dup && other != up {
		return true, ErrDuplicate
	}
	delete(t.byKey, key{r.Session, string(r.ID)})
	t.counted(r.Session, -1)
	t.counted(session, 1)
	r.Session, r.ID, r.Token, r.Tag = session, id, token, tag
	t.routes[up], t.byKey[k] = r, up
	return true, nil
}
