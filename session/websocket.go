package session

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
)

// ErrBinaryFrame: the client sent a binary WebSocket frame. MCP messages
// travel as text; the connection was closed with code 1003.
var ErrBinaryFrame = errors.New("session: binary WebSocket frame")

// ErrPongTimeout: the client answered a ping with nothing for
// WebSocketConfig.PongTimeout while the session was waiting for its next
// message.
var ErrPongTimeout = errors.New("session: WebSocket client answered no ping")

// WebSocketConfig sets the limits and timers of a WebSocket transport. Zero
// durations mean the defaults.
type WebSocketConfig struct {
	// ReadBuffer is the buffer gorilla/websocket reads the connection
	// through, when the caller knows it (see socket.Web); with it the
	// transport can tell that a whole message is already buffered, and
	// the session batches the requests that arrived together. Optional.
	ReadBuffer *bufio.Reader

	MaxMessageBytes int           // larger messages are skipped and answered message_too_large
	PingInterval    time.Duration // how often the client is pinged; default 30s
	PongTimeout     time.Duration // how long a ping may go unanswered, while a message is awaited, before the connection ends; default 60s
	WriteTimeout    time.Duration // how long a write may go on with the client taking no byte of it; default 60s
}

// closeGrace bounds the close handshake frame written when the transport
// closes, and how long a pong may wait for the client to take a byte.
const closeGrace = time.Second

// WebSocket is the Transport of a WebSocket connection: one JSON-RPC message
// per text frame. Binary frames end the connection with code 1003. Oversized
// messages are read through without being held and reported as a
// *jsonrpc.TooLargeError, so the session answers them and goes on.
//
// It pings the client every PingInterval. A client that answers a ping with
// nothing at all, not even a pong, for PongTimeout of the time the session
// spent waiting for a message is disconnected (pongWatch); while the
// session is not reading (flow control), no pong is expected, since control
// frames are only read along with messages.
type WebSocket struct {
	conn *websocket.Conn // reads; writes go through out
	out  *wsWriter
	cfg  WebSocketConfig

	reading  atomic.Bool   // ReadFrame is waiting for the client
	seen     atomic.Uint64 // signs of life read from the client: frames, pongs, bytes of a message
	timedOut atomic.Bool   // keepalive closed the connection

	done      chan struct{} // closed by Close; stops keepalive
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup // keepalive
}

// NewWebSocket frames conn, an upgraded server-side connection, and starts
// pinging the client. Close stops that and closes conn.
func NewWebSocket(conn *websocket.Conn, cfg WebSocketConfig) *WebSocket {
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 30 * time.Second
	}
	if cfg.PongTimeout <= 0 {
		cfg.PongTimeout = 60 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 60 * time.Second
	}
	w := &WebSocket{conn: conn, cfg: cfg, done: make(chan struct{}), out: newWSWriter(conn.NetConn(), cfg.WriteTimeout)}
	conn.SetPongHandler(func(string) error {
		w.touch()
		return nil
	})
	conn.SetPingHandler(func(data string) error {
		w.touch()
		// The pong goes through our writer, which writes every frame.
		err := w.out.writeControl(opPong, []byte(data), closeGrace)
		var ne net.Error
		if errors.Is(err, errCloseSent) || errors.As(err, &ne) && ne.Timeout() {
			return nil // as gorilla's own handler: not worth ending the read
		}
		return err
	})
	// A close frame from the client is its hang-up: ReadFrame reports
	// io.EOF, the session flushes what is queued, and Close answers the
	// close frame afterwards rather than at once.
	conn.SetCloseHandler(func(int, string) error { return nil })
	w.wg.Go(w.keepalive)
	return w
}

func (w *WebSocket) touch() { w.seen.Add(1) }

// keepalive pings the client and closes the connection when a ping stays
// unanswered for PongTimeout while the session is reading (pongWatch).
func (w *WebSocket) keepalive() {
	step := min(w.cfg.PingInterval, w.cfg.PongTimeout) / 2
	tick := time.NewTicker(step)
	defer tick.Stop()
	start := time.Now() // monotonic, as every time.Now here
	watch := newPongWatch(w.cfg.PongTimeout, step, start)
	lastPing := start
	for {
		select {
		case <-w.done:
			return
		case <-tick.C:
		}
		now := time.Now()
		if watch.tick(now, w.seen.Load(), w.reading.Load()) {
			w.timedOut.Store(true)
			w.closeWith(websocket.CloseGoingAway, "no answer to pings")
			w.conn.Close()
			return
		}
		if now.Sub(lastPing) < w.cfg.PingInterval {
			continue
		}
		lastPing = now
		seen := w.seen.Load() // before the write: a pong cannot come sooner
		err := w.out.writeControl(opPing, nil, w.cfg.WriteTimeout)
		var ne net.Error
		switch {
		case err == nil:
			watch.sent(seen)
		case !(errors.As(err, &ne) && ne.Timeout()):
			// The connection is gone or closing; the reader or the writer
			// reports it. A timeout only means a write of the session's
			// holds the connection: its own deadline covers that, and no
			// ping went out to wait for.
			return
		}
	}
}

// ReadFrame implements Transport; the tag is always 0. Frames that are
// only JSON whitespace are skipped, as blank lines are on a socket.
func (w *WebSocket) ReadFrame() ([]byte, uint64, error) {
	frame, err := w.readFrame()
	return frame, 0, err
}

