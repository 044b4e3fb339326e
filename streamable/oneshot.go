package streamable

import (
	"errors"
	"net"
	"sync"

	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
)

// oneShotTag is the tag of the one request a oneShot carries.
const oneShotTag = 1

// oneShotMax bounds the bytes a oneShot holds that its POST has not
// written yet: past it the client is not reading, and its session ends.
// A listen's notifications are small and keep coming, so it holds less
// (listenMax); these sessions have no outbox, so they are not counted in
// the daemon's bound on queued bytes (session.Config.Budget).
const (
	oneShotMax = session.DefaultOutboxMax
	listenMax  = session.DefaultOutboxHighWater
)

// errOneShotFull: the POST's client has not taken oneShotMax bytes.
var errOneShotFull = errors.New("streamable: the client is not reading its response")

// oneShot is the session.Transport of one request of the 2026-07-28
// binding, and a session.Unqueued one: the session has no outbox and no
// writer, and runs on the goroutine serving the POST. ReadFrame gives the
// request once; the second ReadFrame runs hold, which serves the POST
// (delivering what the session sent, through deliver, to put) until it
// is done or the session ends, and then ReadFrame reports the transport
// closed, which ends the session.
type oneShot struct {
	frame []byte
	taken bool // ReadFrame has given the frame; only the session's reader reads it

	hold func() // run by the second ReadFrame
	put  func(outbox.Frame)
	max  int // oneShotMax, or listenMax

	mu     sync.Mutex
	queue  []outbox.Frame // sent, not yet delivered
	queued int            // the bytes in queue
	wake   chan struct{}  // 1-buffered: queue has frames
	closed bool

	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

func newOneShot(frame []byte, put func(outbox.Frame)) *oneShot {
	return &oneShot{frame: frame, put: put, max: oneShotMax, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// ReadFrame implements session.Transport.
func (t *oneShot) ReadFrame() ([]byte, uint64, error) {
	if !t.taken {
		t.taken = true
		return t.frame, oneShotTag, nil
	}
	if t.hold != nil {
		t.hold()
	} else {
		<-t.done
	}
	return nil, 0, net.ErrClosed
}

// Buffered implements session.Transport: only the request is ever at hand.
func (t *oneShot) Buffered() bool { return !t.taken }

// Put implements session.Unqueued: the frame waits for deliver.
func (t *oneShot) Put(f outbox.Frame, wake bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return net.ErrClosed
	case t.queued > 0 && t.queued+len(f.Data) > t.max:
		return errOneShotFull
	}
	t.queue = append(t.queue, f)
	t.queued += len(f.Data)
	if wake {
		t.wakeLocked()
	}
	return nil
}

// Flush implements session.Unqueued: what Put held goes to deliver.
func (t *oneShot) Flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.queue) > 0 {
		t.wakeLocked()
	}
}

func (t *oneShot) wakeLocked() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// deliver hands what was sent to put, in order, on the caller's goroutine.
// The frame that settles the request goes after the others taken with
// it: a server that writes its last notification about a request just
// after the answer (they came in one read) still has it reach the client,
// whose response the answer ends.
func (t *oneShot) deliver() {
	q := t.take()
	for _, f := range q {
		if !f.Last {
			t.put(f)
		}
	}
	for _, f := range q {
		if f.Last {
			t.put(f)
		}
	}
}

func (t *oneShot) take() []outbox.Frame {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.queue
	t.queue, t.queued = nil, 0
	return q
}

// WriteFrames implements session.Transport: a refusal written before the
// session runs waits for deliver like any frame.
func (t *oneShot) WriteFrames(frames []outbox.Frame) error {
	for _, f := range frames {
		if err := t.Put(f, true); err != nil {
			return err
		}
	}
	return nil
}

// TryWrite implements session.Transport; an unqueued session never calls it.
func (t *oneShot) TryWrite([]outbox.Frame) (ok, more bool) { return false, false }

// Close implements session.Transport: the session ends, and with it what
// the request left in flight (the router cancels it at the server). What
// was sent and not delivered stays for a last deliver.
func (t *oneShot) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.closed = true
		close(t.done)
	})
	return nil
}

// oneShot is an unqueued transport.
var _ session.Unqueued = (*oneShot)(nil)
