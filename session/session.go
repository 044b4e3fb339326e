// Package session is one downstream MCP connection as mcpmux serves it: a
// read loop that no input can kill, one writer, and an outbox bounded in
// bytes. What the messages mean is not its business; it hands each valid
// message to a Handler (the hub) and answers malformed ones itself.
//
// Flow control comes before eviction. While a session has its maximum of
// requests in flight, or its outbox is above the high-water mark, or the
// Handler says the server cannot take more, the session simply stops reading
// its client, so a client that pipelines is slowed, never dropped. Only a
// client whose outbox passes the hard maximum, because it stopped reading
// altogether, is disconnected.
package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

var (
	// ErrSlowClient: the outbox passed its maximum; the client stopped reading.
	ErrSlowClient = errors.New("session: client is not reading its answers")
	// ErrClosed: the session has ended.
	ErrClosed = errors.New("session: closed")
)

// Transport carries whole frames to and from one client.
type Transport interface {
	// ReadFrame returns the next frame. A *jsonrpc.TooLargeError means a
	// frame was skipped and the transport is still usable; any other error
	// ends the session.
	ReadFrame() ([]byte, error)
	// WriteFrame writes one frame. Only the session's writer calls it.
	WriteFrame(frame []byte) error
	// Close ends the transport and unblocks ReadFrame and WriteFrame.
	Close() error
}

// Handler is what a session hands its messages to. Its methods run on the
// session's read goroutine, one at a time.
type Handler interface {
	// HandleMessage is called with each valid message.
	HandleMessage(s *Session, m *jsonrpc.Message)
	// HandleBatch is called with a frame that is a JSON array.
	HandleBatch(s *Session, frame []byte)
	// WaitRoom returns once the session may read another frame as far as the
	// Handler is concerned (the server has room for more), or ctx is done.
	WaitRoom(ctx context.Context) error
}

// A Flusher is a Handler that may hold back what it sends on while the
// session reads a run of frames that arrived together. The session calls
// Flush whenever its next read may wait for the client.
type Flusher interface {
	Flush()
}

// lineBuffer is a Transport that can tell whether a whole frame is already
// buffered, so the next ReadFrame will not wait.
type lineBuffer interface {
	HasLine() bool
}

// batchWriter is a Transport that writes several frames in one go.
type batchWriter interface {
	WriteFrames(frames [][]byte) error
}

// directWriter is a Transport that can try a write that never blocks.
type directWriter interface {
	// TryWrite writes frames if the connection takes them without
	// blocking. It reports false when nothing was written. When only part
	// was, it keeps the rest and reports more: the rest goes out first on
	// the next WriteFrames, which the session's writer must then call.
	TryWrite(frames [][]byte) (ok, more bool)
}

// Peer says who is at the other end of a session, for logs and status.
type Peer struct {
	Transport string // "unix", "yamux", "websocket", ...
	Addr      string // "pid 123 uid 1000", "127.0.0.1:50312", ...
}

// Config sets a session's limits.
type Config struct {
	ID              uint64
	Peer            Peer
	Server          string // named in the errors the session emits
	MaxInflight     int    // requests in flight before reading pauses; 0 means 256
	OutboxHighWater int    // bytes queued before reading pauses; 0 means 1 MiB
	OutboxMax       int    // bytes queued before the client is evicted; 0 means 64 MiB
	Logger          *slog.Logger
}

// Session is one downstream connection.
type Session struct {
	cfg Config
	t   Transport
	log *slog.Logger

	done      chan struct{} // closed once, by closeWith
	closeOnce sync.Once
	err       error // why it ended; set before done is closed

	started  time.Time
	bytesIn  atomic.Int64
	bytesOut atomic.Int64

	mu       sync.Mutex
	queue    [][]byte
	queued   int
	inflight int
	writing  bool          // the writer or a Flush is writing: the other must not
	ready    chan struct{} // 1-buffered: the queue is not empty
	room     chan struct{} // 1-buffered: the outbox drained or a request ended
}

