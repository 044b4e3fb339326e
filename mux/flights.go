package mux

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// flights is the one door of a request's life: the route table, what the
// hub keeps with each route (routeData), and the gates (the turn and
// max_concurrency), under one lock. Its transitions, below, are the only
// code that changes them; each returns what must be sent (the requests a
// gate lets through), and the Hub sends it after the unlock. The states
// and transitions are drawn in the package doc.
type flights struct {
	timeout time.Duration  // request_timeout; 0 means none
	expire  func(up int64) // runs when a sent request outlived timeout

	mu    sync.Mutex
	reqs  idmap.Table // every request in flight upstream, by upstream id; its own lock is taken only under mu
	turn  turn        // "serialize": one interactive request at a time
	limit gate        // max_concurrency

	parked   map[string]*parkedInput // modern requests waiting for their retry with input, by the nonce of their requestState (mrtr.go)
	parkedUp map[int64]string        // the nonce of each, by upstream id
	parkedBy map[uint64]int          // how many each session has: a departure with none looks at no other's
	rounds   map[listenKey]*round    // legacy requests between two rounds of input, by session and id (rounds.go)
}

// begin records a request about to go to the server and returns its
// upstream id: routed, it waits to be admitted.
func (f *flights) begin(r idmap.Route) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	up, err := f.reqs.Add(r)
	if d := dataOf(r); err == nil && d != nil {
		d.up.Store(up)
	}
	return up, err
}

// admit passes a routed request through the gates it is subject to; true
// means the caller sends it now, false that it waits (and is handed back
// by a later transition when its turn comes) or that it was settled
// meanwhile (its process exited), so that it holds nothing.
func (f *flights) admit(q queued) bool {
	if q.d == nil {
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, live := f.reqs.Get(q.up); !live {
		return false
	}
	if q.d.serial && !f.turn.acquire(q) {
		return false
	}
	return !q.d.limited || f.limit.acquire(q)
}

// admitInput passes the input for a parked request (q.input) through the
// turn, which the request gave up while parked; as admit.
func (f *flights) admitInput(q queued) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, live := f.reqs.Get(q.up); !live {
		return false
	}
	return f.turn.acquire(q)
}

// sent: a request went to the server. Its request_timeout runs from now.
func (f *flights) sent(up int64, d *routeData) {
	if d == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d.sent.Store(true)
	if _, live := f.reqs.Get(up); live && f.timeout > 0 && !d.listen {
		f.restartTimerLocked(up, d)
	}
}

func (f *flights) restartTimerLocked(up int64, d *routeData) {
	if d.timer != nil {
		d.timer.Stop()
	}
	d.timer = time.AfterFunc(f.timeout, func() { f.expire(up) })
}

// take removes the route of up: it was answered, timed out, failed or
// abandoned. Its gates are the caller's to settle once it has delivered.
func (f *flights) take(up int64) (idmap.Route, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs.Take(up)
}

// cancel removes the request a session sent under id; ok is false when
// that session has no such request in flight.
func (f *flights) cancel(session uint64, id json.RawMessage) (up int64, r idmap.Route, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs.Cancel(session, id)
}

// settle stops a request's timer and frees what it held at the gates; it
// returns the requests that get a slot by it, for the caller to send.
// nil-safe; settling twice frees nothing the second time.
func (f *flights) settle(d *routeData) []queued {
	if d == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
	}
	if !d.serial && !d.limited {
		return nil
	}
	return f.releaseLocked(d.up.Load(), d, nil)
}

// departed is what a departed session left: its requests in flight, its
// parked requests, and the requests that get a gate's slot by it.
type departed struct {
	routes map[int64]idmap.Route
	parked []*parkedInput
	next   []queued
}

// dropSession removes and settles every request of a departed session,
// and its parked requests (their upstream requests are among its routes).
func (f *flights) dropSession(session uint64) departed {
	f.mu.Lock()
	defer f.mu.Unlock()
	var gone departed
	gone.routes = f.reqs.DropSession(session)
	for _, r := range gone.routes {
		d := dataOf(r)
		if d == nil {
			continue
		}
		if d.timer != nil {
			d.timer.Stop()
		}
		if d.serial || d.limited {
			gone.next = f.releaseLocked(d.up.Load(), d, gone.next)
		}
	}
	for nonce, p := range f.parked {
		if f.parkedBy[session] == 0 {
			break
		}
		if p.session == session {
			gone.parked = append(gone.parked, f.takeParkedLocked(nonce))
		}
	}
	return gone
}

// reset removes every route: the process exited. Each is the caller's to
// fail and settle.
func (f *flights) reset() map[int64]idmap.Route {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs.Reset()
}

// park keeps the request p.up in flight under a placeholder id, owned by
// p.session, while its session is asked for input (mrtr.go), and files p
// under nonce; expire runs when no retry took it within wait. Its
// request_timeout stops (the wait has its own bound) and it gives up the
// turn (next: what gets it), which the retry takes again. found is false
// when the request has ended.
func (f *flights) park(p *parkedInput, token json.RawMessage, nonce string, wait time.Duration, expire func(nonce string)) (found bool, next []queued) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, _ := f.reqs.Get(p.up)
	if found, _ = f.reqs.Move(p.up, p.session, parkedID(p.up), token, 0); !found {
		return false, nil
	}
	if f.parked == nil {
		f.parked, f.parkedUp, f.parkedBy = make(map[string]*parkedInput), make(map[int64]string), make(map[uint64]int)
	}
	if old := f.parked[nonce]; old != nil {
		f.unpark(old.session)
	}
	f.parked[nonce], f.parkedUp[p.up] = p, nonce
	f.parkedBy[p.session]++
	p.timer = time.AfterFunc(wait, func() { expire(nonce) })
	d := dataOf(r)
	if d == nil {
		return true, nil
	}
	if d.timer != nil {
		d.timer.Stop()
	}
	if d.serial {
		next = f.passTurnLocked(p.up, nil)
	}
	return true, next
}

