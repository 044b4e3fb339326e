package streamable

import (
	"container/list"
	"sync"
)

// DefaultMaxListens is Streams' bound per client when it is given none.
const DefaultMaxListens = 16

// Streams bounds the long-lived streams of a web listener: WebSockets,
// GET streams and listens, which hold a connection for as long as their
// client keeps them. Its bound is below the listener's connections, so
// that short requests always have room.
//
// A stream may belong to a client (a peer and the client it says it is,
// or an HTTP session); a client holds at most perClient streams, and one
// more ends its oldest.
type Streams struct {
	max, perClient int

	mu      sync.Mutex
	open    int
	clients map[string]*list.List // of *streamSlot, oldest first
}

// streamSlot is one stream counted in.
type streamSlot struct {
	client string
	elem   *list.Element // in its client's list; nil once out of it
	end    func()
	done   bool // its place was given back
}

// NewStreams bounds streams at max in all and perClient per client; a
// bound of zero or less means DefaultMaxListens per client, and no bound
// in all.
func NewStreams(max, perClient int) *Streams {
	if perClient <= 0 {
		perClient = DefaultMaxListens
	}
	return &Streams{max: max, perClient: perClient, clients: make(map[string]*list.List)}
}

// Acquire counts one stream of client in (client "" is counted in all
// only), or reports false when max are open. When the client holds its
// bound of streams, its oldest is ended first: its end is called, and its
// place is this one's. release gives the place back; it is called once the
// stream is over, and more calls do nothing.
func (s *Streams) Acquire(client string, end func()) (release func(), ok bool) {
	if s == nil {
		return func() {}, true
	}
	var ended func()
	defer func() {
		if ended != nil {
			ended() // outside the lock: it may take the stream's own
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	slot := &streamSlot{client: client, end: end}
	if client != "" {
		l := s.clients[client]
		if l == nil {
			l = list.New()
			s.clients[client] = l
		}
		if l.Len() >= s.perClient {
			oldest := l.Remove(l.Front()).(*streamSlot)
			oldest.elem, oldest.done = nil, true
			s.open--
			ended = oldest.end
		}
	}
	if s.max > 0 && s.open >= s.max {
		s.forgetLocked(slot)
		return nil, false
	}
	s.open++
	if client != "" {
		slot.elem = s.clients[client].PushBack(slot)
	}
	return func() { s.release(slot) }, true
}

func (s *Streams) release(slot *streamSlot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slot.done {
		return
	}
	slot.done = true
	s.open--
	if slot.elem != nil {
		s.clients[slot.client].Remove(slot.elem)
		slot.elem = nil
	}
	s.forgetLocked(slot)
}

// forgetLocked drops the list of slot's client once it is empty.
func (s *Streams) forgetLocked(slot *streamSlot) {
	if l := s.clients[slot.client]; l != nil && l.Len() == 0 {
		delete(s.clients, slot.client)
	}
}

// Open reports the streams counted in.
func (s *Streams) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open
}
