package mux

import (
	"maps"
	"slices"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// turn is the gate at which requests that may cause a server-to-client
// request take turns, one at a time in flight at the server, so that a
// server request reaching mcpmux meanwhile is exactly that one's. Which
// requests take it is the policy's: under "serialize" every interactive
// one; under "latest" none; under "auto" (the default) those of a kind
// known to ask (kindOf), learned as the server asks, so that every other
// request flows as under "latest".
type turn struct {
	gate

	policy string

	// under flights.mu:
	asks map[string]bool // under "auto": the kinds of request seen causing a server request
	all  bool            // under "auto": every interactive request takes turns, until a kind is learned (a record of an older mcpmux said only that the server asks)
}

// Server request policies.
const (
	ServerRequestsAuto      = "auto"
	ServerRequestsLatest    = "latest"
	ServerRequestsSerialize = "serialize"
)

// configure sets the policies, before the gates are used: asks are the
// kinds remembered to ask, all that the memory says only that the server
// asks.
func (f *flights) configure(policy string, asks []string, all bool, maxConcurrency int) {
	if policy == "" {
		policy = ServerRequestsAuto
	}
	f.turn.max = 1
	f.turn.policy = policy
	f.limit.max = maxConcurrency
	f.turn.asks = make(map[string]bool, len(asks))
	if policy != ServerRequestsAuto {
		return // the memory is auto's alone
	}
	for _, k := range asks {
		f.turn.asks[k] = true
	}
	f.turn.all = all && len(asks) == 0
}

// kindOf is what mcpmux learns of a request whether it asks: its tool for
// tools/call, its prompt for prompts/get, its method for any other.
func kindOf(m *message) string {
	switch m.Method {
	case "tools/call", "prompts/get":
		if name, ok := m.paramString(pName); ok {
			return m.Method + " " + name
		}
	}
	return m.Method
}

// takesTurn reports whether a request of method and kind takes the turn.
func (f *flights) takesTurn(method, kind string) bool {
	if !interactive(method) {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch f.turn.policy {
	case ServerRequestsSerialize:
		return true
	case ServerRequestsAuto:
		return f.turn.all || f.turn.asks[kind]
	}
	return false
}

// learn: a request of kind caused a server request. Under "auto" its kind
// takes turns from now on; true the first time.
func (f *flights) learn(kind string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.turn.policy != ServerRequestsAuto || kind == "" || f.turn.asks[kind] {
		return false
	}
	f.turn.asks[kind] = true
	f.turn.all = false
	return true
}

// asking is the kinds known to ask, sorted, and whether every interactive
// request takes turns.
func (f *flights) asking() (kinds []string, all bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	all = f.turn.policy == ServerRequestsSerialize || f.turn.policy == ServerRequestsAuto && f.turn.all
	return slices.Sorted(maps.Keys(f.turn.asks)), all
}

// release sends the requests a gate let through. One the server cannot
// take is failed, which frees its slots in turn.
func (h *Hub) release(next []queued) {
	for _, q := range next {
		if proc := h.life.current(); proc != nil && q.send(proc) == nil {
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
