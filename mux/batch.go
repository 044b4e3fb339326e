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

	mu       sync.Mutex
	answers  [][]byte
	waiting  int  // forwarded requests not yet answered
	handling bool // elements still being handled
}

func (b *batch) reply(frame []byte) {
	b.mu.Lock()
	b.answers = append(b.answers, frame)
	b.mu.Unlock()
}

func (b *batch) pending() {
	b.mu.Lock()
	b.waiting++
	b.mu.Unlock()
}

// done counts in the answer (or the silence, when cancelled) of one
// forwarded request.
func (b *batch) done() {
	b.mu.Lock()
	b.waiting--
	b.mu.Unlock()
	b.flushIfComplete()
}

func (b *batch) flushIfComplete() {
	b.mu.Lock()
	if b.handling || b.waiting > 0 || b.answers == nil {
		b.mu.Unlock()
		return
	}
	answers := b.answers
	b.answers = nil
	b.mu.Unlock()
	b.sess.Send(outbox.Frame{Data: append(append([]byte{'['}, bytes.Join(answers, []byte{','})...), ']')})
}

// HandleBatch implements session.Handler. The tag is not used yet.
func (c *client) HandleBatch(s *session.Session, frame []byte, _ uint64) {
	c.mu.Lock()
	version := c.version
	c.mu.Unlock()
	if version != "2025-03-26" {
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
	b.mu.Lock()
	b.handling = false
	b.mu.Unlock()
	b.flushIfComplete()
}
