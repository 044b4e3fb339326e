package socket

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"
)

// Backoff bounds for temporary accept errors.
const (
	minAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
)

// Serve accepts connections from l until ctx is done or Accept fails with an
// error that is not temporary, and runs handle(ctx, c) in a new goroutine for
// each. The handler owns c and must close it. When ctx is done Serve closes l.
// It returns only after every handler it started has returned: nil when ctx
// ended it, otherwise the accept error (l is then left to the caller).
//
// Temporary accept errors (out of file descriptors or memory) are retried
// after a pause that starts at 5ms and doubles up to 1s; the first one of
// each streak is logged at Warn to l's Logger when l is a *Listener.
func Serve(ctx context.Context, l net.Listener, handle func(ctx context.Context, c net.Conn)) error {
	var handlers sync.WaitGroup
	defer handlers.Wait()

	// Closing l is what unblocks Accept when ctx ends.
	stopped := make(chan struct{})
	var closer sync.WaitGroup
	closer.Go(func() {
		select {
		case <-ctx.Done():
			l.Close()
		case <-stopped:
		}
	})
	defer closer.Wait()
	defer close(stopped)

	var delay time.Duration
	for {
		c, err := l.Accept()
		if err == nil {
			delay = 0
			handlers.Go(func() { handle(ctx, c) })
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		if !isTemporary(err) {
			return err
		}
		if delay == 0 {
			delay = minAcceptBackoff
			loggerOf(l).Warn("accept failed; retrying with backoff", "addr", l.Addr().String(), "err", err)
		} else {
			delay = min(2*delay, maxAcceptBackoff)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// isTemporary reports whether an accept error is worth retrying: the
// listener is fine, the process or system is short of a resource.
func isTemporary(err error) bool {
	for _, errno := range []syscall.Errno{
		syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.EINTR, syscall.EAGAIN,
	} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// loggerOf returns the logger l carries, if it carries one.
func loggerOf(l net.Listener) *slog.Logger {
	if lg, ok := l.(interface{ logger() *slog.Logger }); ok {
		return lg.logger()
	}
	return slog.New(slog.DiscardHandler)
}
