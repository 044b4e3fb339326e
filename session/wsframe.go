package session

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/mcpmux/mcpmux/outbox"
)

// wsWriter writes the server's side of a WebSocket: unmasked frames, each
// message in one final frame, straight to the connection. It does so
// itself, rather than through gorilla/websocket's writer, so that a run of
// messages goes out in one write, and one that the connection takes at once
// can be written without blocking (TryWrite) by the goroutine that produced
// it. gorilla/websocket still reads; every frame we write, control frames
// included, goes through here, under mu. (gorilla writes one frame of its
// own: the close frame with which it answers a client's protocol error,
// when the connection is ending anyway.)
type wsWriter struct {
	mu      sync.Mutex
	conn    net.Conn
	raw     syscall.RawConn // conn's, when it has one
	tw      outbox.RawWriter
	timeout time.Duration // for each blocking write
	buf     []byte        // messages gathered for one write
	bufs    net.Buffers   // a large message: its header and payload
	rest    []byte        // what a partial TryWrite left; written first
	closed  bool          // a close frame went out: nothing more may
}

// errCloseSent: the close frame has been written; the connection takes no
// more messages.
var errCloseSent = errors.New("session: WebSocket close frame sent")

// WebSocket opcodes (RFC 6455, section 5.2).
const (
	opText  = 0x1
	opClose = 0x8
	opPing  = 0x9
	opPong  = 0xA
)

func newWSWriter(conn net.Conn, timeout time.Duration) *wsWriter {
	w := &wsWriter{conn: conn, timeout: timeout}
	if sc, ok := conn.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			w.raw = raw
		}
	}
	return w
}

// appendHeader appends the header of a final, unmasked frame.
func appendHeader(b []byte, op byte, n int) []byte {
	b = append(b, 0x80|op)
	switch {
	case n < 126:
		return append(b, byte(n))
	case n <= 0xFFFF:
		return binary.BigEndian.AppendUint16(append(b, 126), uint16(n))
	default:
		return binary.BigEndian.AppendUint64(append(b, 127), uint64(n))
	}
}

// writeMessages writes each frame as a text message, small ones gathered
// into one write, large ones from their own slice. A write fails only when
// the client takes no byte of it for the timeout (writeAll).
func (w *wsWriter) writeMessages(frames []outbox.Frame) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errCloseSent
	}
	b := append(w.buf[:0], w.rest...)
	w.rest = nil
	for _, fr := range frames {
		f := fr.Data
		switch {
		case f == nil:
			continue
		case len(f) < gatherMax:
			b = append(appendHeader(b, opText, len(f)), f...)
			release(fr)
			continue
		}
		b = appendHeader(b, opText, len(f))
		if err := w.writeLarge(b, fr); err != nil {
			return err
		}
		b = w.buf[:0]
	}
	w.keep(b)
	if len(b) == 0 {
		return nil
	}
	w.bufs = append(w.bufs[:0], b)
	return writeAll(w.conn, &w.bufs, w.timeout)
}

// writeLarge writes head, the frames gathered so far and fr's header, then
// fr's payload from its own slice, and gives fr's buffer back: w.bufs, kept
// for the next, refers to neither once it returns.
func (w *wsWriter) writeLarge(head []byte, fr outbox.Frame) error {
	w.bufs = append(w.bufs[:0], head, fr.Data)
	bufs := w.bufs // WriteTo consumes the copy
	err := writeAll(w.conn, &bufs, w.timeout)
	clear(w.bufs)
	release(fr)
	return err
}

// writeAll writes bufs to conn, consuming them as they go out. Each write
// gets timeout; one that times out having moved some bytes made progress
// and gets a fresh one, one that moved none means the client stopped
// reading. So a slow client, on a starved machine, gets its bytes late
// rather than losing its connection, and a stalled one is noticed between
// one and two timeouts after its last byte taken.
func writeAll(conn net.Conn, bufs *net.Buffers, timeout time.Duration) error {
	for {
		conn.SetWriteDeadline(time.Now().Add(timeout))
		n, err := bufs.WriteTo(conn)
		var ne net.Error
		if err == nil || n == 0 || !(errors.As(err, &ne) && ne.Timeout()) {
			return err
		}
	}
}

// tryMessages writes frames as text messages in one write that does not
// block; see outbox.Writer's TryWrite.
func (w *wsWriter) tryMessages(frames []outbox.Frame) (ok, more bool) {
	if w.raw == nil || !w.mu.TryLock() {
		return false, false // a control frame is being written: queue
	}
	defer w.mu.Unlock()
	if w.closed || len(w.rest) > 0 {
		return false, false
	}
	b := w.buf[:0]
	for _, f := range frames {
		if f.Data != nil {
			b = append(appendHeader(b, opText, len(f.Data)), f.Data...)
		}
	}
	if len(b) == 0 {
		return true, false
	}
	defer w.keep(b)
	ok, more, w.rest = w.tw.TryWrite(w.raw, b)
	if ok { // written, or the rest copied: the frames are done with
		for _, f := range frames {
			release(f)
		}
	}
	return ok, more
}

// writeControl writes a control frame (payload at most 125 bytes) after
// whatever a partial TryWrite left, failing only when the client takes no
// byte for timeout (writeAll); a close frame, the transport's last, gets
// timeout in all. When a ping or pong fails, what was not written is
// kept to go first next time, as TryWrite's rest is: a frame is never cut
// short on the wire.
func (w *wsWriter) writeControl(op byte, payload []byte, timeout time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errCloseSent
	}
	if op == opClose {
		w.closed = true
	}
	b := append(appendHeader(append([]byte(nil), w.rest...), op, len(payload)), payload...)
	w.rest = nil
	if op == opClose { // the transport is closing: the whole frame within timeout, or not at all
		w.conn.SetWriteDeadline(time.Now().Add(timeout))
		_, err := w.conn.Write(b)
		return err
	}
	bufs := net.Buffers{b}
	err := writeAll(w.conn, &bufs, timeout)
	if err != nil && len(bufs) > 0 {
		w.rest = bufs[0]
	}
	return err
}

// keep holds on to b as the gathering buffer, unless it grew large.
func (w *wsWriter) keep(b []byte) {
	if cap(b) <= 64<<10 {
		w.buf = b[:0]
	} else {
		w.buf = nil
	}
}
