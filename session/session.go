package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
)

var (
	// ErrSlowClient: the outbox passed its maximum; the client stopped reading.
	ErrSlowClient = errors.New("session: client is not reading its answers")
	// ErrClosed: the session has ended.
	ErrClosed = errors.New("session: closed")
	// ErrHalfClosed is the io.EOF of a client that shut down its writing
	// side only: it sends no more but may still read, so its requests in
	// flight are answered first (within Config.DrainTimeout).
	ErrHalfClosed error = halfClosed{}
	// ErrStalledLine: the client began a message and did not finish it
	// within the stream's line timeout (Stream.SetLineTimeout).
	ErrStalledLine = errors.New("session: the client stalled in the middle of a message")
	// ErrOverBudget: the sessions together passed the daemon's bound on
	// queued bytes (Config.Budget), and this one held the most.
	ErrOverBudget = errors.New("session: the daemon's bound on queued answers was reached and this client held the most")
)

type halfClosed struct{}

func (halfClosed) Error() string { return "session: the client half-closed its connection" }
func (halfClosed) Unwrap() error { return io.EOF }

// Transport carries whole frames to and from one client.
type Transport interface {
	// ReadFrame returns the next frame and its tag (0 for transports
	// without streams). A *jsonrpc.TooLargeError means a frame was skipped
	// and the transport is still usable; any other error ends the session.
	// At the end of the client's input it returns io.EOF, or ErrHalfClosed
	// when the client can still read.
	ReadFrame() (frame []byte, tag uint64, err error)
	// Buffered reports whether the next ReadFrame has a whole frame at
	// hand, so that it will not wait for the client.
	Buffered() bool
	// WriteFrames and TryWrite write to the client; only the session's
	// outbox calls them, one at a time. Transports without streams write
	// nothing for a frame whose Data is nil.
	outbox.Writer
	// Close ends the transport and unblocks ReadFrame and WriteFrames.
	Close() error
}

// Handler is what a session hands its messages to. Its methods run on the
// session's read goroutine, one at a time. tag is the tag the transport
// read the frame with; what the Handler sends because of it carries it.
type Handler interface {
	// HandleMessage is called with each valid message.
	HandleMessage(s *Session, m *jsonrpc.Message, tag uint64)
	// HandleBatch is called with a frame that is a JSON array.
	HandleBatch(s *Session, frame []byte, tag uint64)
	// WaitRoom returns once the session may read another frame as far as the
	// Handler is concerned (the server has room for more), or ctx is done.
	WaitRoom(ctx context.Context) error
	// Flush sends on what the Handler held back while the session read a
	// run of frames that arrived together. The session calls it whenever
	// its next read may wait for the client.
	Flush()
}

// Peer says who is at the other end of a session, for logs and status.
type Peer struct {
	Transport string // "unix", "yamux", "websocket", ...
	Addr      string // "pid 123 uid 1000", "127.0.0.1:50312", ...
	Dir       string // the working folder of the client process, when the system tells; "" otherwise
	// OneRequest: the session carries one request and ends with it (the
	// 2026-07-28 HTTP binding), so what the request leaves for a later
	// one (input it asked for) must outlive it.
	OneRequest bool
	// Client names the client a OneRequest session's request came from, as
	// far as mcpmux can tell it (the peer's host and the clientInfo the
	// request names): the requests of one Client are one client's, whose
	// state a server with share = "isolated" keeps in one process. "" when
	// nothing names it.
	Client string
	// OnDemand: the session wants its server only once it sends a request
	// that needs the server (an endpoint's session of a member): until
	// then it does not start a lazy server nor keep one from idle_timeout.
	OnDemand bool
}

// The defaults of Config's zero values.
const (
	DefaultMaxInflight     = 256
	DefaultOutboxHighWater = 1 << 20
	DefaultOutboxMax       = 64 << 20
	DefaultDrainTimeout    = time.Minute
)

// Config sets a session's limits.
type Config struct {
	ID              uint64
	Peer            Peer
	Server          string // named in the errors the session emits
	MaxInflight     int    // requests in flight before reading pauses; 0 means 256
	OutboxHighWater int    // bytes queued before reading pauses; 0 means 1 MiB
	OutboxMax       int    // bytes queued before the client is evicted; 0 means 64 MiB
	// DrainTimeout bounds how long a client that half-closed waits for the
	// answers to its requests in flight; 0 means DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Budget, when set, bounds the bytes queued for every session that
	// shares it: past it, the session holding the most is evicted
	// (ErrOverBudget).
	Budget *outbox.Budget
	Logger *slog.Logger
}

