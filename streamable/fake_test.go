package streamable_test

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
)

// hubEndpoint is a fake server that answers like a hub, per session, and
// tags what it sends as mux does: an answer with its request's tag and
// Last, progress and server requests with the tag of the request that
// caused them, an end marker (no data, Last) for a request cancelled
// before its answer, and what belongs to no request with tag 0.
//
// Methods: initialize; "echo" returns its params; "progress" sends one
// progress notification with the request's token, then answers; "gate"
// sends one progress notification, waits for the test to release it (or
// for its cancellation), sends another and answers; "hold" is "gate"
// without the progress notifications; "notify" sends a
// list_changed notification, then answers; "ask" sends a sampling request,
// then answers. A request id already in flight is answered duplicate_id.
type hubEndpoint struct {
	gate  chan struct{}
	ended chan struct{} // a value per session that ended

	mu     sync.Mutex
	seen   []string // "method id" of every request, in order
	broken int      // frames that came with a line break in them
}

// requests is "method id" of every request the endpoint got.
func (e *hubEndpoint) requests() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.seen...)
}

func (e *hubEndpoint) Full() bool           { return false }
func (e *hubEndpoint) MaxMessageBytes() int { return 1 << 10 }

// fakeSession is one session of a hubEndpoint.
type fakeSession struct {
	e   *hubEndpoint
	t   session.Transport
	ctx context.Context
	wg  sync.WaitGroup

	wmu      sync.Mutex // one write at a time, as the outbox's writer
	mu       sync.Mutex
	inflight map[string]*gateReq // gate requests by id
}

// gateReq is a gate request in flight.
type gateReq struct {
	tag       uint64
	cancelled chan struct{} // closed when the client cancels it
}

func (e *hubEndpoint) Serve(ctx context.Context, t session.Transport, _ session.Peer) error {
	defer func() { e.ended <- struct{}{} }()
	defer t.Close()
	stop := context.AfterFunc(ctx, func() { t.Close() })
	defer stop()
	s := &fakeSession{e: e, t: t, ctx: ctx, inflight: make(map[string]*gateReq)}
	defer s.wg.Wait()
	for {
		frame, tag, err := t.ReadFrame()
		if err != nil {
			return err
		}
		if bytes.ContainsAny(frame, "\r\n") {
			e.mu.Lock()
			e.broken++
			e.mu.Unlock()
		}
		m, err := jsonrpc.Parse(frame)
		if err != nil {
			continue
		}
		switch m.Kind {
		case jsonrpc.KindRequest:
			s.request(m, tag)
		case jsonrpc.KindNotification:
			if m.Method == "notifications/cancelled" {
				s.cancel(m)
			}
		}
	}
}

func (s *fakeSession) write(f outbox.Frame) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.t.WriteFrames([]outbox.Frame{f})
}

func (s *fakeSession) answer(id json.RawMessage, tag uint64, result string) {
	s.write(outbox.Frame{Data: jsonrpc.Response(id, json.RawMessage(result)), Tag: tag, Last: true})
}

func (s *fakeSession) request(m *jsonrpc.Message, tag uint64) {
	token := json.RawMessage("null")
	if sp, ok := m.ParamsPath("_meta", "progressToken"); ok {
		token = json.RawMessage(m.Frame[sp.Start:sp.End])
	}
	progress := func(n int) {
		f, _ := jsonrpc.Notification("notifications/progress", map[string]any{"progressToken": token, "progress": n})
		s.write(outbox.Frame{Data: f, Tag: tag})
	}
	s.e.mu.Lock()
	s.e.seen = append(s.e.seen, m.Method+" "+string(m.ID))
	s.e.mu.Unlock()
	if s.busy(m.ID) {
		e := &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "request id " + string(m.ID) + " is already in flight", Reason: jsonrpc.ReasonDuplicateID}
		s.write(outbox.Frame{Data: e.Response(m.ID), Tag: tag, Last: true})
		return
	}
	switch m.Method {
	case "initialize":
		s.answer(m.ID, tag, `{"protocolVersion":"2025-06-18"}`)
	case "progress":
		progress(1)
		s.answer(m.ID, tag, `"done"`)
	case "gate":
		id, cancelled := m.ID, s.begin(m.ID, tag)
		progress(1)
		s.wg.Go(func() {
			select {
			case <-s.e.gate:
			case <-cancelled:
				return // the end marker went with the cancellation
			case <-s.ctx.Done():
				return
			}
			if s.finish(id) {
				progress(2)
				s.answer(id, tag, `"opened"`)
			}
		})
	case "hold": // as gate, without progress
		id, cancelled := m.ID, s.begin(m.ID, tag)
		s.wg.Go(func() {
			select {
			case <-s.e.gate:
			case <-cancelled:
				return
			case <-s.ctx.Done():
				return
			}
			if s.finish(id) {
				s.answer(id, tag, `"released"`)
			}
		})
	case "notify":
		f, _ := jsonrpc.Notification("notifications/tools/list_changed", nil)
		s.write(outbox.Frame{Data: f})
		s.answer(m.ID, tag, `{}`)
	case "ask":
		f, _ := jsonrpc.Request(json.RawMessage(`"s1"`), "sampling/createMessage", map[string]any{})
		s.write(outbox.Frame{Data: f, Tag: tag})
		s.answer(m.ID, tag, `{}`)
	default:
		s.answer(m.ID, tag, string(m.Params))
	}
}

// cancel ends a gate request in flight: its stream gets the end marker
// instead of an answer, under the tag kept with it (as mux keeps it with
// the route).
func (s *fakeSession) cancel(m *jsonrpc.Message) {
	sp, ok := m.ParamsPath("requestId")
	if !ok {
		return
	}
	if g := s.take(m.Frame[sp.Start:sp.End]); g != nil {
		close(g.cancelled)
		s.write(outbox.Frame{Tag: g.tag, Last: true})
	}
}

func (s *fakeSession) busy(id json.RawMessage) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight[string(id)] != nil
}

func (s *fakeSession) begin(id json.RawMessage, tag uint64) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := &gateReq{tag: tag, cancelled: make(chan struct{})}
	s.inflight[string(id)] = g
	return g.cancelled
}

// take takes a gate request out of flight; nil if it is not in flight.
func (s *fakeSession) take(id []byte) *gateReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.inflight[string(id)]
	delete(s.inflight, string(id))
	return g
}

// finish takes a gate request out of flight; false if it was cancelled.
func (s *fakeSession) finish(id json.RawMessage) bool { return s.take(id) != nil }
