package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/mcpmux/mcpmux/session"
)

// Member is what an endpoint needs of a member server: a session of its
// router over a transport. mux.Server has it.
type Member interface {
	Serve(ctx context.Context, t session.Transport, peer session.Peer) error
}

// Options are what an endpoint takes from the daemon that serves it.
type Options struct {
	// Lookup finds a member server by name, at the start of each client
	// session; false when no such server is served now.
	Lookup func(name string) (Member, bool)
	// Session holds the limits of each client session; its ID, Peer,
	// Server and Logger are set per session.
	Session session.Config
	// IDs hands out session ids, shared with the servers' routers; nil
	// means a counter of the endpoint's own.
	IDs     *atomic.Uint64
	Version string // mcpmux's version, in the endpoint's serverInfo
	Logger  *slog.Logger
}

// DefaultMaxMessageBytes bounds a client's message when Config does not.
const DefaultMaxMessageBytes = 16 << 20

// Endpoint serves its servers as one MCP server to each of its sessions.
type Endpoint struct {
	name string
	cfg  atomic.Pointer[Config] // as configured now; a session keeps the one it began with
	opts Options
	log  *slog.Logger

	sessions atomic.Int64 // client sessions now

	knownMu sync.Mutex
	known   map[string]json.RawMessage // member + "\x00" + method -> its last first page of that list
}

// New returns an endpoint; Serve serves each of its client sessions.
func New(cfg Config, opts Options) *Endpoint {
	if opts.IDs == nil {
		opts.IDs = new(atomic.Uint64)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Lookup == nil {
		opts.Lookup = func(string) (Member, bool) { return nil, false }
	}
	e := &Endpoint{name: cfg.Name, opts: opts, log: log.With("endpoint", cfg.Name)}
	e.cfg.Store(&cfg)
	return e
}

// remember keeps a member's first page of a list, for the sessions whose
// member cannot answer it (failed, gone, not started in time).
func (e *Endpoint) remember(member, method string, result json.RawMessage) {
	e.knownMu.Lock()
	defer e.knownMu.Unlock()
	if e.known == nil {
		e.known = map[string]json.RawMessage{}
	}
	e.known[member+"\x00"+method] = result
}

// recall is the member's last first page of a list; nil when none is
// known.
func (e *Endpoint) recall(member, method string) json.RawMessage {
	e.knownMu.Lock()
	defer e.knownMu.Unlock()
	return e.known[member+"\x00"+method]
}

// Name is the endpoint's name.
func (e *Endpoint) Name() string { return e.name }

// Config is the endpoint as configured now.
func (e *Endpoint) Config() Config { return *e.cfg.Load() }

// Reconfigure changes the endpoint (its name stays) for the sessions that
// begin from now on; those already begun keep theirs.
func (e *Endpoint) Reconfigure(cfg Config) {
	cfg.Name = e.name
	e.cfg.Store(&cfg)
}

// Sessions is the number of client sessions the endpoint serves now.
func (e *Endpoint) Sessions() int { return int(e.sessions.Load()) }

// Full reports that the endpoint takes no more sessions: never; each
// member's router refuses its own sessions over its max_sessions.
func (e *Endpoint) Full() bool { return false }

// MaxMessageBytes bounds a message from a client of the endpoint.
func (e *Endpoint) MaxMessageBytes() int {
	if n := e.Config().MaxMessageBytes; n > 0 {
		return n
	}
	return DefaultMaxMessageBytes
}

// Serve serves one client session over t until the client leaves or ctx
// is done: it opens a session of each member's router, and closes them
// when the client's session ends. It returns once they have ended.
func (e *Endpoint) Serve(ctx context.Context, t session.Transport, peer session.Peer) error {
	e.sessions.Add(1)
	defer e.sessions.Add(-1)
	cfg := e.opts.Session
	cfg.ID = e.opts.IDs.Add(1)
	cfg.Peer = peer
	cfg.Server = e.name
	cfg.Logger = e.log
	sess := session.New(cfg, t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := newConn(e, sess, peer)
	var wg sync.WaitGroup
	c.open(ctx, &wg)
	sess.Logger().Debug("endpoint session attached", "transport", peer.Transport, "peer", peer.Addr)
	err := sess.Run(ctx, c)
	cancel()
	c.closeMembers()
	wg.Wait()
	sess.Logger().Debug("endpoint session ended", "reason", sess.Err())
	if errors.Is(err, session.ErrClosed) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