// New returns a session over t; Run starts it.
func New(cfg Config, t Transport) *Session {
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = 256
	}
	if cfg.OutboxHighWater <= 0 {
		cfg.OutboxHighWater = 1 << 20
	}
	if cfg.OutboxMax <= 0 {
		cfg.OutboxMax = 64 << 20
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Session{
		cfg:     cfg,
		t:       t,
		log:     log.With("session", cfg.ID),
		started: time.Now(),
		done:    make(chan struct{}),
		ready:   make(chan struct{}, 1),
		room:    make(chan struct{}, 1),
	}
}

// Stats are a session's counters.
type Stats struct {
	Started  time.Time
	Inflight int
	BytesIn  int64
	BytesOut int64
	Queued   int // bytes waiting in the outbox
}

// Stats reports the session's counters.
func (s *Session) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Started: s.started, Inflight: s.inflight, BytesIn: s.bytesIn.Load(), BytesOut: s.bytesOut.Load(), Queued: s.queued}
}

// Peer is who is at the other end.
func (s *Session) Peer() Peer { return s.cfg.Peer }

// ID is the session's number, unique within the daemon.
func (s *Session) ID() uint64 { return s.cfg.ID }

// Logger is the session's logger, tagged with its id.
func (s *Session) Logger() *slog.Logger { return s.log }

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err says why the session ended; nil before Done is closed.
func (s *Session) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Run serves the session until the client leaves, ctx is done, or Close is
// called. It returns after its goroutines have, with the transport closed.
func (s *Session) Run(ctx context.Context, h Handler) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	writerDone := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { s.closeWith(s.readLoop(ctx, h)) })
	wg.Go(func() {
		select {
		case <-ctx.Done():
			s.closeWith(context.Cause(ctx))
		case <-s.done:
		}
		// Closing the transport unblocks the reader, and the writer too when
		// it is stuck in a write to a client that stopped reading. A client
		// that half-closed gets flushTimeout to take what was queued.
		if errors.Is(s.err, io.EOF) {
			t := time.NewTimer(flushTimeout)
			defer t.Stop()
			select {
			case <-writerDone:
			case <-t.C:
			}
		}
		s.t.Close()
	})
	err := s.writeLoop()
	close(writerDone)
	s.closeWith(err)
	cancel()
	wg.Wait()
	if errors.Is(s.err, io.EOF) || errors.Is(s.err, net.ErrClosed) {
		return nil
	}
	return s.err
}

// Close ends the session with the given reason (nil for a plain close).
func (s *Session) Close(reason error) {
	if reason == nil {
		reason = ErrClosed
	}
	s.closeWith(reason)
}

func (s *Session) closeWith(err error) {
	if err == nil {
		err = ErrClosed
	}
	s.closeOnce.Do(func() {
		s.err = err
		close(s.done)
	})
}

// Send queues a frame for the client. It never blocks. A client whose
// outbox would pass its maximum is evicted: Send returns ErrSlowClient and
// the session ends.
func (s *Session) Send(frame []byte) error {
	if err := s.SendLater(frame); err != nil {
		return err
	}
	notify(s.ready)
	return nil
}

// SendLater is Send without waking the writer: the frame waits for the next
// Send or Flush. A reader that handles a run of messages queues its sends
// with it and flushes once the run is handled, so they go out in one write.
func (s *Session) SendLater(frame []byte) error {
	select {
	case <-s.done:
		return ErrClosed
	default:
	}
	s.mu.Lock()
	// One frame is always taken into an empty outbox, however large (its
	// size is bounded by max_message_bytes): only a backlog evicts.
	if s.queued > 0 && s.queued+len(frame) > s.cfg.OutboxMax {
		queued := s.queued
		s.mu.Unlock()
		s.log.Warn("evicting a client that stopped reading", "queued_bytes", queued, "outbox_max", s.cfg.OutboxMax)
		s.closeWith(ErrSlowClient)
		return ErrSlowClient
	}
	s.queue = append(s.queue, frame)
	s.queued += len(frame)
	s.mu.Unlock()
	return nil
}

