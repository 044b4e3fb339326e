package session

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/mcpmux/mcpmux/internal/rawio"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
)

// Stream is the Transport of a byte stream (a Unix socket connection, a
// yamux stream): one JSON-RPC message per line, exactly the stdio framing.
// It has no streams of messages: tags are 0, and frames without Data are
// not written.
//
// The session's outbox calls the write side from one goroutine at a time,
// so it needs no lock of its own.
type Stream struct {
	conn net.Conn
	raw  syscall.RawConn // conn's, when it has one: TryWrite needs it
	tw   outbox.RawWriter
	r    *jsonrpc.Reader
	once sync.Once

	bufs net.Buffers // a large frame and its newline
	rest []byte      // what a partial TryWrite left, written first next time
}

// NewStream frames conn, refusing messages over maxMessageBytes.
func NewStream(conn net.Conn, maxMessageBytes int) *Stream {
	s := &Stream{conn: conn, r: jsonrpc.NewReader(rawio.NewReader(conn), maxMessageBytes)}
	if sc, ok := conn.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			s.raw = raw
		}
	}
	return s
}

// SetLineTimeout makes the stream give up on a client that began a line
// and did not finish it within d of its first byte: ReadFrame then returns
// ErrStalledLine, which ends the session. Between lines the client may
// stay silent for as long as it likes. 0 turns the check off. It must be
// called before the first ReadFrame.
func (s *Stream) SetLineTimeout(d time.Duration) {
	if d <= 0 {
		return
	}
	s.r.Reset(&lineWatch{conn: s.conn, r: rawio.NewReader(s.conn), timeout: d})
}

// lineWatch is a connection read through a deadline that runs while a line
// is incomplete: armed when what the client sent so far ends mid-line,
// re-armed when a new line begins, cleared at a line's end.
type lineWatch struct {
	conn    net.Conn  // for its read deadline
	r       io.Reader // conn, read raw when it can be (rawio.NewReader)
	timeout time.Duration
	mid     bool // what was read so far ends inside a line
	begun   bool // a line began in the last read: its deadline runs from then
	armed   bool // a read deadline is set
}

func (w *lineWatch) Read(p []byte) (int, error) {
	switch {
	case w.mid && (!w.armed || w.begun):
		w.conn.SetReadDeadline(time.Now().Add(w.timeout))
		w.armed = true
	case !w.mid && w.armed:
		w.conn.SetReadDeadline(time.Time{})
		w.armed = false
	}
	w.begun = false
	n, err := w.r.Read(p)
	if n > 0 {
		w.begun = !w.mid || bytes.IndexByte(p[:n], '\n') >= 0
		w.mid = p[n-1] != '\n'
	}
	if err != nil && w.armed && errors.Is(err, os.ErrDeadlineExceeded) {
		return n, fmt.Errorf("%w (line_timeout %v)", ErrStalledLine, w.timeout)
	}
	return n, err
}

// ReadFrame implements Transport. At the end of the input it reports
// ErrHalfClosed when the connection is a socket whose peer shut down only
// its writing side (it may still read), and io.EOF otherwise.
func (s *Stream) ReadFrame() ([]byte, uint64, error) {
	frame, err := s.r.Read()
	if errors.Is(err, io.EOF) && s.raw != nil && !peerGone(s.raw) {
		err = ErrHalfClosed
	}
	return frame, 0, err
}

// Buffered implements Transport.
func (s *Stream) Buffered() bool { return s.r.HasLine() }

var newline = []byte{'\n'}

// gatherMax: frames shorter than this are copied into one buffer and
// written together; longer ones are written from their own slice.
const gatherMax = 4 << 10

// WriteFrames implements outbox.Writer: each frame with its newline, in
// as few writes as it can (small frames are gathered into one buffer).
func (s *Stream) WriteFrames(frames []outbox.Frame) error {
	bp := gatherPool.Get().(*[]byte)
	b := append((*bp)[:0], s.rest...)
	defer func() { putGather(bp, b) }()
	s.rest = nil
	for _, fr := range frames {
		f := fr.Data
		switch {
		case f == nil:
			continue
		case len(f) < gatherMax:
			b = append(append(b, f...), '\n')
			release(fr)
			continue
		}
		if len(b) > 0 {
			if _, err := s.conn.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
		s.bufs = append(s.bufs[:0], f, newline)
		_, err := s.bufs.WriteTo(s.conn)
		clear(s.bufs[:cap(s.bufs)])
		release(fr)
		if err != nil {
			return err
		}
	}
	if len(b) == 0 {
		return nil
	}
	_, err := s.conn.Write(b)
	return err
}

// TryWrite implements outbox.Writer: one write that does not block, of all
// the frames gathered.
func (s *Stream) TryWrite(frames []outbox.Frame) (ok, more bool) {
	if s.raw == nil || len(s.rest) > 0 {
		return false, false
	}
	bp := gatherPool.Get().(*[]byte)
	b := (*bp)[:0]
	defer func() { putGather(bp, b) }()
	for _, f := range frames {
		if f.Data != nil {
			b = append(append(b, f.Data...), '\n')
		}
	}
	if len(b) == 0 {
		return true, false
	}
	ok, more, s.rest = s.tw.TryWrite(s.raw, b)
	if ok { // written, or the rest copied: the frames are done with
		for _, f := range frames {
			release(f)
		}
	}
	return ok, more
}

// release gives back the buffer of a frame the stream no longer needs.
func release(f outbox.Frame) {
	if f.Release != nil {
		f.Release()
	}
}

// gatherPool holds the buffers frames are gathered in for one write
// (*[]byte): a session holds none between writes, so an idle one costs
// nothing for them. (TryWriteRaw copies what it leaves, so nothing refers
// to a buffer once it is back.)
var gatherPool = sync.Pool{New: func() any { return new([]byte) }}

// putGather gives back bp, which now holds b, unless b grew large.
func putGather(bp *[]byte, b []byte) {
	if cap(b) <= 64<<10 {
		*bp = b[:0]
		gatherPool.Put(bp)
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

var (
	_ Transport = (*Stream)(nil)
	_ Transport = (*WebSocket)(nil)
)
