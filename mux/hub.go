// Package mux is the router of one shared server: it joins the supervised
// server process, the sessions connected to it, and the tables that rewrite
// ids and progress tokens between them. Every MCP rule that comes from
// sharing one server among many clients lives here: initialize answered from
// a cache, ids made unique upstream and restored exactly downstream,
// cancellations and progress translated, notifications fanned out by rule,
// and every request answered when its server dies.
package mux

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/upstream"
)

// Config configures a Hub.
type Config struct {
	Name     string
	Upstream upstream.Config
	Session  session.Config // limits for each session; ID and Server are set by the hub

	StartTimeout      time.Duration // how long sessions wait for a starting server; 0 means 30s
	RestartBackoff    time.Duration // first delay before a restart; 0 means 250ms
	RestartBackoffMax time.Duration // cap of the delay; 0 means 30s
	RestartWindow     time.Duration // uptime that resets the backoff, and the window of MaxRestarts; 0 means 60s
	MaxRestarts       int           // crashes within RestartWindow before the server is failed; 0 means no limit
	RequestTimeout    time.Duration // a request unanswered this long fails with "timeout" and is cancelled upstream; 0 means none
	PingInterval      time.Duration // liveness pings to the server; 0 means none
	PingFailures      int           // missed pings in a row that restart the server; 0 means 3
	Lazy              bool          // start the server at the first session rather than at once
	MaxSessions       int           // sessions at once; 0 means no limit

	ServerRequests       string        // "latest" (default) or "serialize": how a server request picks among sessions
	ServerRequestTimeout time.Duration // how long a session has to answer the server; 0 means 60s
	Roots                []string      // roots mcpmux answers roots/list with; nil means none configured
	RootsFromSessions    bool          // answer roots/list with the union of the sessions' roots
	DefaultLogLevel      string        // the level of sessions that set none; "" means info
	IdleTimeout          time.Duration // stop the server after this long without sessions; 0 means never

	Version string // mcpmux's version, sent upstream in clientInfo
	Logger  *slog.Logger

	// IDs hands out session ids; sessions of all hubs share one counter so
	// that logs name each session once. Nil means a counter of the hub's own.
	IDs *atomic.Uint64

	// events is where the hub keeps its log lines; nil means its own.
	events *eventLog

	// start replaces upstream.Start in tests.
	start func(upstream.Config, upstream.Handler) (process, error)
}

// process is what the hub needs of a running server.
type process interface {
	Pid() int
	Send(frame []byte) error
	SendLater(frame []byte) error // held until the next Send or Flush
	Flush()
	WaitWritable(ctx context.Context) error
	Done() <-chan struct{}
	Exit() upstream.Exit
	Stop(ctx context.Context) error
	Kill(reason string)
	StderrTail() []string
}

// State is where a hub's server is in its life.
type State string

const (
	StateIdle     State = "idle" // not started yet (lazy), or stopped for want of sessions
	StateStarting State = "starting"
	StateReady    State = "ready"
	StateBackoff  State = "backoff" // waiting to restart after a crash
	StateFailed   State = "failed"  // crashed too often; waits for `mcpmux restart`
	StateStopped  State = "stopped"
)

// Hub routes between one server process and its sessions.
type Hub struct {
	cfg    Config
	log    *slog.Logger
	reqs   idmap.Table
	ids    *atomic.Uint64
	calls  atomic.Uint64
	events *eventLog

	mu         sync.Mutex
	clients    map[uint64]*client
	proc       process
	state      State
	ready      chan struct{} // closed while a server is initialized; replaced when it goes
	init       *initResult   // the server's InitializeResult, cached
	waiters    map[int64]chan *jsonrpc.Message
	restarts   int
	lastExit   string
	started    time.Time
	failedAt   string          // why the server is failed, for its errors
	up         upstream.Config // how to start the server; Reconfigure replaces it
	lastStderr []string

	srvReqs      map[srvKey]*serverReq // requests sent to sessions, by the id the session knows
	elicitations map[string]uint64     // URL-mode elicitationId -> session
	subs         map[string]map[uint64]bool
	logLevel     string // the level last sent to the server; "" none
	tasks        map[string]taskOwner
	taskTokens   map[int64]string // upstream id (the progress token) -> task, while it runs
	lastRoots    string
	serialBusy   int64 // under "serialize": the interactive request in flight; 0 none
	serialQueue  []queued

	// held are the sessions that have answers queued by SendLater on the
	// server's reader goroutine, which alone uses it (see flushHeld).
	held []*client

	kick     chan struct{} // 1-buffered: restart the server now
	demand   chan struct{} // 1-buffered: a session wants the server
	sessions chan struct{} // 1-buffered: a session came or went
}