// directMax bounds what Flush writes itself; more goes to the writer.
const directMax = 64 << 10

// Flush sends what SendLater queued. When the writer is idle and the
// transport can write without blocking, Flush writes the queued frames
// itself, in one write: an answer then reaches its client with no goroutine
// handoff. Otherwise it wakes the writer. Flush never blocks.
func (s *Session) Flush() {
	dw, _ := s.t.(directWriter)
	s.mu.Lock()
	if len(s.queue) == 0 {
		s.mu.Unlock()
		return
	}
	if dw == nil || s.writing || s.queued > directMax || s.isDone() {
		s.mu.Unlock()
		notify(s.ready)
		return
	}
	batch := s.queue
	s.queue = nil
	s.writing = true
	s.mu.Unlock()

	ok, more := dw.TryWrite(batch)
	n := 0
	if ok {
		for _, f := range batch {
			n += len(f)
		}
		s.bytesOut.Add(int64(n))
		clear(batch)
	}
	s.mu.Lock()
	s.writing = false
	if ok {
		s.queued -= n
	} else {
		s.queue = append(batch, s.queue...)
	}
	wake := more || len(s.queue) > 0
	room := s.queued <= s.cfg.OutboxHighWater
	s.mu.Unlock()
	if wake {
		notify(s.ready)
	}
	if ok && room {
		notify(s.room)
	}
}

func (s *Session) isDone() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Reply sends an error that mcpmux emits, naming the server.
func (s *Session) Reply(id json.RawMessage, e *jsonrpc.Error) {
	s.Send(e.WithServer(s.cfg.Server).Response(id))
}

// Begin counts a request into flight; End counts it out. While MaxInflight
// requests are in flight the session reads nothing more from its client.
func (s *Session) Begin() {
	s.mu.Lock()
	s.inflight++
	s.mu.Unlock()
}

// End counts a request out of flight.
func (s *Session) End() {
	s.mu.Lock()
	s.inflight--
	s.mu.Unlock()
	notify(s.room)
}

// Inflight is the number of requests the session has in flight.
func (s *Session) Inflight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight
}

func (s *Session) readLoop(ctx context.Context, h Handler) error {
	flusher, _ := h.(Flusher)
	lb, _ := s.t.(lineBuffer)
	for {
		// What the handler held back goes out before anything here can
		// wait: the next read, or the wait for room, which the answers to
		// those very requests may be what ends.
		if flusher != nil && (lb == nil || !lb.HasLine() || !s.hasRoom()) {
			flusher.Flush()
		}
		if err := s.waitForRoom(ctx); err != nil {
			return err
		}
		if err := h.WaitRoom(ctx); err != nil {
			return err
		}
		frame, err := s.t.ReadFrame()
		s.bytesIn.Add(int64(len(frame)))
		var tooLarge *jsonrpc.TooLargeError
		switch {
		case errors.As(err, &tooLarge):
			s.log.Warn("client sent a message over the size limit", "bytes", tooLarge.Size, "limit", tooLarge.Limit)
			s.Reply(tooLarge.ID, &jsonrpc.Error{
				Code:    jsonrpc.CodeInvalidRequest,
				Message: fmt.Sprintf("message of %d bytes is over the limit of %d", tooLarge.Size, tooLarge.Limit),
				Reason:  jsonrpc.ReasonTooLarge,
			})
			continue
		case err != nil:
			return err
		}
		s.handle(h, frame)
	}
}

