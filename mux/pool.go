package mux

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/upstream"
)

// Server is what the daemon serves under one configured name: a Hub, which
// shares one process among all sessions, or a Pool, which gives each session
// a process of its own.
type Server interface {
	Name() string
	Run(ctx context.Context) error
	Serve(ctx context.Context, t session.Transport, peer session.Peer) error
	Full() bool
	MaxMessageBytes() int
	Status() Status
	Restart()
	Logs() []string
	FollowLogs(ctx context.Context, fn func(string) error) error
	Reconfigure(up upstream.Config)
	SetTools(v ToolView)
}

// How a server's processes are shared among its sessions.
const (
	ShareShared   = "shared"   // one process for every session (Hub)
	ShareIsolated = "isolated" // one process per client (Pool)
	ShareProject  = "project"  // one process per project (Projects)
)

// NewServer returns a Hub, a Pool or Projects, as share says ("" is shared).
func NewServer(cfg Config, share string) Server {
	switch share {
	case ShareIsolated:
		return NewPool(cfg)
	case ShareProject:
		return NewProjects(cfg)
	}
	return New(cfg)
}

// Pool serves share = "isolated": every client gets its own server process,
// for servers whose state cannot be shared (a browser, a REPL). A session on
// a connection (the socket, `mcpmux connect`, a WebSocket) is one client,
// whatever its era: its process starts with it and stops, with the usual
// escalation, when it leaves. A 2026-07-28 request over HTTP is a session
// of its own; the requests of one client (session.Peer.Client) share one
// process, which stops IdleTimeout (default clientIdle) after its last.
type Pool struct {
	cfg     Config
	events  *eventLog // shared by the pool's hubs
	log     *slog.Logger
	started chan struct{} // closed by Run once ctx is set
	ctx     context.Context

	mu      sync.Mutex
	hubs    map[*Hub]bool        // every process, the clients' too
	clients map[string]*instance // the hubs of clients whose requests are sessions of their own, by Peer.Client
	wg      sync.WaitGroup       // the clients' hubs' Run
}

// clientIdle is how long a client's process outlives its last request
// when IdleTimeout is zero: such a client never says that it left.
const clientIdle = 10 * time.Minute

// NewPool returns a pool; its processes start with their sessions, once
// Run runs.
func NewPool(cfg Config) *Pool {
	p := &Pool{cfg: withDefaults(cfg), events: newEventLog(), started: make(chan struct{}), hubs: make(map[*Hub]bool), clients: make(map[string]*instance)}
	p.cfg.events = p.events
	base := cfg.Logger
	if base == nil {
		base = slog.New(slog.DiscardHandler)
	}
	p.log = slog.New(newTeeHandler(base.Handler(), p.events)).With("server", cfg.Name)
	if p.cfg.IdleTimeout <= 0 {
		p.cfg.IdleTimeout = clientIdle
	}
	return p
}

// Name is the server's configured name.
func (p *Pool) Name() string { return p.cfg.Name }

// MaxMessageBytes is the size limit of one message, both directions.
func (p *Pool) MaxMessageBytes() int { return p.cfg.Upstream.MaxMessageBytes }

// Run waits for ctx, then stops the clients' processes and returns once
// they are stopped; each connection's process is owned by its Serve.
func (p *Pool) Run(ctx context.Context) error {
	p.ctx = ctx
	close(p.started)
	<-ctx.Done()
	p.stopClients()
	p.wg.Wait()
	return nil
}

// Full reports whether the pool has max_sessions processes already.
func (p *Pool) Full() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.MaxSessions > 0 && len(p.hubs) >= p.cfg.MaxSessions
}

// Serve serves a session on its client's process: a process of its own,
// started for it and stopped when it ends, or for a request of a client
// whose requests are sessions of their own, that client's.
func (p *Pool) Serve(ctx context.Context, t session.Transport, peer session.Peer) error {
	peer.OnDemand = true // the process starts with the client's first request that needs it
	if peer.OneRequest && peer.Client != "" {
		return p.serveClient(ctx, t, peer)
	}
	cfg := p.hubConfig()
	h := New(cfg)
	if !p.admit(h) {
		refuseSession(h.log, cfg.Name, p.cfg.MaxSessions, 0, t, peer)
		return ErrTooManySessions
	}
	defer p.leave(h)

	hctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { h.Run(hctx) })
	err := h.Serve(hctx, t, peer)
	cancel()
	wg.Wait() // the process is stopped and reaped
	return err
}

// hubConfig is how one process of the pool is run: started by the first
// request that needs it (initialize, server/discover and the lists are
// answered from what the state folder remembers of the server, if it does:
// a client that only probes starts nothing), never idle, its one client
// never refused.
func (p *Pool) hubConfig() Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hubConfigLocked()
}

func (p *Pool) hubConfigLocked() Config {
	cfg := p.cfg
	cfg.Lazy, cfg.IdleTimeout, cfg.MaxSessions = true, 0, NoLimit
	return cfg
}

// admit counts a session's hub in; false when the pool is full.
func (p *Pool) admit(h *Hub) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg.MaxSessions > 0 && len(p.hubs) >= p.cfg.MaxSessions {
		return false
	}
	p.hubs[h] = true
	return true
}

func (p *Pool) leave(h *Hub) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.hubs, h)
}

