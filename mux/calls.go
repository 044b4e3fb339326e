package mux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/upstream"
)

// calls are mcpmux's own requests to the server (initialize, ping, and the
// requests it fires for the sessions: subscribe, setLevel, tasks/cancel).
// They go through the hub's id table like any request, under session 0;
// a waiter gets the answer. Invariant: a waiter's channel gets at most one
// message and is then closed, whether an answer came or not.
type calls struct {
	next atomic.Uint64 // makes the ids of mcpmux's own requests unique among them

	mu      sync.Mutex
	waiters map[int64]chan *jsonrpc.Message
}

func newCalls() calls {
	return calls{waiters: make(map[int64]chan *jsonrpc.Message)}
}

// own is a fresh id for a request of mcpmux's own, as the table's route
// keeps it.
func (cs *calls) own(prefix string) json.RawMessage {
	return json.RawMessage(`"` + prefix + strconv.FormatUint(cs.next.Add(1), 10) + `"`)
}

func (cs *calls) wait(up int64) chan *jsonrpc.Message {
	w := make(chan *jsonrpc.Message, 1)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.waiters[up] = w
	return w
}

func (cs *calls) take(up int64) chan *jsonrpc.Message {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	w := cs.waiters[up]
	delete(cs.waiters, up)
	return w
}

// wake hands an answer to its waiter; nil means none will come.
func (cs *calls) wake(up int64, m *jsonrpc.Message) {
	w := cs.take(up)
	if w == nil {
		return // fired: nobody waits
	}
	if m != nil {
		w <- m // buffered for one
	}
	close(w)
}

// wakeAll tells every waiter that no answer will come: the process exited.
func (cs *calls) wakeAll() {
	for _, w := range cs.takeAll() {
		close(w)
	}
}

func (cs *calls) takeAll() map[int64]chan *jsonrpc.Message {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	ws := cs.waiters
	cs.waiters = make(map[int64]chan *jsonrpc.Message)
	return ws
}

// call sends a request of mcpmux's own and waits for its answer, which may
// be an error response.
func (h *Hub) call(ctx context.Context, proc process, method string, params any) (*jsonrpc.Message, error) {
	up, err := h.flights.begin(idmap.Route{Session: 0, ID: h.calls.own("call-"), Method: method, Started: time.Now()})
	if err != nil {
		return nil, err
	}
	frame, err := jsonrpc.Request(json.RawMessage(strconv.FormatInt(up, 10)), method, params)
	if err != nil {
		h.flights.take(up)
		return nil, err
	}
	w := h.calls.wait(up)
	defer func() {
		h.calls.take(up)
		h.flights.take(up)
	}()
	if err := proc.Send(frame); err != nil {
		return nil, sendFailed(ctx, proc, method, err)
	}
	select {
	case m, ok := <-w:
		if !ok {
			return nil, fmt.Errorf("%s: server exited (%s)", method, proc.Exit())
		}
		return m, nil // an error answer too: the caller decides
	case <-proc.Done():
		return nil, fmt.Errorf("%s: server exited (%s)", method, proc.Exit())
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: no answer: %w", method, context.Cause(ctx))
	}
}

// sendFailed is the error of a call whose request could not be sent. A
// process on its way out is waited for (within ctx), so that the error
// says how it ended: "initialize: server exited (signal: killed
// (junk_output))" rather than that it was closing.
func sendFailed(ctx context.Context, proc process, method string, err error) error {
	if errors.Is(err, upstream.ErrClosed) {
		select {
		case <-proc.Done():
			return fmt.Errorf("%s: server exited (%s)", method, proc.Exit())
		case <-ctx.Done():
		}
	}
	return fmt.Errorf("%s: %w", method, err)
}

// fire sends a request of mcpmux's own whose answer nobody waits for (its
// answer, routed to session 0 with no waiter, is dropped).
func (h *Hub) fire(proc process, method string, params any) {
	if proc == nil {
		return
	}
	up, err := h.flights.begin(idmap.Route{Session: 0, ID: h.calls.own("fire-"), Method: method, Started: time.Now()})
	if err != nil {
		return
	}
	frame, err := jsonrpc.Request(json.RawMessage(strconv.FormatInt(up, 10)), method, params)
	if err == nil {
		err = proc.Send(frame)
	}
	if err != nil {
		h.flights.take(up)
	}
}