// handle is the unit of failure: a panic while handling one message becomes
// an internal error for that message, and the session reads its next one.
func (s *Session) handle(h Handler, frame []byte) {
	var id json.RawMessage
	answer := true // false for a notification or a response: they get no answer
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic while handling a message", "panic", p, "stack", string(debug.Stack()))
			if answer {
				s.Reply(id, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error", Reason: jsonrpc.ReasonInternal})
			}
		}
	}()
	// IsBatch only looks at the first byte: a frame that is not UTF-8 JSON
	// goes to Parse, which answers it -32700.
	if jsonrpc.IsBatch(frame) && jsonrpc.Valid(frame) {
		h.HandleBatch(s, frame)
		return
	}
	m, err := jsonrpc.Parse(frame)
	if err != nil {
		var e *jsonrpc.Error
		errors.As(err, &e)
		s.log.Debug("client sent a malformed message", "error", err)
		s.Reply(m.ID, e)
		return
	}
	if m.Kind == jsonrpc.KindRequest {
		id = m.ID
	} else {
		answer = false
	}
	h.HandleMessage(s, m)
}

// waitForRoom returns once the outbox is at or below its high-water mark and
// fewer than MaxInflight requests are in flight.
func (s *Session) waitForRoom(ctx context.Context) error {
	for {
		if s.hasRoom() {
			return nil
		}
		select {
		case <-s.room:
		case <-s.done:
			return s.err
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// hasRoom reports whether the session may read another frame now.
func (s *Session) hasRoom() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queued <= s.cfg.OutboxHighWater && s.inflight < s.cfg.MaxInflight
}

// flushTimeout bounds how long a closing session keeps writing what it had
// queued before the connection is closed.
const flushTimeout = 2 * time.Second

// writeLoop is the only code that writes to the client.
func (s *Session) writeLoop() error {
	for {
		select {
		case <-s.ready:
		case <-s.done:
			if errors.Is(s.err, io.EOF) {
				s.flush()
			}
			return nil
		}
		if err := s.writeQueued(); err != nil {
			return fmt.Errorf("write to client: %w", err)
		}
	}
}

func (s *Session) writeQueued() error {
	s.mu.Lock()
	if s.writing {
		// A Flush is writing; it wakes us again if it leaves frames.
		s.mu.Unlock()
		return nil
	}
	batch := s.queue
	s.queue = nil
	s.writing = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.writing = false
		more := len(s.queue) > 0
		s.mu.Unlock()
		if more {
			notify(s.ready)
		}
	}()
	if bw, ok := s.t.(batchWriter); ok {
		// Runs of frames up to directMax go out in one write each (with,
		// first, whatever a partial TryWrite left); the outbox shrinks
		// after each run.
		// The loop runs at least once: an empty batch still sends the rest
		// of a partial TryWrite.
		for first := true; first || len(batch) > 0; first = false {
			k, n := 0, 0
			for k < len(batch) && (k == 0 || n+len(batch[k]) <= directMax) {
				n += len(batch[k])
				k++
			}
			err := bw.WriteFrames(batch[:k])
			clear(batch[:k])
			batch = batch[k:]
			s.bytesOut.Add(int64(n))
			s.mu.Lock()
			s.queued -= n
			room := s.queued <= s.cfg.OutboxHighWater
			s.mu.Unlock()
			if room {
				notify(s.room)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	for i, frame := range batch {
		err := s.t.WriteFrame(frame)
		s.bytesOut.Add(int64(len(frame)))
		batch[i] = nil
		s.mu.Lock()
		s.queued -= len(frame)
		room := s.queued <= s.cfg.OutboxHighWater
		s.mu.Unlock()
		if room {
			notify(s.room)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// flush writes what is queued when the client half-closed: answers already
// on their way still reach it. Run bounds it: after flushTimeout it closes
// the transport, because the client may not be reading.
func (s *Session) flush() {
	// A Flush may be mid-write. It never blocks, so wait for it to end;
	// then write what is queued, and what a partial TryWrite left.
	for {
		s.mu.Lock()
		busy := s.writing
		s.mu.Unlock()
		if !busy {
			break
		}
		runtime.Gosched()
	}
	s.writeQueued()
}

func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