// New returns a hub; Run starts its server.
func New(cfg Config) *Hub {
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	if cfg.RestartBackoff <= 0 {
		cfg.RestartBackoff = 250 * time.Millisecond
	}
	if cfg.RestartBackoffMax <= 0 {
		cfg.RestartBackoffMax = 30 * time.Second
	}
	if cfg.RestartWindow <= 0 {
		cfg.RestartWindow = time.Minute
	}
	if cfg.PingFailures <= 0 {
		cfg.PingFailures = 3
	}
	if cfg.ServerRequestTimeout <= 0 {
		cfg.ServerRequestTimeout = time.Minute
	}
	if cfg.start == nil {
		cfg.start = func(c upstream.Config, h upstream.Handler) (process, error) { return upstream.Start(c, h) }
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ids := cfg.IDs
	if ids == nil {
		ids = new(atomic.Uint64)
	}
	cfg.Session.Server = cfg.Name
	cfg.Upstream.Name = cfg.Name
	events := cfg.events
	if events == nil {
		events = newEventLog()
	}
	log = slog.New(newTeeHandler(log.Handler(), events))
	cfg.Upstream.Logger = log
	state := StateStarting
	if cfg.Lazy {
		state = StateIdle
	}
	return &Hub{
		up:           cfg.Upstream,
		events:       events,
		cfg:          cfg,
		log:          log.With("server", cfg.Name),
		ids:          ids,
		clients:      make(map[uint64]*client),
		state:        state,
		ready:        make(chan struct{}),
		waiters:      make(map[int64]chan *jsonrpc.Message),
		srvReqs:      make(map[srvKey]*serverReq),
		elicitations: make(map[string]uint64),
		subs:         make(map[string]map[uint64]bool),
		tasks:        make(map[string]taskOwner),
		taskTokens:   make(map[int64]string),
		kick:         make(chan struct{}, 1),
		demand:       make(chan struct{}, 1),
		sessions:     make(chan struct{}, 1),
	}
}

// Name is the server's configured name.
func (h *Hub) Name() string { return h.cfg.Name }

// jitter spreads a delay over [d/2, d) so that servers restarted together do
// not return in lockstep.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

func (h *Hub) setState(s State) {
	h.mu.Lock()
	h.state = s
	h.mu.Unlock()
}

// startOnce starts a process and initializes it. On success the process is
// published and sessions may use it.
func (h *Hub) startOnce(ctx context.Context) (process, error) {
	h.setState(StateStarting)
	proc, err := h.cfg.start(h.upstreamConfig(), (*upstreamHandler)(h))
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.proc = proc // for the hub's own requests; sessions wait for ready
	h.mu.Unlock()

	res, err := h.initialize(ctx, proc)
	if err != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.stopTimeout())
		proc.Stop(sctx)
		cancel()
		h.exited(proc)
		return nil, fmt.Errorf("initialize: %w", err)
	}

	h.mu.Lock()
	prev := h.init
	h.init = res
	h.state = StateReady
	h.started = time.Now()
	close(h.ready)
	h.mu.Unlock()
	h.log.Info("server ready", "pid", proc.Pid(), "protocol", res.version, "name", res.serverName)

	if prev != nil {
		h.afterRestart(prev, res)
	}
	return proc, nil
}

// afterRestart keeps the sessions on a server that came back the same, and
// tells them to refresh their lists; a server that came back different closes
// them, because a legacy client cannot renegotiate mid-session.
func (h *Hub) afterRestart(prev, cur *initResult) {
	if why := prev.incompatible(cur); why != "" {
		h.log.Warn("server came back changed; closing its sessions", "why", why)
		h.closeAll(fmt.Errorf("server %s restarted with %s", h.cfg.Name, why))
		return
	}
	h.replay()
	for _, kind := range []string{"tools", "prompts", "resources"} {
		if !cur.has(kind) {
			continue
		}
		n, _ := jsonrpc.Notification("notifications/"+kind+"/list_changed", nil)
		h.broadcast(n)
	}
}

