package session

import (
	"net"
	"sync"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// Stream is the Transport of a byte stream (a Unix socket connection, a
// yamux stream): one JSON-RPC message per line, exactly the stdio framing.
type Stream struct {
	conn net.Conn
	r    *jsonrpc.Reader
	once sync.Once
	buf  net.Buffers
}

// NewStream frames conn, refusing messages over maxMessageBytes.
func NewStream(conn net.Conn, maxMessageBytes int) *Stream {
	return &Stream{conn: conn, r: jsonrpc.NewReader(conn, maxMessageBytes)}
}

// ReadFrame implements Transport.
func (s *Stream) ReadFrame() ([]byte, error) { return s.r.Read() }

var newline = []byte{'\n'}

// WriteFrame implements Transport.
func (s *Stream) WriteFrame(frame []byte) error {
	if len(frame) < 4<<10 {
		// One small write rather than two syscalls.
		b := make([]byte, 0, len(frame)+1)
		_, err := s.conn.Write(append(append(b, frame...), '\n'))
		return err
	}
	s.buf = append(s.buf[:0], frame, newline)
	_, err := s.buf.WriteTo(s.conn)
	return err
}

// Close implements Transport.
func (s *Stream) Close() error {
	var err error
	s.once.Do(func() { err = s.conn.Close() })
	return err
}

// Conn is the underlying connection.
func (s *Stream) Conn() net.Conn { return s.conn }
