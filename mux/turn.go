package mux

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// turn is server_requests = "serialize": at most one interactive request
// (one that may cause a server-to-client request) is in flight at the
// server, so a server request is attributed exactly to its cause. The others
// wait in order. Invariant: busy is the upstream id of the one request sent
// and not settled, 0 none; queue holds requests not yet sent, oldest first,
// at most serialQueueMax of them.
type turn struct {
	// on: requests take turns. Under "serialize" always; under "auto" from
	// the first request of the server's own on.
	on   atomic.Bool
	auto bool

	mu    sync.Mutex
	busy  int64
	queue []queued
}

// Server request policies.
const (
	ServerRequestsAuto      = "auto"
	ServerRequestsLatest    = "latest"
	ServerRequestsSerialize = "serialize"
)

// configure sets the policy, before the turn is used.
func (t *turn) configure(policy string, seen bool) {
	t.auto = policy == "" || policy == ServerRequestsAuto
	t.on.Store(policy == ServerRequestsSerialize || t.auto && seen)
}

// engage: the server sent a request of its own. Under "auto", requests
// take turns from now on; true the first time.
func (t *turn) engage() bool {
	return t.auto && t.on.CompareAndSwap(false, true)
}

// queued is an interactive request waiting for its turn.
type queued struct {
	up    int64
	frame []byte
}

// serialQueueMax bounds the requests waiting for the turn: past it, requests
// go out unserialized rather than wait without limit (attribution falls back
// to "latest" for them).
const serialQueueMax = 4096

// acquire takes the turn for up, or queues its frame; true means the caller
// sends it now.
func (t *turn) acquire(up int64, frame []byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.busy == 0 {
		t.busy = up
		return true
	}
	if len(t.queue) >= serialQueueMax {
		return true
	}
	t.queue = append(t.queue, queued{up, frame})
	return false
}

// release ends up's turn, or takes it out of the queue if it never had
// one. When up held the turn, the oldest waiting request gets it and is
// returned for the caller to send; ok is false when none waits.
func (t *turn) release(up int64) (next queued, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.busy != up {
		t.queue = slices.DeleteFunc(t.queue, func(q queued) bool { return q.up == up })
		return queued{}, false
	}
	t.busy = 0
	if len(t.queue) == 0 {
		return queued{}, false
	}
	next = t.queue[0]
	t.queue[0] = queued{}
	t.queue = t.queue[1:]
	t.busy = next.up
	return next, true
}

// move hands the turn held by old, if it holds it, to new: the same request,
// sent again under another id.
func (t *turn) move(old, new int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.busy == old {
		t.busy = new
	}
}

// holder is the upstream id holding the turn (0 none) and the set of ids
// still waiting, which have caused nothing yet.
func (t *turn) holder() (busy int64, waiting map[int64]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	waiting = make(map[int64]bool, len(t.queue))
	for _, q := range t.queue {
		waiting[q.up] = true
	}
	return t.busy, waiting
}

// release frees the turn held by up and sends the next request waiting for
// it. A request that left the table while it waited (its settle releases it
// too, finding it no longer queued) passes the turn on; one that cannot be
// sent (the server is gone) is failed, which releases the turn in its turn.
func (h *Hub) release(up int64) {
	for {
		next, ok := h.turn.release(up)
		if !ok {
			return
		}
		if _, live := h.reqs.Get(next.up); !live {
			up = next.up
			continue
		}
		if proc := h.life.current(); proc != nil && proc.Send(next.frame) == nil {
			return
		}
		if r, ok := h.reqs.Take(next.up); ok {
			h.fail(r, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server cannot take the request", Reason: jsonrpc.ReasonUpstreamUnavailable})
		}
		return
	}
}