// exited retires a process: every request in flight on it gets an error now.
func (h *Hub) exited(proc process) {
	exit := proc.Exit()
	h.mu.Lock()
	if h.proc == proc {
		h.proc = nil
	}
	select {
	case <-h.ready:
		h.ready = make(chan struct{})
	default:
	}
	h.lastExit = exit.String()
	h.lastStderr = proc.StderrTail()
	waiters := h.waiters
	h.waiters = make(map[int64]chan *jsonrpc.Message)
	h.mu.Unlock()
	for _, w := range waiters {
		close(w)
	}
	h.forgetServerReqs()
	h.mu.Lock()
	h.tasks = make(map[string]taskOwner) // the new process knows none of them
	h.taskTokens = make(map[int64]string)
	h.lastRoots = ""
	h.mu.Unlock()

	reason, code := jsonrpc.ReasonUpstreamExited, "server exited"
	if exit.Reason == "stalled" {
		reason, code = jsonrpc.ReasonUpstreamStalled, "server stalled"
	}
	routes := h.reqs.Reset()
	if len(routes) > 0 {
		h.log.Warn("failing the requests in flight", "exit", exit.String(), "requests", len(routes))
	}
	for _, r := range routes {
		if r.Session == 0 {
			continue
		}
		h.fail(r, &jsonrpc.Error{
			Code:    jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("%s (%s) with the request in flight", code, exit.String()),
			Reason:  reason,
			Extra:   map[string]any{"exit": exit.String()},
		})
	}
}

// fail answers a request that will get no answer from the server.
func (h *Hub) fail(r idmap.Route, e *jsonrpc.Error) {
	c := h.client(r.Session)
	if c == nil {
		dataOf(r).settle()
		return
	}
	c.deliver(r, e.WithServer(h.cfg.Name).Response(r.ID), nil)
}

// initialize opens the server the one time mcpmux does it: the sessions'
// own initialize requests are answered from what this returns.
func (h *Hub) initialize(ctx context.Context, proc process) (*initResult, error) {
	clientCaps := map[string]any{
		// mcpmux routes these to the session that asked, honouring what
		// each session declared (tools, context, modes).
		"sampling":    map[string]any{"tools": map[string]any{}, "context": map[string]any{}},
		"elicitation": map[string]any{"form": map[string]any{}, "url": map[string]any{}},
	}
	if h.declaresRoots() {
		clientCaps["roots"] = map[string]any{"listChanged": true}
	}
	params := map[string]any{
		"protocolVersion": LatestVersion,
		"capabilities":    clientCaps,
		"clientInfo":      map[string]any{"name": "mcpmux", "version": h.cfg.Version},
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.StartTimeout)
	defer cancel()
	m, err := h.call(ctx, proc, "initialize", params)
	if err != nil {
		return nil, err
	}
	if m.Kind == jsonrpc.KindError {
		return nil, fmt.Errorf("server answered %s", m.Error)
	}
	res, err := parseInitResult(m.Result)
	if err != nil {
		return nil, err
	}
	n, _ := jsonrpc.Notification("notifications/initialized", nil)
	if err := proc.Send(n); err != nil {
		return nil, err
	}
	return res, nil
}

// call sends a request of mcpmux's own and waits for its answer, which may
// be an error response.
func (h *Hub) call(ctx context.Context, proc process, method string, params any) (*jsonrpc.Message, error) {
	own := json.RawMessage(strconv.FormatUint(h.calls.Add(1), 10)) // unique among mcpmux's own requests
	up, err := h.reqs.Add(idmap.Route{Session: 0, ID: own, Method: method, Started: time.Now()})
	if err != nil {
		return nil, err
	}
	frame, err := jsonrpc.Request(json.RawMessage(strconv.FormatInt(up, 10)), method, params)
	if err != nil {
		h.reqs.Take(up)
		return nil, err
	}
	w := make(chan *jsonrpc.Message, 1)
	h.mu.Lock()
	h.waiters[up] = w
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.waiters, up)
		h.mu.Unlock()
		h.reqs.Take(up)
	}()
	if err := proc.Send(frame); err != nil {
		return nil, err
	}
	select {
	case m, ok := <-w:
		if !ok {
			return nil, fmt.Errorf("%s: server exited (%s)", method, proc.Exit())
		}
		return m, nil // an error answer too: the caller decides
	case <-proc.Done():
		return nil, fmt.Errorf("%s: server exited (%s)", method, proc.Exit())
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: no answer: %w", method, context.Cause(ctx))
	}
}

