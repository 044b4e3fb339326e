package session

import (
	"context"
	"errors"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// readAhead is one frame read while the read loop is held up in a handler
// (Await): reading it is how the session sees that the client went away.
// The read loop takes it before it reads again. Only one is outstanding at
// a time, so the transport is never read by two goroutines at once.
type readAhead struct {
	done  chan struct{} // closed once the fields are set
	frame []byte
	tag   uint64
	err   error
}

// gone reports whether the read says the client has left: any error but a
// half-close (the client still wants its answers) or a frame over the size
// limit (one message, which the read loop answers).
func (r *readAhead) gone() bool {
	var tooLarge *jsonrpc.TooLargeError
	return r.err != nil && !errors.Is(r.err, ErrHalfClosed) && !errors.As(r.err, &tooLarge)
}

// Await runs wait, which holds up the reading of this session's messages (a
// handler that waits for its server to start), with a context that is also
// done when the client leaves meanwhile: the session reads its next frame
// ahead to see the connection end, and keeps that frame for the read loop.
// It must be called from a Handler method, on the read loop's goroutine.
func (s *Session) Await(ctx context.Context, wait func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ra := s.startAhead()
	watched := make(chan struct{})
	go func() { // owned by Await, which waits for watched
		defer close(watched)
		select {
		case <-ra.done:
			if ra.gone() {
				cancel(ra.err)
			}
		case <-ctx.Done():
		}
	}()
	err := wait(ctx)
	cancel(nil)
	<-watched
	return err
}

// startAhead starts a read ahead, or returns the one outstanding. The
// goroutine ends when a frame comes or the transport is closed; Run waits
// for it.
func (s *Session) startAhead() *readAhead {
	if s.ahead != nil {
		return s.ahead
	}
	ra := &readAhead{done: make(chan struct{})}
	s.ahead = ra
	s.aheadWG.Go(func() {
		ra.frame, ra.tag, ra.err = s.t.ReadFrame()
		close(ra.done)
	})
	return ra
}

// next is the read loop's next frame: the one read ahead, if any, else a
// fresh read.
func (s *Session) next(ctx context.Context) ([]byte, uint64, error) {
	ra := s.ahead
	if ra == nil {
		return s.t.ReadFrame()
	}
	select {
	case <-ra.done:
	case <-ctx.Done():
		return nil, 0, context.Cause(ctx)
	}
	s.ahead = nil
	return ra.frame, ra.tag, ra.err
}
