package mux

import (
	"bytes"
	"errors"
	"sync"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
)

// batch gathers the answers to one JSON-RPC batch (protocol 2025-03-26
// only) and sends them as one array when the last has come. A batch of
// notifications alone gets no answer.
type batch struct {
	sess *session.Session
	t    uint64 // the tag of the frame it came in

	mu       sync.Mutex
	answers  [][]byte
	waiting  int  // forwarded requests not yet answered
	handling bool // elements still being handled
	flushed  bool // its answer went
}

func (b *batch) reply(frame []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.answers = append(b.answers, frame)
}

func (b *batch) pending() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiting++
}

// done counts in the answer (or the silence, when cancelled) of one
// forwarded request.
func (b *batch) done() {
	b.count(-1, false)
	b.flushIfComplete()
}

// handled: every element has been handled; only forwarded requests remain.
func (b *batch) handled() {
	b.count(0, true)
	b.flushIfComplete()
}

func (b *batch) count(waiting int, handled bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiting += waiting
	b.handling = b.handling && !handled
}

func (b *batch) tag() uint64 { return b.t }

func (b *batch) flushIfComplete() {
	answers, done := b.complete()
	switch {
	case !done:
	case answers != nil:
		b.sess.Send(outbox.Frame{Data: append(append([]byte{'['}, bytes.Join(answers, []byte{','})...), ']'), Tag: b.t, Last: true})
	default:
		// Nothing to answer (every request cancelled, or only
		// notifications): the transport still hears the batch is settled.
		b.sess.Send(outbox.Frame{Tag: b.t, Last: true})
	}
}

// complete takes the answers once the last has come; done is true once,
// then.
func (b *batch) complete() (answers [][]byte, done bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.handling || b.waiting > 0 || b.flushed {
		return nil, false
	}
	b.flushed = true
	answers, b.answers = b.answers, nil
	return answers, true
}

// HandleBatch implements session.Handler.
func (c *client) HandleBatch(s *session.Session, frame []byte, tag uint64) {
	out := answerTo{c, tag}
	if c.negotiated() != "2025-03-26" {
		c.fail(out, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "batches are only allowed with protocol version 2025-03-26", Reason: jsonrpc.ReasonBatchNotSupported})
		return
	}
	elems, err := jsonrpc.SplitBatch(frame)
	if err != nil {
		var e *jsonrpc.Error
		errors.As(err, &e)
		c.fail(out, nil, e)
		return
	}
	b := &batch{sess: s, t: tag, handling: true}
	for _, el := range elems {
		m, err := jsonrpc.Parse(el)
		if err != nil {
			var e *jsonrpc.Error
			errors.As(err, &e)
			c.fail(b, m.ID, e)
			continue
		}
		if m.Kind == jsonrpc.KindRequest && m.Method == "initialize" {
			c.fail(b, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "initialize cannot be part of a batch", Reason: jsonrpc.ReasonInvalidRequest})
			continue
		}
		c.handle(m, b)
	}
	b.handled()
}
