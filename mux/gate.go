package mux

import "slices"

// gate holds requests back (a part of flights, under its lock) before the server: at most max of them hold a
// slot (are sent and not settled); the others wait, each session's in its
// own order, and a freed slot goes to the waiting session served longest
// ago, so one session's backlog never starves another's. Invariant:
// len(holders) <= max; a request is either a holder or waiting, never
// both. What waits is bounded by the sessions' own max_inflight: a session
// over it is not read.
type gate struct {
	max int // 0: the gate holds nothing back

	// under flights.mu:
	holders map[int64]uint64    // upstream id -> its session
	queues  map[uint64][]queued // waiting requests, by session
	served  map[uint64]uint64   // session -> tick of its last slot, while it holds or waits
	tick    uint64
}

// queued is a request waiting at a gate.
type queued struct {
	session uint64
	up      int64
	frame   []byte
	d       *routeData
	// input: frame answers a server request of up's (the input a parked
	// request waited for), which holds its max_concurrency slot already;
	// more answers the others of its round, sent after it.
	input bool
	more  [][]byte
}

// send sends q's frames to proc.
func (q queued) send(proc process) error {
	for _, f := range append([][]byte{q.frame}, q.more...) {
		if err := proc.Send(f); err != nil {
			return err
		}
	}
	return nil
}

// acquire gives q a slot, or queues it; true means the caller sends it now.
func (g *gate) acquire(q queued) bool {
	if g.holders == nil {
		g.holders, g.queues, g.served = make(map[int64]uint64), make(map[uint64][]queued), make(map[uint64]uint64)
	}
	if len(g.holders) < g.max {
		g.grantLocked(q)
		return true
	}
	g.queues[q.session] = append(g.queues[q.session], q)
	return false
}

func (g *gate) grantLocked(q queued) {
	g.tick++
	g.holders[q.up], g.served[q.session] = q.session, g.tick
}

// forgetLocked drops what the gate knows of a session that holds and waits
// for nothing.
func (g *gate) forgetLocked(session uint64) {
	if len(g.queues[session]) > 0 {
		return
	}
	for _, s := range g.holders {
		if s == session {
			return
		}
	}
	delete(g.served, session)
}

// release frees up's slot, or takes it out of its queue if it never had
// one. When a slot freed and a request waits, the next session in turn's
// oldest gets the slot and is returned for the caller to send.
func (g *gate) release(up int64) (next queued, ok bool) {
	session, held := g.holders[up]
	if !held {
		g.dequeueLocked(up)
		return queued{}, false
	}
	delete(g.holders, up)
	defer g.forgetLocked(session)
	s, ok := g.nextLocked()
	if !ok {
		return queued{}, false
	}
	q := g.queues[s]
	next, g.queues[s] = q[0], q[1:]
	q[0] = queued{}
	if len(g.queues[s]) == 0 {
		delete(g.queues, s)
	}
	g.grantLocked(next)
	return next, true
}

// nextLocked is the waiting session served longest ago.
func (g *gate) nextLocked() (uint64, bool) {
	best, found := uint64(0), false
	for s := range g.queues {
		if !found || g.served[s] < g.served[best] || g.served[s] == g.served[best] && s < best {
			best, found = s, true
		}
	}
	return best, found
}

func (g *gate) dequeueLocked(up int64) {
	for s, q := range g.queues {
		i := slices.IndexFunc(q, func(x queued) bool { return x.up == up })
		if i < 0 {
			continue
		}
		if q = slices.Delete(q, i, i+1); len(q) > 0 {
			g.queues[s] = q
		} else {
			delete(g.queues, s)
			g.forgetLocked(s)
		}
		return
	}
}

// move hands the slot held by old, if it holds one, to new: the same
// request, sent again under another id.
func (g *gate) move(old, new int64) {
	if s, ok := g.holders[old]; ok {
		delete(g.holders, old)
		g.holders[new] = s
	}
}

// state is the set of holders and of waiting requests.
func (g *gate) state() (holders, waiting map[int64]bool) {
	holders, waiting = make(map[int64]bool, len(g.holders)), map[int64]bool{}
	for up := range g.holders {
		holders[up] = true
	}
	for _, q := range g.queues {
		for _, x := range q {
			waiting[x.up] = true
		}
	}
	return holders, waiting
}