// Session is one downstream connection.
type Session struct {
	cfg     Config
	t       Transport
	direct  Unqueued // t, when it is one: then there is no outbox
	base    *slog.Logger
	log     *slog.Logger // base tagged with the session's id, made by Logger
	logOnce sync.Once

	done       chan struct{} // closed once, by closeWith
	closeOnce  sync.Once
	err        error          // why it ended; set before done is closed
	writerDone chan struct{}  // closed by Run once its writes are over (queued transports)
	closing    sync.WaitGroup // closeTransport, which closeWith starts (queued transports)

	started  time.Time
	bytesIn  atomic.Int64
	out      *outbox.Queue // to the client, nil when direct; it runs its writer goroutine while it has frames to write
	bytesOut atomic.Int64  // what was put on a direct transport
	inflight atomic.Int64  // requests in flight, counted by Begin and End
	ended    chan struct{} // 1-buffered: a request ended

	ahead   *readAhead     // a frame being read ahead (Await); the read loop's alone
	aheadWG sync.WaitGroup // the read ahead's goroutine
}

// New returns a session over t; Run starts it.
func New(cfg Config, t Transport) *Session {
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = DefaultMaxInflight
	}
	if cfg.OutboxHighWater <= 0 {
		cfg.OutboxHighWater = DefaultOutboxHighWater
	}
	if cfg.OutboxMax <= 0 {
		cfg.OutboxMax = DefaultOutboxMax
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Session{
		cfg:     cfg,
		t:       t,
		base:    log,
		started: time.Now(),
		done:    make(chan struct{}),
		ended:   make(chan struct{}, 1),
	}
	if u, ok := t.(Unqueued); ok {
		s.direct = u
		return s
	}
	s.writerDone = make(chan struct{})
	s.out = outbox.New(t, outbox.Config{HighWater: cfg.OutboxHighWater, Max: cfg.OutboxMax})
	s.out.Serve(s.writeFailed)
	return s
}

// evictForBudget ends a session chosen to make room under the daemon's
// bound on queued bytes. It may run on any goroutine and never blocks.
func (s *Session) evictForBudget(queued int) {
	s.Logger().Warn("evicting the client with the most answers queued: the sessions together hold more than the daemon's bound",
		"queued_bytes", queued, "max_queued_bytes", s.cfg.Budget.Max())
	s.closeWith(ErrOverBudget)
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
	st := Stats{Started: s.started, Inflight: s.Inflight(), BytesIn: s.bytesIn.Load(), BytesOut: s.bytesOut.Load()}
	if s.out != nil {
		st.BytesOut, st.Queued = s.out.Written(), s.out.Bytes()
	}
	return st
}

// Peer is who is at the other end.
func (s *Session) Peer() Peer { return s.cfg.Peer }

// ID is the session's number, unique within the daemon.
func (s *Session) ID() uint64 { return s.cfg.ID }

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
	if s.direct != nil {
		return s.runUnqueued(ctx, h)
	}
	if s.cfg.Budget != nil {
		// Joined here, not in New: Run closes the queue, so the share
		// always leaves (a session refused before Run never joins).
		s.out.JoinBudget(s.cfg.Budget, s.evictForBudget)
	}
	// Nothing waits for the end while the session lives: the end of ctx
	// ends the session, in a function run when it comes, and the end of
	// the session closes the transport, on a goroutine closeWith starts
	// (no goroutine, and no context of its own, per idle session).
	var watch sync.WaitGroup
	watch.Add(1)
	stopWatch := context.AfterFunc(ctx, func() {
		defer watch.Done()
		s.closeWith(context.Cause(ctx))
	})
	s.closeWith(s.readLoop(ctx, h))
	s.finishWrites()
	close(s.writerDone)
	if stopWatch() {
		watch.Done() // ctx did not end: its function will never run
	}
	watch.Wait()
	s.closing.Wait()
	s.aheadWG.Wait() // the transport is closed: its read has returned
	s.out.Close()    // what is left goes, and leaves the budget
	return s.result()
}

