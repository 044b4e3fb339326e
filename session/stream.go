package session

import (
	"errors"
	"net"
	"sync"
	"syscall"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// Stream is the Transport of a byte stream (a Unix socket connection, a
// yamux stream): one JSON-RPC message per line, exactly the stdio framing.
//
// The session's writer and its Flush take turns (never both at once), so
// the write side below needs no lock of its own.
type Stream struct {
	conn net.Conn
	raw  syscall.RawConn // conn's, when it has one: TryWrite needs it
	r    *jsonrpc.Reader
	once sync.Once

	buf  []byte      // frames gathered for one write
	bufs net.Buffers // a large frame and its newline
	rest []byte      // what a partial TryWrite left, written first next time
}

// NewStream frames conn, refusing messages over maxMessageBytes.
func NewStream(conn net.Conn, maxMessageBytes int) *Stream {
	s := &Stream{conn: conn, r: jsonrpc.NewReader(conn, maxMessageBytes)}
	if sc, ok := conn.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			s.raw = raw
		}
	}
	return s
}

// ReadFrame implements Transport.
func (s *Stream) ReadFrame() ([]byte, error) { return s.r.Read() }

// HasLine reports whether the next ReadFrame has a whole frame at hand.
func (s *Stream) HasLine() bool { return s.r.HasLine() }

var newline = []byte{'\n'}

// gatherMax: frames shorter than this are copied into one buffer and
// written together; longer ones are written from their own slice.
const gatherMax = 4 << 10

// WriteFrame implements Transport.
func (s *Stream) WriteFrame(frame []byte) error {
	return s.WriteFrames([][]byte{frame})
}

// WriteFrames writes frames, each with its newline, in as few writes as it
// can: small frames are gathered into one buffer.
func (s *Stream) WriteFrames(frames [][]byte) error {
	b := append(s.buf[:0], s.rest...)
	s.rest = nil
	for _, f := range frames {
		if len(f) < gatherMax {
			b = append(append(b, f...), '\n')
			continue
		}
		if len(b) > 0 {
			if _, err := s.conn.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
		s.bufs = append(s.bufs[:0], f, newline)
		if _, err := s.bufs.WriteTo(s.conn); err != nil {
			return err
		}
	}
	s.keep(b)
	if len(b) == 0 {
		return nil
	}
	_, err := s.conn.Write(b)
	return err
}

// TryWrite implements directWriter: one write that does not block, of all
// the frames gathered.
func (s *Stream) TryWrite(frames [][]byte) (ok, more bool) {
	if s.raw == nil || len(s.rest) > 0 {
		return false, false
	}
	b := s.buf[:0]
	for _, f := range frames {
		b = append(append(b, f...), '\n')
	}
	defer s.keep(b)
	ok, more, s.rest = tryWrite(s.raw, b)
	return ok, more
}

// tryWrite writes b to raw's connection as far as it goes without
// blocking. It reports false when nothing was written; when only part was,
// it returns a copy of the rest.
func tryWrite(raw syscall.RawConn, b []byte) (ok, more bool, rest []byte) {
	n := 0
	err := raw.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, err := syscall.Write(int(fd), b[n:])
			if err != nil {
				if errors.Is(err, syscall.EINTR) {
					continue
				}
				return true // EAGAIN, or an error the writer will meet
			}
			n += m
		}
		return true // done either way: never wait for the connection
	})
	switch {
	case err != nil || n <= 0:
		return false, false, nil
	case n < len(b):
		return true, true, append([]byte(nil), b[n:]...)
	}
	return true, false, nil
}

// keep holds on to b as the gathering buffer, unless it grew large.
func (s *Stream) keep(b []byte) {
	if cap(b) <= 64<<10 {
		s.buf = b[:0]
	} else {
		s.buf = nil
	}
}

// Close implements Transport.
func (s *Stream) Close() error {
	var err error
	s.once.Do(func() { err = s.conn.Close() })
	return err
}

// Conn is the underlying connection.
func (s *Stream) Conn() net.Conn { return s.conn }