// waitReady waits until a server is initialized and returns it with its
// cached InitializeResult.
func (h *Hub) waitReady(ctx context.Context) (process, *initResult, error) {
	// The common case, on every request: the server is up. No timer.
	h.mu.Lock()
	proc, res, ready := h.proc, h.init, h.ready
	h.mu.Unlock()
	select {
	case <-ready:
		if proc != nil {
			return proc, res, nil
		}
	default:
	}
	t := time.NewTimer(h.cfg.StartTimeout)
	defer t.Stop()
	for {
		h.mu.Lock()
		ready, proc, res, last, state, failed := h.ready, h.proc, h.init, h.lastExit, h.state, h.failedAt
		h.mu.Unlock()
		select {
		case <-ready:
			if proc != nil {
				return proc, res, nil
			}
		default:
		}
		switch state {
		case StateFailed:
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("server %s is failed: %s; `mcpmux restart %s` starts it again", h.cfg.Name, failed, h.cfg.Name), Reason: jsonrpc.ReasonUpstreamUnavailable, Extra: map[string]any{"last_exit": last}}
		case StateIdle:
			notify(h.demand)
		}
		select {
		case <-ready:
		case <-t.C:
			msg := fmt.Sprintf("server %s is not ready", h.cfg.Name)
			if last != "" {
				msg += " (last exit: " + last + ")"
			}
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg, Reason: jsonrpc.ReasonUpstreamUnavailable}
		case <-ctx.Done():
			return nil, nil, context.Cause(ctx)
		}
	}
}

// broadcast sends a frame to every ready session.
func (h *Hub) broadcast(frame []byte) {
	for _, c := range h.readyClients() {
		c.sess.Send(outbox.Frame{Data: frame})
	}
}

func (h *Hub) readyClients() []*client {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*client, 0, len(h.clients))
	for _, c := range h.clients {
		if c.isReady() {
			out = append(out, c)
		}
	}
	return out
}

func (h *Hub) client(id uint64) *client {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.clients[id]
}

func (h *Hub) closeAll(reason error) {
	h.mu.Lock()
	cs := make([]*client, 0, len(h.clients))
	for _, c := range h.clients {
		cs = append(cs, c)
	}
	h.mu.Unlock()
	for _, c := range cs {
		c.sess.Close(reason)
	}
}

// Status is a snapshot of a hub for `mcpmux status`.
type Status struct {
	Name     string   `json:"name"`
	State    State    `json:"state"`
	Pid      int      `json:"pid,omitempty"`
	Uptime   string   `json:"uptime,omitempty"`
	Restarts int      `json:"restarts"`
	Sessions int      `json:"sessions"`
	Inflight int      `json:"inflight"`
	LastExit string   `json:"last_exit,omitempty"`
	Stderr   []string `json:"stderr,omitempty"` // the server's last stderr lines

	SessionList []SessionStatus `json:"session_list"`
}

// SessionStatus describes one session.
type SessionStatus struct {
	ID        uint64 `json:"id"`
	Transport string `json:"transport"`
	Peer      string `json:"peer,omitempty"`
	Client    string `json:"client,omitempty"` // clientInfo.name from its initialize
	Protocol  string `json:"protocol,omitempty"`
	Age       string `json:"age"`
	Inflight  int    `json:"inflight"`
	BytesIn   int64  `json:"bytes_in"`
	BytesOut  int64  `json:"bytes_out"`
}

// Status reports the hub's state.
func (h *Hub) Status() Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := Status{
		Name:     h.cfg.Name,
		State:    h.state,
		Restarts: h.restarts,
		Sessions: len(h.clients),
		Inflight: h.reqs.Len(),
		LastExit: h.lastExit,
	}
	if h.proc != nil && h.state == StateReady {
		s.Pid = h.proc.Pid()
		s.Uptime = time.Since(h.started).Round(time.Second).String()
	}
	if h.proc != nil {
		s.Stderr = h.proc.StderrTail()
	} else {
		s.Stderr = h.lastStderr
	}
	s.SessionList = make([]SessionStatus, 0, len(h.clients))
	for _, c := range h.clients {
		s.SessionList = append(s.SessionList, c.status())
	}
	slices.SortFunc(s.SessionList, func(a, b SessionStatus) int { return cmp.Compare(a.ID, b.ID) })
	return s
}