// closeTransport closes a queued transport once the session has ended:
// that unblocks the reader, and the writer too when it is stuck in a write
// to a client that stopped reading. A client that half-closed gets
// flushTimeout to take what was queued.
func (s *Session) closeTransport() {
	if errors.Is(s.err, io.EOF) {
		t := time.NewTimer(flushTimeout)
		defer t.Stop()
		select {
		case <-s.writerDone:
		case <-t.C:
		}
	}
	s.t.Close()
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
		if s.direct != nil {
			s.t.Close() // unblocks the read loop; it never blocks
			return
		}
		s.closing.Go(s.closeTransport) // Run waits for it
	})
}

// Send queues a frame for the client and wakes the writer. It never
// blocks. A client whose outbox would pass its maximum is evicted: Send
// returns ErrSlowClient and the session ends.
func (s *Session) Send(f outbox.Frame) error { return s.send(f, true) }

// SendLater is Send without waking the writer: the frame waits for the next
// Send or Flush. A reader that handles a run of messages queues its sends
// with it and flushes once the run is handled, so they go out in one write.
func (s *Session) SendLater(f outbox.Frame) error { return s.send(f, false) }

func (s *Session) send(f outbox.Frame, wake bool) error {
	if s.isDone() {
		return ErrClosed
	}
	if s.direct != nil {
		return s.put(f, wake)
	}
	var err error
	if wake {
		err = s.out.Send(f)
	} else {
		err = s.out.SendLater(f)
	}
	if errors.Is(err, outbox.ErrFull) {
		// One frame is always taken into an empty outbox, however large
		// (its size is bounded by max_message_bytes): only a backlog evicts.
		s.Logger().Warn("evicting a client that stopped reading", "queued_bytes", s.out.Bytes(), "outbox_max", s.cfg.OutboxMax)
		s.closeWith(ErrSlowClient)
		return ErrSlowClient
	}
	if errors.Is(err, outbox.ErrClosed) {
		return ErrClosed // closed between the check above and the send
	}
	return err
}

