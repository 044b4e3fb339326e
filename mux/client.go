package mux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/protocol"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/upstream"
)

// client is the hub's side of one session: the MCP state the protocol keeps
// per connection, which mcpmux must keep per session. Its fields under mu are
// written by the session's read goroutine and read by any.
type client struct {
	h    *Hub
	sess *session.Session
	ctx  context.Context

	mu          sync.Mutex
	era         era  // decided by the session's first request
	initialized bool // answered its initialize
	ready       bool // sent notifications/initialized
	version     string
	clientInfo  json.RawMessage
	capsRaw     json.RawMessage // the capabilities of its initialize, as sent
	caps        caps
	roots       []root // its roots, when mcpmux gathers them

	// held is the process to which the session's read goroutine, alone,
	// has queued requests with SendLater since its last Flush.
	held process
	// asking is the method of the request the read goroutine, alone, is
	// handling, for what it refuses (countRefused).
	asking string

	// using: the session wants the server (set from its start, or, for an
	// on-demand session, at its first request that needs the server).
	using atomic.Bool

	// envelope is the _meta a legacy session's requests carry to a modern
	// server, encoded, with what it was made of (envelopeObject).
	envelope atomic.Pointer[encodedEnvelope]
}

// use marks the session as wanting the server: a lazy server starts, and
// idle_timeout does not stop it while the session lasts.
func (c *client) use() {
	if c.using.Load() || !c.h.sessions.markUsing(c) {
		return
	}
	c.sess.Logger().Debug("session wants the server")
	notify(c.h.life.sessions)
	notify(c.h.life.demand)
}

func (c *client) capabilities() caps {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caps
}

func (c *client) isReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

func (c *client) negotiated() string {
	v, _ := c.identity()
	return v
}

func (c *client) rootList() []root {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.roots
}

func (c *client) setRoots(rs []root) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roots = rs
}

// initializedAs records the session's side of the handshake.
func (c *client) initializedAs(version string, capsRaw, info json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.era, c.initialized = eraLegacy, true
	c.version, c.caps, c.capsRaw, c.clientInfo = version, parseCaps(capsRaw), capsRaw, info
}

// handshake is what a legacy session's initialize said of it.
func (c *client) handshake() (info, caps json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clientInfo, c.capsRaw
}

func (c *client) sessionEra() era {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.era
}

// becomeModern: the session's first request carried the modern envelope.
// It is never "ready" in the legacy sense: nothing is sent to it unasked.
// info, the clientInfo of that request's envelope, names the session in
// status.
func (c *client) becomeModern(info json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.era == eraUnknown {
		c.era, c.version, c.clientInfo = eraModern, protocol.Modern, info
	}
}

// markReady: the session sent notifications/initialized.
func (c *client) markReady() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ready = c.initialized
}

// identity is the version the session negotiated and the clientInfo it sent.
func (c *client) identity() (string, json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version, c.clientInfo
}

func (c *client) status() SessionStatus {
	st := c.sess.Stats()
	peer := c.sess.Peer()
	version, info := c.identity()
	e := c.sessionEra()
	var ci struct {
		Name string `json:"name"`
	}
	json.Unmarshal(info, &ci)
	return SessionStatus{
		ID:        c.sess.ID(),
		Transport: peer.Transport,
		Peer:      peer.Addr,
		Client:    ci.Name,
		Protocol:  version,
		Era:       e.String(),
		Age:       time.Since(st.Started).Round(time.Second).String(),
		Inflight:  st.Inflight,
		BytesIn:   st.BytesIn,
		BytesOut:  st.BytesOut,
		Queued:    st.Queued,
	}
}

// send queues a frame for the session, about nothing it asked (tag 0); it
// never blocks.
func (c *client) send(frame []byte) { c.sess.Send(outbox.Frame{Data: frame}) }

