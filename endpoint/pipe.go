package endpoint

import (
	"io"
	"net"
	"sync"

	"github.com/mcpmux/mcpmux/outbox"
)

// pipeDepth is how many frames the endpoint may have written to a member's
// session before it waits for that session to read them.
const pipeDepth = 64

// pipe is the in-process transport of one member session: the member's
// router reads what the endpoint writes, and what the router writes is
// handed to deliver on the session's writer goroutine. It is the
// session.Transport the router serves.
type pipe struct {
	in      chan frame // endpoint → router
	closed  chan struct{}
	once    sync.Once
	deliver func(frame) // router → endpoint; never blocks
	flush   func()      // after each run of frames delivered
}

func newPipe(deliver func(frame), flush func()) *pipe {
	return &pipe{in: make(chan frame, pipeDepth), closed: make(chan struct{}), deliver: deliver, flush: flush}
}

// ReadFrame returns the next frame the endpoint wrote, with its tag, or
// io.EOF once the pipe is closed.
func (p *pipe) ReadFrame() ([]byte, uint64, error) {
	select {
	case f := <-p.in:
		return f.data, f.tag, nil
	case <-p.closed:
		return nil, 0, io.EOF
	}
}

// Buffered reports whether a frame waits to be read.
func (p *pipe) Buffered() bool { return len(p.in) > 0 }

// WriteFrames hands the router's frames to the endpoint.
func (p *pipe) WriteFrames(frames []outbox.Frame) error {
	if p.isClosed() {
		return net.ErrClosed
	}
	for _, f := range frames {
		if f.Data != nil { // nil: the end of what a tag brings, which the calls' answers say
			p.deliver(frame{f.Data, f.Tag})
		}
	}
	p.flush()
	return nil
}

// TryWrite hands the frames over at once, on the goroutine of the router
// that flushes them: delivering never blocks (it only queues frames for
// the client, and never writes to a member).
func (p *pipe) TryWrite(frames []outbox.Frame) (ok, more bool) {
	return p.WriteFrames(frames) == nil, false
}

// Close ends the pipe; ReadFrame then reports io.EOF.
func (p *pipe) Close() error {
	p.once.Do(func() { close(p.closed) })
	return nil
}

func (p *pipe) isClosed() bool {
	select {
	case <-p.closed:
		return true
	default:
		return false
	}
}

// write gives the router a frame, waiting while it has pipeDepth unread;
// false when the pipe is closed or stop is.
func (p *pipe) write(stop <-chan struct{}, f frame) bool {
	select {
	case p.in <- f:
		return true
	case <-p.closed:
		return false
	case <-stop:
		return false
	}
}
