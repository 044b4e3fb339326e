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
	in      chan []byte // endpoint → router
	closed  chan struct{}
	once    sync.Once
	deliver func(frame []byte) // router → endpoint; never blocks for long
}

func newPipe(deliver func([]byte)) *pipe {
	return &pipe{in: make(chan []byte, pipeDepth), closed: make(chan struct{}), deliver: deliver}
}

// ReadFrame returns the next frame the endpoint wrote, or io.EOF once the
// pipe is closed.
func (p *pipe) ReadFrame() ([]byte, uint64, error) {
	select {
	case f := <-p.in:
		return f, 0, nil
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
		if f.Data != nil {
			p.deliver(f.Data)
		}
	}
	return nil
}

// TryWrite writes nothing: frames reach the endpoint on the writer
// goroutine only, never on the router's.
func (p *pipe) TryWrite([]outbox.Frame) (ok, more bool) { return false, false }

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
func (p *pipe) write(stop <-chan struct{}, frame []byte) bool {
	select {
	case p.in <- frame:
		return true
	case <-p.closed:
		return false
	case <-stop:
		return false
	}
}
