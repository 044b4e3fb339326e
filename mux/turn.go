package mux

import (
	"sync/atomic"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

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
func (f *flights) configure(policy string, seen bool, maxConcurrency int) {
	f.turn.max = 1
	f.turn.auto = policy == "" || policy == ServerRequestsAuto
	f.turn.on.Store(policy == ServerRequestsSerialize || f.turn.auto && seen)
	f.limit.max = maxConcurrency
}

// engage: the server sent a request of its own. Under "auto", requests
// take turns from now on; true the first time.
func (t *turn) engage() bool {
	return t.auto && t.on.CompareAndSwap(false, true)
}

// release sends the requests a gate let through. One the server cannot
// take is failed, which frees its slots in turn.
func (h *Hub) release(next []queued) {
	for _, q := range next {
		if proc := h.life.current(); proc != nil && proc.Send(q.frame) == nil {
			h.flights.sent(q.up, q.d)
			continue
		}
		if r, ok := h.flights.take(q.up); ok {
			h.fail(r, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server cannot take the request", Reason: jsonrpc.ReasonUpstreamUnavailable})
		}
	}
}

// settle stops a request's timer and frees its gates, and sends what gets
// a slot by it.
func (h *Hub) settle(d *routeData) { h.release(h.flights.settle(d)) }