// Flush sends what SendLater queued: written at once by the caller when the
// writer is idle and the client takes it without blocking (an answer then
// reaches its client with no goroutine handoff), else by the writer. Flush
// never blocks.
func (s *Session) Flush() {
	switch {
	case s.isDone():
	case s.direct != nil:
		s.direct.Flush()
	default:
		s.out.Flush()
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

// Reply sends an error that mcpmux emits, naming the server, as the last
// frame for tag.
func (s *Session) Reply(id json.RawMessage, tag uint64, e *jsonrpc.Error) {
	s.Send(outbox.Frame{Data: e.WithServer(s.cfg.Server).Response(id), Tag: tag, Last: true})
}

// Begin counts a request into flight; End counts it out. While MaxInflight
// requests are in flight the session reads nothing more from its client.
func (s *Session) Begin() { s.inflight.Add(1) }

// End counts a request out of flight.
func (s *Session) End() {
	s.inflight.Add(-1)
	notify(s.ended)
}

// Inflight is the number of requests the session has in flight.
func (s *Session) Inflight() int { return int(s.inflight.Load()) }

func (s *Session) readLoop(ctx context.Context, h Handler) error {
	for {
		if err := s.readyToRead(ctx, h); err != nil {
			return err
		}
		frame, tag, err := s.next(ctx)
		s.bytesIn.Add(int64(len(frame)))
		if err != nil {
			if err := s.readFailed(ctx, err, tag); err != nil {
				return err
			}
			continue
		}
		s.handle(h, frame, tag)
	}
}

// readFailed deals with a read's error: a message over the size limit is
// answered and the session reads on (nil); any other error ends it, once
// the requests in flight are answered when the client half-closed. Kept
// out of readLoop, whose frame is under every idle session's parked read.
func (s *Session) readFailed(ctx context.Context, err error, tag uint64) error {
	var tooLarge *jsonrpc.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		s.Logger().Warn("client sent a message over the size limit", "bytes", tooLarge.Size, "limit", tooLarge.Limit)
		s.Reply(tooLarge.ID, tag, &jsonrpc.Error{
			Code:    jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("message of %d bytes is over the limit of %d", tooLarge.Size, tooLarge.Limit),
			Reason:  jsonrpc.ReasonTooLarge,
		})
		return nil
	case errors.Is(err, ErrHalfClosed):
		s.awaitInflight(ctx)
	}
	return err
}

// readyToRead returns once the session may read its next frame; what the
// handler held back goes out before anything here can wait: the next
// read, or the wait for room, which the answers to those very requests
// may be what ends. An unqueued transport with nothing at hand has no
// frame to wait room for: its next read is its end.
func (s *Session) readyToRead(ctx context.Context, h Handler) error {
	room := s.hasRoom()
	buffered := s.ahead == nil && s.t.Buffered() // a read ahead owns the transport's buffer
	if !room || !buffered {
		h.Flush()
	}
	if s.direct != nil && !buffered {
		return nil
	}
	if !room {
		if err := s.waitForRoom(ctx); err != nil {
			return err
		}
	}
	return h.WaitRoom(ctx)
}

// handle is the unit of failure: a panic while handling one message becomes
// an internal error for that message, and the session reads its next one.
func (s *Session) handle(h Handler, frame []byte, tag uint64) {
	var id json.RawMessage
	answer := true // false for a notification or a response: they get no answer
	defer func() {
		if p := recover(); p != nil {
			s.Logger().Error("panic while handling a message", "panic", p, "stack", string(debug.Stack()))
			if answer {
				s.Reply(id, tag, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error", Reason: jsonrpc.ReasonInternal})
			}
		}
	}()
	// IsBatch only looks at the first byte: a frame that is not UTF-8 JSON
	// goes to Parse, which answers it -32700.
	if jsonrpc.IsBatch(frame) && jsonrpc.Valid(frame) {
		h.HandleBatch(s, frame, tag)
		return
	}
	m, err := jsonrpc.Parse(frame)
	if err != nil {
		var e *jsonrpc.Error
		errors.As(err, &e)
		s.Logger().Debug("client sent a malformed message", "error", err)
		s.Reply(m.ID, tag, e)
		return
	}
	if m.Kind == jsonrpc.KindRequest {
		id = m.ID
	} else {
		answer = false
	}
	h.HandleMessage(s, m, tag)
}

// waitForRoom returns once the outbox is at or below its high-water mark and
// fewer than MaxInflight requests are in flight.
func (s *Session) waitForRoom(ctx context.Context) error {
	for {
		room := s.room()
		below := isClosed(room)
		if below && s.Inflight() < s.cfg.MaxInflight {
			return nil
		}
		if below {
			room = nil // wait for a request to end
		}
		select {
		case <-room:
		case <-s.ended:
		case <-s.done:
			return s.err
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// awaitInflight waits, for a client that half-closed, until its requests
// in flight have been answered, DrainTimeout has passed, or the session
// ends.
func (s *Session) awaitInflight(ctx context.Context) {
	n := s.Inflight()
	if n == 0 {
		return
	}
	s.Logger().Debug("client half-closed; answering its requests in flight first", "inflight", n)
	t := time.NewTimer(s.cfg.DrainTimeout)
	defer t.Stop()
	for s.Inflight() > 0 {
		select {
		case <-s.ended:
		case <-t.C:
			s.Logger().Warn("closing a half-closed session with requests still in flight", "inflight", s.Inflight(), "drain_timeout", s.cfg.DrainTimeout)
			return
		case <-s.done:
			return
		case <-ctx.Done():
			return
		}
	}
}

// hasRoom reports whether the session may read another frame now.
func (s *Session) hasRoom() bool {
	return (s.out == nil || s.out.HasRoom()) && s.Inflight() < s.cfg.MaxInflight
}

// room is closed while the outbox is at or below its high-water mark.
func (s *Session) room() <-chan struct{} {
	if s.out == nil {
		return closedRoom
	}
	return s.out.Room()
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// flushTimeout bounds how long a closing session keeps writing what it had
// queued before the connection is closed.
const flushTimeout = 2 * time.Second

// finishWrites ends the writer's part once the session has ended: a
// client that half-closed still gets what was queued (Run bounds that by
// flushTimeout, closing the transport), and no writer starts after it.
func (s *Session) finishWrites() {
	if errors.Is(s.err, io.EOF) {
		s.out.Drain()
	}
	s.out.Stop()
	s.out.Wait()
}

// writeFailed is the outbox's fail function: a write to the client failed,
// on the writer goroutine the outbox runs while it has frames to write.
func (s *Session) writeFailed(err error) {
	s.closeWith(fmt.Errorf("write to client: %w", err))
}

func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