// MaxMessageBytes is the size limit of one message, both directions.
func (h *Hub) MaxMessageBytes() int { return h.cfg.Upstream.MaxMessageBytes }

// replay gives a restarted server the state the sessions hold: their
// subscriptions and the log level.
func (h *Hub) replay() {
	h.mu.Lock()
	proc, level := h.proc, h.logLevel
	uris := make([]string, 0, len(h.subs))
	for uri := range h.subs {
		uris = append(uris, uri)
	}
	h.mu.Unlock()
	slices.Sort(uris)
	for _, uri := range uris {
		h.fire(proc, "resources/subscribe", map[string]string{"uri": uri})
	}
	if level != "" {
		h.fire(proc, "logging/setLevel", map[string]string{"level": level})
	}
}

// initResult is the server's cached InitializeResult; nil before the first.
func (h *Hub) initResult() *initResult {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.init
}

func (h *Hub) nextCallID() string { return strconv.FormatUint(h.calls.Add(1), 10) }

func idmapRoute(own json.RawMessage) idmap.Route {
	return idmap.Route{Session: 0, ID: own, Started: time.Now()}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func strconvQuote(s string) string { return strconv.Quote(s) }

// queued is an interactive request waiting for its turn under "serialize".
type queued struct {
	up    int64
	frame []byte
}

// acquire takes the one interactive slot for up, or queues its frame; true
// means the caller sends it now.
func (h *Hub) acquire(up int64, frame []byte) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.serialBusy == 0 {
		h.serialBusy = up
		return true
	}
	if len(h.serialQueue) >= serialQueueMax {
		// Bounded: past this, requests go out unserialized rather than wait
		// without limit; attribution falls back to "latest" for them.
		return true
	}
	h.serialQueue = append(h.serialQueue, queued{up, frame})
	return false
}

// serialQueueMax bounds the requests waiting for the interactive slot.
const serialQueueMax = 4096

// release frees the interactive slot held by up and sends the next request
// still waiting for it.
func (h *Hub) release(up int64) {
	for {
		h.mu.Lock()
		if h.serialBusy != up {
			// Not the holder (queued and cancelled): drop it from the queue.
			h.serialQueue = slices.DeleteFunc(h.serialQueue, func(q queued) bool { return q.up == up })
			h.mu.Unlock()
			return
		}
		h.serialBusy = 0
		var next queued
		for len(h.serialQueue) > 0 {
			q := h.serialQueue[0]
			h.serialQueue = h.serialQueue[1:]
			if _, live := h.reqs.Get(q.up); live {
				next = q
				break
			}
		}
		if next.up == 0 {
			h.mu.Unlock()
			return
		}
		h.serialBusy = next.up
		proc := h.proc
		h.mu.Unlock()
		if proc != nil && proc.Send(next.frame) == nil {
			return
		}
		r, ok := h.reqs.Take(next.up)
		if !ok {
			return
		}
		// The server is gone: fail it, which releases its slot in turn.
		h.fail(r, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server cannot take the request", Reason: jsonrpc.ReasonUpstreamUnavailable})
		return
	}
}

// upstreamConfig is how the next process starts.
func (h *Hub) upstreamConfig() upstream.Config {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.up
}

// stopTimeout bounds a stop: both graces and a margin.
func (h *Hub) stopTimeout() time.Duration {
	up := h.upstreamConfig()
	return max(up.StdinGrace, 0) + max(up.TermGrace, 0) + 5*time.Second
}

// Reconfigure changes how the server is started (command, arguments,
// environment, folder, stderr, graces, output limits) and restarts it; the
// sessions stay attached, as they do over any restart. The size limit of
// messages is not among what it changes.
func (h *Hub) Reconfigure(up upstream.Config) {
	h.mu.Lock()
	up.Name, up.Logger = h.up.Name, h.up.Logger
	up.MaxMessageBytes = h.up.MaxMessageBytes
	h.up = up
	h.mu.Unlock()
	h.log.Info("configuration changed; restarting the server")
	h.Restart()
}
