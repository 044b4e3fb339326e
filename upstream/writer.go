package upstream

import (
	"errors"
	"os"
	"syscall"
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
		if p.writing {
			// A Flush is writing; it wakes us again if it leaves frames.
			p.mu.Unlock()
			continue
		}
		batch := p.queue
		p.queue = nil
		p.writing = len(batch) > 0
		p.mu.Unlock()

		err := p.writeBatch(batch, &buf)
		clear(batch) // written or dropped: let the frames go while we idle
		if p.cfg.WriteStallTimeout > 0 && len(batch) > 0 {
			// A deadline left behind would fail the next Flush's write
			// once it passed.
			_ = p.stdin.SetWriteDeadline(time.Time{})
		}
		p.doneWriting()
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

// pipeBuf is POSIX's PIPE_BUF on every system mcpmux runs on: a write to a
// pipe of at most this many bytes is atomic, all or nothing.
const pipeBuf = 4096

// Flush writes what SendLater queued. When writeLoop is idle and the queued
// frames fit in one atomic pipe write, Flush writes them itself, without
// blocking: a request then reaches the server with no goroutine handoff.
// Otherwise, or when the pipe is full, it wakes writeLoop, which owns
// stall detection. Flush never blocks.
func (p *Process) Flush() {
	p.mu.Lock()
	if p.closed || len(p.queue) == 0 {
		p.mu.Unlock()
		return
	}
	size := 0
	for _, f := range p.queue {
		size += len(f) + 1
	}
	if p.writing || size > pipeBuf {
		p.mu.Unlock()
		p.wake()
		return
	}
	batch := p.queue
	p.queue = nil
	p.writing = true
	p.mu.Unlock()

	b := p.flushBuf[:0]
	for _, f := range batch {
		b = append(append(b, f...), '\n')
	}
	p.flushBuf = b
	written := false
	// One attempt, not blocking: the callback reports done either way.
	_ = p.rawIn.Write(func(fd uintptr) bool {
		n, err := syscall.Write(int(fd), b)
		written = err == nil && n == len(b)
		return true
	})
	if written {
		clear(batch)
		p.release(size)
		p.doneWriting()
		return
	}
	// Nothing was written (a write this short is atomic): the frames go
	// back ahead of any queued since, for writeLoop, which also meets
	// whatever error there was.
	p.mu.Lock()
	if !p.closed {
		p.queue = append(batch, p.queue...)
	}
	p.mu.Unlock()
	p.doneWriting()
}

// doneWriting ends a writer's turn and wakes writeLoop if frames wait.
func (p *Process) doneWriting() {
	p.mu.Lock()
	p.writing = false
	more := len(p.queue) > 0
	p.mu.Unlock()
	if more {
		p.wake()
	}
}

func (p *Process) wake() {
	select {
	case p.ready <- struct{}{}:
	default:
	}
}
