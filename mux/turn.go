package mux

import (
	"sync/atomic"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// gates are what holds a request back before the server: the turn, under
// which one interactive request at a time is in flight (so that a server
// request is attributed exactly to its cause), and max_concurrency.
type gates struct {
	turn  turn
	limit gate
}

// turn is server_requests = "serialize" (and "auto", once the server has
// sent a request of its own): at most one interactive request (one that
// may cause a server-to-client request) is in flight at the server.
type turn struct {
	gate

	// on: requests take turns. Under "serialize" always; under "auto" from
	// the first request of the server's own on.
	on   atomic.Bool
	auto bool
}

// Server request policies.
const (
	ServerRequestsAuto      = "auto"
	ServerRequestsLatest    = "latest"
	ServerRequestsSerialize = "serialize"
)

// configure sets the policies, before the gates are used.
func (g *gates) configure(policy string, seen bool, maxConcurrency int) {
	g.turn.max = 1
	g.turn.auto = policy == "" || policy == ServerRequestsAuto
	g.turn.on.Store(policy == ServerRequestsSerialize || g.turn.auto && seen)
	g.limit.max = maxConcurrency
}

// engage: the server sent a request of its own. Under "auto", requests
// take turns from now on; true the first time.
func (t *turn) engage() bool {
	return t.auto && t.on.CompareAndSwap(false, true)
}

// holder is the upstream id holding the turn (0 none) and the set of ids
// waiting at either gate, which have caused nothing yet.
func (g *gates) holder() (busy int64, waiting map[int64]bool) {
	holders, waiting := g.turn.state()
	for up := range holders {
		busy = up
	}
	_, limited := g.limit.state()
	for up := range limited {
		waiting[up] = true
	}
	return busy, waiting
}

// admit passes a request through the gates it is subject to; true means
// the caller sends it now, false that it waits and is sent when its turn
// comes.
func (h *Hub) admit(q queued) bool {
	d := q.d
	if d == nil {
		return true
	}
	if d.serial && !h.gates.turn.acquire(q) {
		return false
	}
	return !d.limited || h.gates.limit.acquire(q)
}

// releaseGates frees what a settled request held at the gates and sends the
// requests that get a slot by it.
func (h *Hub) releaseGates(up int64, d *routeData) {
	if d.serial {
		h.releaseTurn(up)
	}
	if d.limited {
		if next, ok := h.gates.limit.release(up); ok {
			h.sendReleased(next)
		}
	}
}

// releaseTurn frees the turn up holds, if it holds it, and sends what gets
// the turn by it.
func (h *Hub) releaseTurn(up int64) {
	next, ok := h.gates.turn.release(up)
	if !ok {
		return
	}
	// It had waited for the turn; max_concurrency may hold it still, unless
	// it is input for a request that holds its slot already.
	if next.input || !next.d.limited || h.gates.limit.acquire(next) {
		h.sendReleased(next)
	}
}

// sendReleased sends a request that waited at a gate. One that left the
// table while it waited passes its slot on; one that cannot be sent (the
// server is gone) is failed, which frees its slot in turn.
func (h *Hub) sendReleased(q queued) {
	if _, live := h.reqs.Get(q.up); !live {
		h.releaseGates(q.up, q.d)
		return
	}
	if proc := h.life.current(); proc != nil && proc.Send(q.frame) == nil {
		h.sent(q.up, q.d)
		return
	}
	if r, ok := h.reqs.Take(q.up); ok {
		h.fail(r, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server cannot take the request", Reason: jsonrpc.ReasonUpstreamUnavailable})
	}
}
