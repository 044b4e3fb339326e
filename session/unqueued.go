package session

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"

	"github.com/mcpmux/mcpmux/outbox"
)

// Unqueued is a Transport that takes each frame at once, from any
// goroutine, without blocking: it hands them to a goroutine of its own
// user's (the one request of a 2026-07-28 POST, whose handler writes its
// response). Its session has no outbox and no writer goroutine: Send and
// SendLater put the frame straight on the transport, and the session runs
// on the goroutine that calls Run. Put returns an error once the
// transport holds more than it will (a client that does not read); the
// session then ends with ErrSlowClient.
type Unqueued interface {
	Transport
	// Put hands the transport a frame; wake says the frame is to go now,
	// else it waits for the next Put with wake or Flush (SendLater's run).
	Put(f outbox.Frame, wake bool) error
	// Flush sends what Put held.
	Flush()
}

// closedRoom stands for the outbox's room signal of an unqueued session,
// which always has room.
var closedRoom = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// runUnqueued is Run for an unqueued session: the read loop on the
// caller's goroutine, and the end of ctx watched by one function run when
// it comes (waited for).
func (s *Session) runUnqueued(ctx context.Context, h Handler) error {
	var wg sync.WaitGroup
	wg.Add(1)
	stop := context.AfterFunc(ctx, func() {
		defer wg.Done()
		s.closeWith(context.Cause(ctx))
	})
	s.closeWith(s.readLoop(ctx, h)) // closes the transport
	if stop() {
		wg.Done() // ctx did not end: its function will never run
	}
	wg.Wait()
	s.aheadWG.Wait() // the transport is closed: its read has returned
	return s.result()
}

// put hands a frame to an unqueued transport; a transport that takes no
// more ends the session.
func (s *Session) put(f outbox.Frame, wake bool) error {
	if err := s.direct.Put(f, wake); err != nil {
		if s.isDone() {
			return ErrClosed
		}
		s.Logger().Warn("evicting a client that stopped reading", "error", err)
		s.closeWith(ErrSlowClient)
		return ErrSlowClient
	}
	s.bytesOut.Add(int64(len(f.Data)))
	return nil
}

// Logger is the session's logger, tagged with its id. It is made on first
// use: a session of one request that logs nothing never clones it.
func (s *Session) Logger() *slog.Logger {
	s.logOnce.Do(func() { s.log = s.base.With("session", s.cfg.ID) })
	return s.log
}

// result is what Run returns once the session has ended.
func (s *Session) result() error {
	if errors.Is(s.err, io.EOF) || errors.Is(s.err, net.ErrClosed) {
		return nil
	}
	return s.err
}
