package mux

import (
	"cmp"
	"context"
	"slices"
	"sync"

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
	ShareIsolated = "isolated" // one process per session (Pool)
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

// Pool serves share = "isolated": every session gets its own server process,
// started for it and stopped, with the usual escalation, when it leaves. For
// servers whose state cannot be shared (a browser, a REPL).
type Pool struct {
	cfg    Config
	events *eventLog // shared by the pool's hubs

	mu   sync.Mutex
	hubs map[*Hub]bool
}

// NewPool returns a pool; its processes start with their sessions.
func NewPool(cfg Config) *Pool {
	p := &Pool{cfg: withDefaults(cfg), events: newEventLog(), hubs: make(map[*Hub]bool)}
	p.cfg.events = p.events
	return p
}

// Name is the server's configured name.
func (p *Pool) Name() string { return p.cfg.Name }

// MaxMessageBytes is the size limit of one message, both directions.
func (p *Pool) MaxMessageBytes() int { return p.cfg.Upstream.MaxMessageBytes }

// Run waits for ctx; each session's process is owned by that session's Serve.
func (p *Pool) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Full reports whether the pool has max_sessions sessions already.
func (p *Pool) Full() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.MaxSessions > 0 && len(p.hubs) >= p.cfg.MaxSessions
}

// Serve starts a process for one session, serves the session on it, and
// stops the process when the session ends.
func (p *Pool) Serve(ctx context.Context, t session.Transport, peer session.Peer) error {
	cfg := p.config()
	max := cfg.MaxSessions
	cfg.Lazy, cfg.IdleTimeout, cfg.MaxSessions = false, 0, NoLimit
	h := New(cfg)
	if !p.admit(h) {
		refuseSession(h.log, cfg.Name, max, 0, t, peer)
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

func (p *Pool) config() Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg
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