// sendAbout queues a frame about something that came in under tag: a
// progress notification, a server request a call caused. The transport
// places it with what came in (an HTTP POST's stream).
func (c *client) sendAbout(tag uint64, frame []byte) {
	c.sess.Send(outbox.Frame{Data: frame, Tag: tag})
}

// ErrTooManySessions: the server has max_sessions sessions already.
var ErrTooManySessions = errors.New("mux: too many sessions")

// Full reports whether the server has max_sessions sessions already, for
// transports that refuse before they accept (HTTP 503).
func (h *Hub) Full() bool { return h.sessions.full() }

// Serve runs a session on this hub until it ends, then cancels upstream what
// it left in flight. A session over max_sessions gets one error line and is
// closed.
func (h *Hub) Serve(ctx context.Context, t session.Transport, peer session.Peer) error {
	c, err := attach(ctx, h, t, peer)
	if err != nil {
		return err
	}
	// While the session idles, only this small frame and Run's lie under
	// its parked read: attach and leave hold the large locals (a session
	// config, log attributes), so that the stack an idle session keeps holds
	// little more than its read (its size: see aside).
	return c.leave(c.sess.Run(ctx, c))
}

// attach makes the client of a new session and counts it in, or refuses
// it over max_sessions.
func attach(ctx context.Context, h *Hub, t session.Transport, peer session.Peer) (*client, error) {
	cfg := h.cfg.Session
	cfg.ID = h.sessions.nextID()
	cfg.Logger = h.log
	cfg.Peer = peer
	sess := session.New(cfg, t)
	c := &client{h: h, sess: sess, ctx: ctx}
	c.using.Store(!peer.OnDemand)
	if !h.sessions.add(c) {
		refuseSession(h.log, h.cfg.Name, h.cfg.MaxSessions, cfg.ID, t, peer)
		return nil, ErrTooManySessions
	}
	notify(h.life.sessions)
	if h.cfg.Lazy || h.cfg.IdleTimeout > 0 {
		notify(h.life.demand)
	}
	// Logged through the hub's logger: a session of one request that logs
	// nothing of its own never makes one.
	if h.log.Enabled(context.Background(), slog.LevelDebug) {
		h.log.Debug("session attached", "session", cfg.ID, "transport", peer.Transport, "peer", peer.Addr)
	}
	return c, nil
}

// leave counts an ended session out and cancels upstream what it left in
// flight; err is what its Run returned, nil for a plain end.
func (c *client) leave(err error) error {
	h, id := c.h, c.sess.ID()
	h.sessions.remove(id)
	notify(h.life.sessions)
	h.detach(c)
	if h.log.Enabled(context.Background(), slog.LevelDebug) {
		h.log.Debug("session ended", "session", id, "reason", c.sess.Err())
	}
	if errors.Is(err, session.ErrClosed) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// refuseSession tells a client over max_sessions why, and closes it.
func refuseSession(log *slog.Logger, name string, max int, id uint64, t session.Transport, peer session.Peer) {
	log.Warn("refused a session: max_sessions reached", "session", id, "transport", peer.Transport, "peer", peer.Addr, "max_sessions", max)
	e := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("server %s has its maximum of %d sessions", name, max), Reason: jsonrpc.ReasonTooManySessions, Server: name}
	t.WriteFrames([]outbox.Frame{{Data: e.Response(nil), Last: true}})
	t.Close()
}

