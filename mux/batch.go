package mux

import (
	"bytes"
	"errors"
	"sync"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/session"
)

// batch gathers the answers to one JSON-RPC batch (protocol 2025-03-26
// only) and sends them as one array when the last has come. A batch of
// notifications alone gets no answer.
type batch struct {
	sess *session.Session

	mu       sync.Mutex
	answers  [][]byte
	waiting  int  // forwarded requests not yet answered
	handling bool // elements still being handled
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

func (b *batch) flushIfComplete() {
	if answers := b.complete(); answers != nil {
		b.sess.Send(append(append([]byte{'['}, bytes.Join(answers, []byte{','})...), ']'))
	}
}

// complete takes the answers once the last has come; nil before, and after.
func (b *batch) complete() [][]byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.handling || b.waiting > 0 {
		return nil
	}
	answers := b.answers
	b.answers = nil
	return answers
}

// HandleBatch implements session.Handler.
func (c *client) HandleBatch(s *session.Session, frame []byte) {
	if c.negotiated() != "2025-03-26" {
		c.fail(c, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "batches are only allowed with protocol version 2025-03-26", Reason: jsonrpc.ReasonBatchNotSupported})
		return
	}
	elems, err := jsonrpc.SplitBatch(frame)
	if err != nil {
		var e *jsonrpc.Error
		errors.As(err, &e)
		c.fail(c, nil, e)
		return
	}
	b := &batch{sess: s, handling: true}
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
