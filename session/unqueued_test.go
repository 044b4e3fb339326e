//go:build unix

package session_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
)

// oneFrame is an Unqueued transport: it gives one frame, then its second
// read waits for Close; Put keeps what the session sends, up to max frames.
type oneFrame struct {
	frame  []byte
	read   int
	max    int
	mu     sync.Mutex
	put    []outbox.Frame
	done   chan struct{}
	closer sync.Once
}

func (t *oneFrame) ReadFrame() ([]byte, uint64, error) {
	t.read++
	if t.read == 1 {
		return t.frame, 1, nil
	}
	<-t.done
	return nil, 0, net.ErrClosed
}
func (t *oneFrame) Buffered() bool                   { return t.read == 0 }
func (t *oneFrame) WriteFrames([]outbox.Frame) error { panic("an unqueued session has no writer") }
func (t *oneFrame) TryWrite([]outbox.Frame) (ok, more bool) {
	panic("an unqueued session has no outbox")
}
func (t *oneFrame) Close() error { t.closer.Do(func() { close(t.done) }); return nil }
func (t *oneFrame) Flush()       {}
func (t *oneFrame) Put(f outbox.Frame, _ bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.put) >= t.max {
		return errors.New("full")
	}
	t.put = append(t.put, f)
	return nil
}

func (t *oneFrame) frames() []outbox.Frame {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]outbox.Frame(nil), t.put...)
}

// TestUnqueuedSession: over an Unqueued transport the session runs on
// Run's goroutine with no writer: what the handler sends is put on the
// transport at once, in order, during the handler's call; Close ends Run;
// and a transport that takes no more ends the session with ErrSlowClient.
func TestUnqueuedSession(t *testing.T) {
	tr := &oneFrame{frame: []byte(`{"jsonrpc":"2.0","id":7,"method":"a"}`), max: 2, done: make(chan struct{})}
	h := newFakeHandler()
	var during int
	h.onMessage = func(s *session.Session, m *jsonrpc.Message) {
		s.Send(outbox.Frame{Data: []byte(`{"n":1}`), Tag: 1})
		s.SendLater(outbox.Frame{Data: []byte(`{"n":2}`), Tag: 1, Last: true})
		during = len(tr.frames())
		s.Send(outbox.Frame{Data: []byte(`{"n":3}`)}) // past max: the session ends
	}
	s := session.New(session.Config{}, tr)
	var ran error
	done := make(chan struct{})
	go func() {
		defer close(done)
		ran = s.Run(context.Background(), h)
	}()
	<-done
	assert.Equal(t, 2, during, "frames put during the handler's call, with no writer to wait for")
	got := tr.frames()
	require.Len(t, got, 2)
	assert.Equal(t, `{"n":1}`, string(got[0].Data))
	assert.True(t, got[1].Last)
	assert.ErrorIs(t, ran, session.ErrSlowClient)
	assert.ErrorIs(t, s.Err(), session.ErrSlowClient)
	assert.Equal(t, int64(len(`{"n":1}`)+len(`{"n":2}`)), s.Stats().BytesOut)
}

// TestUnqueuedSessionEndsWithItsContext: the end of Run's ctx ends an
// unqueued session, whose transport is then closed.
func TestUnqueuedSessionEndsWithItsContext(t *testing.T) {
	tr := &oneFrame{frame: []byte(`{"jsonrpc":"2.0","method":"n"}`), max: 1, done: make(chan struct{})}
	h := newFakeHandler()
	s := session.New(session.Config{}, tr)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, h) }()
	h.next(t, "the notification")
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	select {
	case <-tr.done:
	default:
		t.Fatal("the transport is not closed")
	}
}

// oneFrame is an unqueued transport.
var _ session.Unqueued = (*oneFrame)(nil)
