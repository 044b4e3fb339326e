package outbox

import (
	"syscall"

	"github.com/mcpmux/mcpmux/internal/rawio"
)

// TryWriteRaw is the heart of a Writer's TryWrite on a descriptor in the
// runtime's poller (a socket, a pipe): it writes b as far as the
// descriptor takes it without blocking. It reports false when nothing was
// written (the buffer is full, or there is an error, which the next
// blocking write meets); when only part was, it reports more and returns a
// copy of the rest, which the Writer must send first on its next write.
// A Writer that tries often keeps a RawWriter instead, which does the same
// without allocating for each write.
func TryWriteRaw(raw syscall.RawConn, b []byte) (ok, more bool, rest []byte) {
	var w RawWriter
	return w.TryWrite(raw, b)
}

// RawWriter is TryWriteRaw for one Writer, which keeps it (its zero value
// is ready) and never calls it from two goroutines at once: the function
// it hands the descriptor is made once, not for each write.
type RawWriter struct {
	b  []byte
	n  int
	fn func(fd uintptr) bool // w.write, bound on first use
}

// TryWrite is TryWriteRaw(raw, b).
func (w *RawWriter) TryWrite(raw syscall.RawConn, b []byte) (ok, more bool, rest []byte) {
	if w.fn == nil {
		w.fn = w.write
	}
	w.b, w.n = b, 0
	err := raw.Write(w.fn)
	n := w.n
	w.b = nil // hold no reference to the caller's buffer
	switch {
	case err != nil || n <= 0:
		return false, false, nil
	case n < len(b):
		return true, true, append([]byte(nil), b[n:]...)
	}
	return true, false, nil
}

// write writes w.b from w.n on fd until it is all written or fd would
// block; it is done either way: it never waits for the descriptor.
func (w *RawWriter) write(fd uintptr) bool {
	for w.n < len(w.b) {
		m, errno := rawio.Write(fd, w.b[w.n:])
		if errno != 0 {
			if errno == syscall.EINTR {
				continue
			}
			return true // EAGAIN, or an error the blocking write will meet
		}
		w.n += m
	}
	return true
}