// serveClient serves one request's session on its client's process,
// starting it if needed.
func (p *Pool) serveClient(ctx context.Context, t session.Transport, peer session.Peer) error {
	select {
	case <-p.started:
	case <-ctx.Done():
		t.Close()
		return context.Cause(ctx)
	}
	in, started, full := p.acquire(peer.Client)
	switch {
	case full:
		refuseSession(p.log, p.cfg.Name, p.cfg.MaxSessions, 0, t, peer)
		return ErrTooManySessions
	case in == nil:
		t.Close()
		return context.Cause(p.ctx) // the daemon is stopping
	case started:
		p.log.Info("started a client's process", "client", peer.Client)
	}
	defer p.release(in)
	return in.hub.Serve(ctx, t, peer)
}

// acquire counts a request in on its client's hub, starting it if needed;
// nil once Run is ending, or when the pool is full.
func (p *Pool) acquire(client string) (in *instance, started, full bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return nil, false, false
	}
	in = p.clients[client]
	if in == nil {
		if p.cfg.MaxSessions > 0 && len(p.hubs) >= p.cfg.MaxSessions {
			return nil, false, true
		}
		in, started = p.startLocked(client), true
	}
	in.sessions++
	if in.idle != nil {
		in.idle.Stop()
		in.idle = nil
	}
	return in, started, false
}

// startLocked makes and runs a client's hub.
func (p *Pool) startLocked(client string) *instance {
	ctx, cancel := context.WithCancel(p.ctx)
	in := &instance{key: client, hub: New(p.hubConfigLocked()), cancel: cancel, done: make(chan struct{})}
	p.clients[client] = in
	p.hubs[in.hub] = true
	p.wg.Go(func() {
		defer close(in.done)
		in.hub.Run(ctx)
	})
	return in
}

// release counts a request out; the client's last arms its idle stop.
func (p *Pool) release(in *instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	in.sessions--
	if in.sessions > 0 {
		return
	}
	in.idle = time.AfterFunc(p.cfg.IdleTimeout, func() { p.stopIfIdle(in) })
}

// stopIfIdle stops a client's process that still has no request.
func (p *Pool) stopIfIdle(in *instance) {
	if !p.forget(in) {
		return
	}
	p.log.Info("stopping a client's process: no requests", "client", in.key, "idle_timeout", p.cfg.IdleTimeout)
	in.cancel()
}

func (p *Pool) forget(in *instance) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if in.sessions > 0 || p.clients[in.key] != in {
		return false
	}
	delete(p.clients, in.key)
	delete(p.hubs, in.hub)
	return true
}

// stopClients stops every client's process and their idle timers; acquire
// starts no more once ctx is done, so nothing is added to wg after this.
func (p *Pool) stopClients() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, in := range p.clients {
		if in.idle != nil {
			in.idle.Stop()
		}
		in.cancel()
		delete(p.clients, key)
		delete(p.hubs, in.hub)
	}
}

// running is every session's hub, in no order.
func (p *Pool) running() []*Hub {
	p.mu.Lock()
	defer p.mu.Unlock()
	hubs := make([]*Hub, 0, len(p.hubs))
	for h := range p.hubs {
		hubs = append(hubs, h)
	}
	return hubs
}

// Status sums up the pool: one line, its sessions, each on its own process.
func (p *Pool) Status() Status {
	hubs := p.running()
	st := Status{Name: p.cfg.Name, State: "isolated", SessionList: []SessionStatus{}}
	for _, h := range hubs {
		hs := h.Status()
		st.Sessions += hs.Sessions
		st.Inflight += hs.Inflight
		st.Queued += hs.Queued
		st.Restarts += hs.Restarts
		st.SessionList = append(st.SessionList, hs.SessionList...)
		if hs.LastExit != "" {
			st.LastExit = hs.LastExit
		}
	}
	slices.SortFunc(st.SessionList, func(a, b SessionStatus) int { return cmp.Compare(a.ID, b.ID) })
	return st
}

// Restart restarts every session's process; the sessions stay.
func (p *Pool) Restart() {
	for _, h := range p.running() {
		h.Restart()
	}
}

// Logs returns the recent log lines of all the pool's processes.
func (p *Pool) Logs() []string { return p.events.recent() }

// FollowLogs calls fn with each new log line until ctx is done or fn fails.
func (p *Pool) FollowLogs(ctx context.Context, fn func(string) error) error {
	return p.events.follow(ctx, fn)
}

// Reconfigure changes how processes start: the new sessions' at once, and
// the running ones' by a restart.
func (p *Pool) Reconfigure(up upstream.Config) {
	p.setUpstream(up)
	for _, h := range p.running() {
		h.Reconfigure(up)
	}
}

// SetTools changes the tool view of every process, running or to come.
func (p *Pool) SetTools(v ToolView) {
	p.setTools(v)
	for _, h := range p.running() {
		h.SetTools(v)
	}
}

func (p *Pool) setTools(v ToolView) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg.Tools = v
}

func (p *Pool) setUpstream(up upstream.Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	up.Name, up.Logger, up.MaxMessageBytes = p.cfg.Upstream.Name, p.cfg.Upstream.Logger, p.cfg.Upstream.MaxMessageBytes
	p.cfg.Upstream = up
}