func (w *WebSocket) readFrame() ([]byte, error) {
	w.reading.Store(true)
	defer w.reading.Store(false)
	for {
		typ, r, err := w.conn.NextReader()
		if err != nil {
			return nil, w.readErr(err)
		}
		w.touch()
		if typ != websocket.TextMessage {
			w.closeWith(websocket.CloseUnsupportedData, "binary frames are not supported: send JSON-RPC as text")
			return nil, ErrBinaryFrame
		}
		frame, err := jsonrpc.ReadMessage(activity{r, w}, w.cfg.MaxMessageBytes)
		if err != nil {
			var tooLarge *jsonrpc.TooLargeError
			if errors.As(err, &tooLarge) {
				return nil, err
			}
			return nil, w.readErr(err)
		}
		if frame = lineSafe(frame); !blank(frame) {
			return frame, nil
		}
	}
}

// readErr turns the client's hang-up, with a close frame or without one
// (1006: the connection just ended), into io.EOF.
func (w *WebSocket) readErr(err error) error {
	if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway,
		websocket.CloseNoStatusReceived, websocket.CloseAbnormalClosure) {
		return io.EOF
	}
	select {
	case <-w.done:
		return net.ErrClosed
	default:
	}
	if w.timedOut.Load() {
		return ErrPongTimeout
	}
	return err
}

// activity counts the bytes of a message in flight as signs of life, so that
// a large message arriving slowly is not taken for a dead client.
type activity struct {
	r io.Reader
	w *WebSocket
}

func (a activity) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.w.touch()
	}
	return n, err
}

// lineSafe replaces the line breaks that a WebSocket message may carry as
// JSON whitespace by spaces, so that the message stays one line when it is
// forwarded to a server that reads newline-delimited JSON. Offsets do not
// move. Breaks inside strings, which JSON forbids, are left for the parser
// to refuse.
func lineSafe(frame []byte) []byte {
	inStr, esc := false, false
	for i, b := range frame {
		switch {
		case esc:
			esc = false
		case inStr && b == '\\':
			esc = true
		case b == '"':
			inStr = !inStr
		case !inStr && (b == '\n' || b == '\r'):
			frame[i] = ' '
		}
	}
	return frame
}

func blank(frame []byte) bool {
	for _, b := range frame {
		switch b {
		case ' ', '\t', '\r', '\n':
		default:
			return false
		}
	}
	return true
}

// Buffered implements Transport: it reports whether a whole text message
// is already buffered, so that the next ReadFrame returns without waiting
// for the client. Control frames before it are skipped, fragments must all
// be there. Without a known read buffer it reports false, which only costs
// batching.
func (w *WebSocket) Buffered() bool {
	br := w.cfg.ReadBuffer
	if br == nil {
		return false
	}
	b, _ := br.Peek(br.Buffered())
	return wholeMessage(b)
}

// wholeMessage reports whether b, read from a client (frames masked),
// starts with control frames and then a whole data message.
func wholeMessage(b []byte) bool {
	for {
		if len(b) < 2 {
			return false
		}
		fin, op := b[0]&0x80 != 0, b[0]&0x0f
		n, h := uint64(b[1]&0x7f), 2
		switch n {
		case 126:
			if len(b) < 4 {
				return false
			}
			n, h = uint64(binary.BigEndian.Uint16(b[2:])), 4
		case 127:
			if len(b) < 10 {
				return false
			}
			n, h = binary.BigEndian.Uint64(b[2:]), 10
		}
		if b[1]&0x80 != 0 {
			h += 4 // the mask key
		}
		if len(b) < h || uint64(len(b)-h) < n {
			return false
		}
		b = b[h+int(n):]
		if op < 0x8 && fin {
			return true // the last (or only) frame of a message
		}
		// A control frame, which gorilla handles and reads on, or a
		// fragment, whose message goes on in the next frame.
	}
}

// WriteFrames implements outbox.Writer: each frame with Data as one text
// message, within WriteTimeout, gathered into as few writes as it can. A
// frame's buffer is given back (its Release) once it is written, or copied
// into the gathered run, as a Stream does: a large answer's buffer is then
// the one the next is read into.
func (w *WebSocket) WriteFrames(frames []outbox.Frame) error { return w.out.writeMessages(frames) }

// TryWrite implements outbox.Writer.
func (w *WebSocket) TryWrite(frames []outbox.Frame) (ok, more bool) {
	return w.out.tryMessages(frames)
}

// closeWith sends a close frame with code and reason, once per connection
// (later ones are refused by the connection itself).
func (w *WebSocket) closeWith(code int, reason string) {
	w.out.writeControl(opClose, websocket.FormatCloseMessage(code, reason), closeGrace)
}

// Close implements Transport: a normal close frame (unless one was sent
// already), then the connection is closed and the pinger stopped.
func (w *WebSocket) Close() error {
	w.closeOnce.Do(func() {
		close(w.done)
		w.closeWith(websocket.CloseNormalClosure, "")
		w.closeErr = w.conn.Close()
		w.wg.Wait()
	})
	return w.closeErr
}

// Conn is the underlying connection.
func (w *WebSocket) Conn() *websocket.Conn { return w.conn }
