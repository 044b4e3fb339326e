package streamable

import (
	"net"
	"sync"

	"github.com/mcpmux/mcpmux/outbox"
)

// oneShotTag is the tag of the one request a oneShot carries.
const oneShotTag = 1

// oneShot is the session.Transport of one request of the 2026-07-28
// binding: ReadFrame gives the request once and then waits for Close; every
// frame that comes back goes to put, which places it on the POST's
// response (or, for mcpmux's own requests, keeps it).
type oneShot struct {
	frame []byte
	taken bool // ReadFrame has given the frame; only the session's read goroutine reads it

	put       func(outbox.Frame) // called by the session's writer, one frame at a time
	done      chan struct{}      // closed by Close
	closeOnce sync.Once
}

func newOneShot(frame []byte, put func(outbox.Frame)) *oneShot {
	return &oneShot{frame: frame, put: put, done: make(chan struct{})}
}

// ReadFrame implements session.Transport.
func (t *oneShot) ReadFrame() ([]byte, uint64, error) {
	if !t.taken {
		t.taken = true
		return t.frame, oneShotTag, nil
	}
	<-t.done
	return nil, 0, net.ErrClosed
}

// Buffered implements session.Transport: only the request is ever at hand.
func (t *oneShot) Buffered() bool { return !t.taken }

// WriteFrames implements session.Transport.
func (t *oneShot) WriteFrames(frames []outbox.Frame) error {
	for _, f := range frames {
		select {
		case <-t.done:
			return net.ErrClosed
		default:
		}
		t.put(f)
	}
	return nil
}

// TryWrite implements session.Transport: the writes may block, so they are
// left to the session's writer.
func (t *oneShot) TryWrite([]outbox.Frame) (ok, more bool) { return false, false }

// Close implements session.Transport: the session ends, and with it what
// the request left in flight (the router cancels it at the server).
func (t *oneShot) Close() error {
	t.closeOnce.Do(func() { close(t.done) })
	return nil
}
