package upstream

import (
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/mcpmux/mcpmux/outbox"
)

// coalesceBytes: frames shorter than this are gathered into one buffer and
// written together; longer ones are written from the caller's slice, never
// copied.
const coalesceBytes = 64 << 10

// pipeBuf is POSIX's PIPE_BUF on every system mcpmux runs on: a write to a
// pipe of at most this many bytes is atomic, all or nothing. It is the most
// a Flush writes itself.
const pipeBuf = 4096

// errStalled: the server accepted no byte for WriteStallTimeout.
var errStalled = errors.New("server stalled: stdin not read")

var newline = []byte{'\n'}

// writeLoop is the process's writer goroutine, the only code that writes
// to the server's stdin and may block. It ends when the process is on its
// way out, on a write error, or on a stall.
func (p *Process) writeLoop() {
	err := p.queue.Run(p.closing)
	switch {
	case err == nil:
		return
	case errors.Is(err, errStalled):
		p.log.Warn("server stalled: no byte of its stdin read; killing it", "timeout", p.cfg.WriteStallTimeout, "queued", p.Queued())
		p.Kill(ReasonStalled)
		return
	case isClosed(p.closing):
		return // we closed stdin ourselves
	}
	// Usually EPIPE from a server that has exited; one that closed its
	// stdin and lives on can take no more requests.
	p.log.Debug("write to server stdin", "error", err)
	p.shut()
	p.expectExit(ReasonStdinClosed)
}

// stdinWriter is the outbox.Writer of a server's stdin: one frame per
// line, small frames gathered into one write, and a server that stops
// reading caught by WriteStallTimeout.
type stdinWriter struct {
	f     *os.File
	raw   syscall.RawConn // f's, for TryWrite
	tw    outbox.RawWriter
	stall time.Duration // WriteStallTimeout; 0: no stall detection
	buf   []byte        // frames gathered for one write
	rest  []byte        // what a partial TryWrite left, written first next time
}

// WriteFrames implements outbox.Writer.
func (w *stdinWriter) WriteFrames(frames []outbox.Frame) error {
	if w.stall > 0 {
		// A deadline left behind would refuse the next TryWrite once it
		// passed.
		defer w.f.SetWriteDeadline(time.Time{})
	}
	b := append(w.buf[:0], w.rest...)
	w.rest = nil
	for _, fr := range frames {
		f := fr.Data
		switch {
		case f == nil:
			continue
		case len(f) < coalesceBytes:
			b = append(append(b, f...), '\n')
			continue
		}
		if len(b) > 0 {
			if err := w.writeAll(b); err != nil {
				return err
			}
			b = b[:0]
		}
		if err := w.writeAll(f); err != nil {
			return err
		}
		if err := w.writeAll(newline); err != nil {
			return err
		}
	}
	w.keep(b)
	if len(b) == 0 {
		return nil
	}
	return w.writeAll(b)
}

// TryWrite implements outbox.Writer: one write that does not block. The
// queue hands it at most pipeBuf bytes, which a pipe takes whole or not at
// all.
func (w *stdinWriter) TryWrite(frames []outbox.Frame) (ok, more bool) {
	if len(w.rest) > 0 {
		return false, false
	}
	b := w.buf[:0]
	for _, f := range frames {
		if f.Data != nil {
			b = append(append(b, f.Data...), '\n')
		}
	}
	if len(b) == 0 {
		return true, false
	}
	defer w.keep(b)
	ok, more, w.rest = w.tw.TryWrite(w.raw, b)
	return ok, more
}

// writeAll writes b to stdin. With stall detection on, each write gets
// WriteStallTimeout; a write that times out having moved some bytes made
// progress and gets a fresh window, one that moved none is a stall. So a
// stall is noticed between one and two timeouts after the last byte taken.
func (w *stdinWriter) writeAll(b []byte) error {
	for {
		if w.stall > 0 {
			// Cannot fail on our pipe, which is in the runtime poller.
			_ = w.f.SetWriteDeadline(time.Now().Add(w.stall))
		}
		n, err := w.f.Write(b)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return err
		case n == 0:
			return errStalled
		}
		b = b[n:]
	}
}

// keep holds on to b as the gathering buffer, unless it grew large.
func (w *stdinWriter) keep(b []byte) {
	if cap(b) <= 2*coalesceBytes {
		w.buf = b[:0]
	} else {
		w.buf = nil
	}
}
