package upstream

import (
	"errors"
	"os"
	"time"
)

// coalesceBytes: frames shorter than this are gathered into one buffer and
// written together; longer ones are written from the caller's slice, never
// copied.
const coalesceBytes = 64 << 10

// errStalled: the server accepted no byte for WriteStallTimeout.
var errStalled = errors.New("server stalled: stdin not read")

var newline = []byte{'\n'}

// writeLoop is the only writer to the server's stdin. It ends when the
// process is on its way out, on a write error, or on a stall.
func (p *Process) writeLoop() {
	var buf []byte
	for {
		select {
		case <-p.ready:
		case <-p.closing:
			return
		}
		p.mu.Lock()
		batch := p.queue
		p.queue = nil
		p.mu.Unlock()

		err := p.writeBatch(batch, &buf)
		clear(batch) // written or dropped: let the frames go while we idle
		switch {
		case err == nil:
			continue
		case errors.Is(err, errStalled):
			p.log.Warn("server stalled: no byte of its stdin read; killing it", "timeout", p.cfg.WriteStallTimeout, "queued", p.Queued())
			p.Kill(ReasonStalled)
			return
		}
		select {
		case <-p.closing:
			return // we closed stdin ourselves
		default:
		}
		// Usually EPIPE from a server that has exited; one that closed its
		// stdin and lives on can take no more requests.
		p.log.Debug("write to server stdin", "error", err)
		p.shut()
		p.expectExit(ReasonStdinClosed)
		return
	}
}

// writeBatch writes each frame followed by a newline, releasing queued
// bytes as they are accepted.
func (p *Process) writeBatch(batch [][]byte, buf *[]byte) error {
	for i := 0; i < len(batch); {
		if f := batch[i]; len(f) >= coalesceBytes {
			if err := p.writeAll(f); err != nil {
				return err
			}
			if err := p.writeAll(newline); err != nil {
				return err
			}
			p.release(len(f) + 1)
			i++
			continue
		}
		b := (*buf)[:0]
		for ; i < len(batch) && len(batch[i]) < coalesceBytes && len(b)+len(batch[i])+1 <= coalesceBytes; i++ {
			b = append(append(b, batch[i]...), '\n')
		}
		*buf = b
		if err := p.writeAll(b); err != nil {
			return err
		}
		p.release(len(b))
	}
	return nil
}

// writeAll writes b to stdin. With stall detection on, each write gets
// WriteStallTimeout; a write that times out having moved some bytes made
// progress and gets a fresh window, one that moved none is a stall. So a
// stall is noticed between one and two timeouts after the last byte taken.
func (p *Process) writeAll(b []byte) error {
	for {
		if p.cfg.WriteStallTimeout > 0 {
			// Cannot fail on our pipe, which is in the runtime poller.
			_ = p.stdin.SetWriteDeadline(time.Now().Add(p.cfg.WriteStallTimeout))
		}
		n, err := p.stdin.Write(b)
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

// release takes n written bytes off the queue count, and wakes the
// WaitWritable callers when the count falls back to the soft bound.
func (p *Process) release(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return // shut has dropped the count
	}
	p.queued -= n
	if p.queued <= p.cfg.WriteQueueBytes && !p.roomOpen {
		close(p.room)
		p.roomOpen = true
	}
}