// detach cancels upstream every request a departed session left in flight,
// and counts it out of everything it held.
func (h *Hub) detach(c *client) {
	id := c.sess.ID()
	proc := h.life.current()
	gone := h.flights.dropSession(id)
	c.countDeparted(gone.routes)
	for up, r := range gone.routes {
		if proc != nil && wentUp(r) {
			proc.Send(cancelFrame(up, "client disconnected"))
		}
	}
	h.release(gone.next)
	if len(gone.routes) > 0 {
		c.sess.Logger().Debug("cancelled requests of a departed session", "count", len(gone.routes))
	}
	h.dropServerReqs(id)
	h.down.dropParked(gone.parked)
	for _, l := range h.down.local.drop(id) {
		h.down.releaseListen(l)
	}
	last := h.subs.drop(id)
	if info := h.describedServer(); info != nil && info.era == eraModern {
		h.up.syncOwnedListen()
	} else {
		for _, uri := range last {
			h.fire(proc, "resources/unsubscribe", map[string]string{"uri": uri})
		}
	}
	h.dropTasks(id, proc)
	h.levels.drop(id)
	h.updateLogLevel()
	if len(c.rootList()) > 0 { // one without roots leaves their union as it was
		h.rootsChanged()
	}
}

func cancelFrame(up int64, reason string) []byte {
	n, _ := jsonrpc.Notification("notifications/cancelled", map[string]any{"requestId": up, "reason": reason})
	return n
}

// WaitRoom implements session.Handler: a session reads on only while the
// server's write queue has room.
func (c *client) WaitRoom(ctx context.Context) error {
	proc := c.h.life.current()
	if proc == nil {
		return nil
	}
	if err := proc.WaitWritable(ctx); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

// sendUp sends a request to the server from the session's read goroutine.
// It is held back while the session has more frames at hand, and Flush
// sends the run in one write. When the server's write queue cannot take it
// (many sessions sent at once, past what WaitRoom let through), the session
// waits for room, reading nothing more meanwhile, instead of having the
// request refused; the wait ends when the client leaves.
func (c *client) sendUp(proc process, frame []byte) error {
	if c.held != nil && c.held != proc {
		c.held.Flush() // the server was replaced mid-run
	}
	c.held = proc
	err := proc.SendLater(frame)
	if !errors.Is(err, upstream.ErrQueueFull) {
		return err
	}
	c.sess.Logger().Debug("waiting for room in the server's write queue", "bytes", len(frame))
	return c.sess.Await(c.ctx, func(ctx context.Context) error {
		return proc.SendLaterWait(ctx.Done(), frame)
	})
}

// Flush implements session.Handler: what the read goroutine held back for
// the server goes now.
func (c *client) Flush() {
	if c.held != nil {
		c.held.Flush()
		c.held = nil
	}
}

// HandleMessage implements session.Handler.
func (c *client) HandleMessage(s *session.Session, m *jsonrpc.Message, tag uint64) {
	c.handle(m, answerTo{c, tag})
}

// sink is where the answers to a message go: the session, or the batch the
// message came in.
type sink interface {
	reply(frame []byte)
	// pending counts an answer that will come later (a forwarded request).
	pending()
	// tag is the transport's tag of the frame the message came in.
	tag() uint64
}

// answerTo is the session as a sink: each answer the last frame about
// what came in under its tag.
type answerTo struct {
	c *client
	t uint64
}

func (a answerTo) reply(frame []byte) { a.c.sess.Send(outbox.Frame{Data: frame, Tag: a.t, Last: true}) }
func (a answerTo) pending()           {}
func (a answerTo) tag() uint64        { return a.t }

func (c *client) fail(out sink, id json.RawMessage, e *jsonrpc.Error) {
	c.countRefused()
	out.reply(e.WithServer(c.h.cfg.Name).Response(id))
}

// failWith answers a request with err when it is a *jsonrpc.Error; any
// other error (the session is ending) gets no answer.
func (c *client) failWith(out sink, id json.RawMessage, err error) {
	var e *jsonrpc.Error
	if errors.As(err, &e) {
		c.fail(out, id, e)
	}
}

func (c *client) handle(m *jsonrpc.Message, out sink) {
	switch m.Kind {
	case jsonrpc.KindRequest:
		c.asking = m.Method
		c.handleRequest(m, out)
		c.asking = ""
	case jsonrpc.KindNotification:
		c.handleNotification(m)
	default:
		c.answerFromSession(m)
	}
}