// takeParkedLocked removes the parked request filed under nonce.
func (f *flights) takeParkedLocked(nonce string) *parkedInput {
	p := f.parked[nonce]
	if p != nil {
		delete(f.parked, nonce)
		delete(f.parkedUp, p.up)
		f.unpark(p.session)
		p.timer.Stop()
	}
	return p
}

// unpark counts one parked request of a session out.
func (f *flights) unpark(session uint64) {
	if f.parkedBy[session]--; f.parkedBy[session] <= 0 {
		delete(f.parkedBy, session)
	}
}

// resume takes the parked request filed under nonce for owner and hands it
// to the session that retried it, under the retry's id, token and tag. p
// is nil (and err errBadState) when owner has no such request, or
// (errOtherRequest) when bind is not the parked request's; found is
// false when it ended while parked (p.final or p.failed says how), and err
// is idmap.ErrDuplicate when the session has another request with that id
// in flight.
func (f *flights) resume(owner uint64, nonce string, bind requestBind, session uint64, id, token json.RawMessage, tag uint64) (p *parkedInput, found bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p = f.parked[nonce]; p == nil || p.session != owner {
		return nil, false, errBadState
	}
	if p.bind != bind {
		return nil, false, errOtherRequest // left parked, for the retry of its own request
	}
	f.takeParkedLocked(nonce)
	found, err = f.reqs.Move(p.up, session, id, token, tag)
	return p, found, err
}

// expireParked takes the parked request filed under nonce: no retry came
// in time.
func (f *flights) expireParked(nonce string) *parkedInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.takeParkedLocked(nonce)
}

// parkedEnded records how a parked request's upstream request ended, for
// its retry: its answer or its failure.
func (f *flights) parkedEnded(up int64, final *jsonrpc.Message, failed *jsonrpc.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.parked[f.parkedUp[up]]; p != nil {
		p.final, p.failed = final, failed
	}
}

// addRound files a legacy request whose session is being asked for input.
func (f *flights) addRound(rd *round) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rounds == nil {
		f.rounds = make(map[listenKey]*round)
	}
	f.rounds[listenKey{rd.r.Session, string(rd.r.ID)}] = rd
}

// takeRound takes the round of a session's request: its input is all in,
// or it was cancelled.
func (f *flights) takeRound(session uint64, id []byte) *round {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := listenKey{session, string(id)}
	rd := f.rounds[k]
	delete(f.rounds, k)
	return rd
}

// round routes a legacy session's request again, for its next round of
// input (rounds.go): a new upstream id, which takes over the gate slots of
// the old and its request_timeout.
func (f *flights) round(r idmap.Route, d *routeData, old int64) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	up, err := f.reqs.Add(r)
	if err != nil {
		return 0, err
	}
	d.up.Store(up)
	f.turn.move(old, up)
	f.limit.move(old, up)
	if f.timeout > 0 {
		f.restartTimerLocked(up, d)
	}
	return up, nil
}

// get is the route of up, left in place.
func (f *flights) get(up int64) (idmap.Route, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs.Get(up)
}

// data is what the hub keeps with the route of up; nil if none.
func (f *flights) data(up int64) *routeData {
	r, _ := f.get(up)
	return dataOf(r)
}

// latest is the request of a session that started last among those keep
// accepts; keep runs under the lock and must not call f.
func (f *flights) latest(keep func(idmap.Route) bool) (up int64, r idmap.Route, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs.LatestRoute(keep)
}

// len is the number of requests in flight.
func (f *flights) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs.Len()
}

// holder is the upstream id holding the turn (0 none) and the set of ids
// waiting at either gate, which have caused nothing yet.
func (f *flights) holder() (busy int64, waiting map[int64]bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	holders, waiting := f.turn.state()
	for up := range holders {
		busy = up
	}
	_, limited := f.limit.state()
	for up := range limited {
		waiting[up] = true
	}
	return busy, waiting
}

// turnState is the turn's holders and waiting requests (tests).
func (f *flights) turnState() (holders, waiting map[int64]bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.turn.state()
}

// releaseLocked frees what the request up holds at the gates and appends
// to out the requests that get a slot by it.
func (f *flights) releaseLocked(up int64, d *routeData, out []queued) []queued {
	if d.serial {
		out = f.passTurnLocked(up, out)
	}
	if d.limited {
		out = f.passSlotLocked(up, out)
	}
	return out
}

// passTurnLocked frees the turn up holds, if it holds it; what gets the
// turn by it may wait still for max_concurrency, unless it is input for a
// request that holds its slot already.
func (f *flights) passTurnLocked(up int64, out []queued) []queued {
	next, ok := f.turn.release(up)
	return f.passLocked(next, ok, true, out)
}

// passSlotLocked frees the max_concurrency slot up holds, as
// passTurnLocked the turn.
func (f *flights) passSlotLocked(up int64, out []queued) []queued {
	next, ok := f.limit.release(up)
	return f.passLocked(next, ok, false, out)
}

// passLocked hands a freed turn (or slot) to next, if ok says there is
// one: a request that left the table while it waited passes it on, and
// one given the turn takes its slot too, or waits for it.
func (f *flights) passLocked(next queued, ok, turn bool, out []queued) []queued {
	if !ok {
		return out
	}
	if _, live := f.reqs.Get(next.up); !live {
		return f.releaseLocked(next.up, next.d, out)
	}
	if turn && !next.input && next.d.limited && !f.limit.acquire(next) {
		return out
	}
	return append(out, next)
}
