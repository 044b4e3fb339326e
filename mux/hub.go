package mux

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/metrics"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/upstream"
)

// Config configures a Hub.
type Config struct {
	Name     string
	Upstream upstream.Config
	Session  session.Config // limits for each session; ID and Server are set by the hub

	StartTimeout      time.Duration // how long sessions wait for a starting server; 0 means 30s
	InitializeTimeout time.Duration // how long a started server may take to answer initialize (or server/discover) before it is killed; 0 means 5m
	// FirstStartTimeout is how long sessions wait instead of StartTimeout
	// for a server never described yet (nothing remembered of it, no start
	// finished): its first start may be a download. 0 means 5m.
	FirstStartTimeout time.Duration
	RestartBackoff    time.Duration // first delay before a restart; 0 means 250ms
	RestartBackoffMax time.Duration // cap of the delay; 0 means 30s
	RestartWindow     time.Duration // uptime that resets the backoff, and the window of MaxRestarts; 0 means 60s
	MaxRestarts       int           // crashes within RestartWindow before the server is failed; 0 means DefaultMaxRestarts, NoLimit none
	RequestTimeout    time.Duration // a request unanswered this long fails with "timeout" and is cancelled upstream; 0 means none
	PingInterval      time.Duration // liveness pings to the server; 0 means none
	PingFailures      int           // missed pings in a row that restart the server; 0 means 3
	Lazy              bool          // start the server at the first session rather than at once
	MaxSessions       int           // sessions at once; 0 means DefaultMaxSessions, NoLimit none
	Tools             ToolView      // the server's tool view, for every session: globs over its own tool names; the zero value hides none

	ServerRequests       string        // "auto" (default, also ""), "latest" or "serialize": how a server request picks among sessions
	MaxConcurrency       int           // requests in flight at the server at once; the rest wait, the sessions taking turns; 0 means no limit
	Memory               Memory        // what mcpmux learned of the server in earlier runs; nil: nothing
	ServerRequestTimeout time.Duration // how long a session has to answer the server; 0 means 60s
	Roots                []string      // roots mcpmux answers roots/list with; nil means none configured
	RootsFromSessions    bool          // answer roots/list with the union of the sessions' roots
	DefaultLogLevel      string        // the level of sessions that set none; "" means info
	IdleTimeout          time.Duration // stop the server after this long without sessions; 0 means never

	Version string // mcpmux's version, sent upstream in clientInfo
	Logger  *slog.Logger
	Metrics *metrics.Server // where the hub counts (metrics.go); nil: nowhere

	// IDs hands out session ids; sessions of all hubs share one counter so
	// that logs name each session once. Nil means a counter of the hub's own.
	IDs *atomic.Uint64

	// Taps, when set, are told of the messages of this hub's sessions
	// (tap.go); the daemon shares one among its hubs.
	Taps *Taps

	// events is where the hub keeps its log lines; nil means its own.
	events *eventLog

	// start replaces upstream.Start in tests.
	start func(upstream.Config, upstream.Handler) (process, error)
	// UpstreamCapabilities, when set, is the capabilities object mcpmux
	// declares to the server, passed through as written.
	UpstreamCapabilities json.RawMessage

	// ProjectMarkers name what makes a folder a project's root, for share =
	// "project"; nil means DefaultProjectMarkers.
	ProjectMarkers []string
	// MaxProjects bounds the live project processes (share = "project");
	// 0 means DefaultMaxProjects.
	MaxProjects int
	// ProjectRoots are the folders a project may be in (share =
	// "project"), absolute; nil means the user's home folder.
	ProjectRoots []string

	// Protocol is the era the server is opened in: ProtocolAuto (also
	// ""), ProtocolLegacy or ProtocolModern.
	Protocol string

	// hook, in tests, runs inside the critical section of a subscription.
	hook func()
}

// Memory keeps what mcpmux learns of a server across runs of the daemon,
// for servers started the same way. Under server_requests = "auto" the
// kinds of request seen causing the server's own requests take turns from
// its first start on.
type Memory interface {
	// Asks is the kinds of request (tools/call's tools, prompts/get's
	// prompts, other methods) seen causing sampling or elicitation
	// requests. all is true when the memory says only that the server
	// sends such requests, not which of its requests cause them (as an
	// older mcpmux kept it): then every interactive request takes turns
	// until a kind is learned.
	Asks() (kinds []string, all bool)
	// RememberAsks records that a kind of request does; an error is the
	// caller's to log.
	RememberAsks(kind string) error
	// Description is the result of the server's last initialize (era
	// "legacy") or server/discover ("modern"); nil when none is kept.
	// Sessions are answered from it at once while the server starts.
	Description() (era string, result []byte)
	// RememberDescription keeps a new one; an error is the caller's to log.
	RememberDescription(era string, result []byte) error
}

// The defaults of Config's zero values.
const (
	DefaultStartTimeout         = 30 * time.Second
	DefaultInitializeTimeout    = 5 * time.Minute
	DefaultFirstStartTimeout    = 5 * time.Minute
	DefaultRestartBackoff       = 250 * time.Millisecond
	DefaultRestartBackoffMax    = 30 * time.Second
	DefaultRestartWindow        = time.Minute
	DefaultServerRequestTimeout = time.Minute
	DefaultPingFailures         = 3
	DefaultSessionLogLevel      = "info"
	DefaultMaxRestarts          = 5
	DefaultMaxSessions          = 1024
)

// NoLimit, as Config.MaxRestarts or Config.MaxSessions, sets no limit at
// all (their zero value is the default).
const NoLimit = -1

// process is what the hub needs of a running server.
type process interface {
	Pid() int
	Send(frame []byte) error
	SendLater(frame []byte) error // held until the next Send or Flush
	// SendLaterWait is SendLater that waits, until stop is closed, while
	// the write queue is too full to take the frame, rather than refuse it.
	SendLaterWait(stop <-chan struct{}, frame []byte) error
	Flush()
	WaitWritable(ctx context.Context) error
	Done() <-chan struct{}
	Closed() bool // no more input: the process is ending, Done follows
	Exit() upstream.Exit
	Stop(ctx context.Context) error
	Kill(reason string)
	StderrTail() []string
}

// Hub routes between one server process and its sessions. It composes the
// parts listed in the package doc and is the only code that sequences them.
type Hub struct {
	cfg Config
	log *slog.Logger

	ended string // why its last process ended or did not start, a restart's cause for Metrics; Run's goroutine only

	flights  flights       // every request in flight upstream, and the gates: the one door of a request's life
	life     life          // the process: which, whether ready, what it said
	calls    calls         // mcpmux's own requests and their waiters
	sessions registry      // the sessions
	subs     subscriptions // resource subscriptions, counted per URI
	levels   logLevels     // the sessions' log levels and the server's
	tasks    taskTable     // which session created each task
	asks     serverReqs    // server-to-client requests sent to sessions
	down     downBridge    // modern sessions on a legacy server (bridge.go)
	up       upBridge      // legacy sessions on a modern server
	memo     *recollection // what Memory keeps: the description, the lists
	view     *liveView     // the tools every session may see (Config.Tools; SetTools)
}

// New returns a hub; Run starts its server.
func New(cfg Config) *Hub {
	cfg = withDefaults(cfg)
	if cfg.events == nil {
		cfg.events = newEventLog()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = slog.New(newTeeHandler(log.Handler(), cfg.events))
	cfg.Session.Server = cfg.Name
	cfg.Upstream.Name = cfg.Name
	cfg.Upstream.Logger = log
	h := &Hub{
		cfg:      cfg,
		view:     newLiveView(cfg.Tools),
		log:      log.With("server", cfg.Name),
		life:     newLife(cfg.Upstream, cfg.Lazy),
		calls:    newCalls(),
		sessions: newRegistry(cfg.IDs, cfg.MaxSessions),
		subs:     newSubscriptions(cfg.hook),
		levels:   newLogLevels(cfg.DefaultLogLevel),
		tasks:    newTaskTable(),
		asks:     newServerReqs(),
	}
	h.down = downBridge{h: h, states: newStateKey()}
	h.up = upBridge{h: h}
	h.flights.timeout, h.flights.expire = cfg.RequestTimeout, h.timeout
	var asks []string
	var all bool
	if cfg.Memory != nil {
		asks, all = cfg.Memory.Asks()
	}
	h.flights.configure(cfg.ServerRequests, asks, all, cfg.MaxConcurrency)
	h.memo = newRecollection(cfg.Memory, h.log)
	h.memo.recall(cfg.Protocol, &h.life)
	return h
}

// withDefaults fills the zero values of cfg with the documented defaults;
// they are written here and nowhere else.
func withDefaults(cfg Config) Config {
	set := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	set(&cfg.StartTimeout, DefaultStartTimeout)
	set(&cfg.InitializeTimeout, DefaultInitializeTimeout)
	set(&cfg.FirstStartTimeout, DefaultFirstStartTimeout)
	set(&cfg.RestartBackoff, DefaultRestartBackoff)
	set(&cfg.RestartBackoffMax, DefaultRestartBackoffMax)
	set(&cfg.RestartWindow, DefaultRestartWindow)
	set(&cfg.ServerRequestTimeout, DefaultServerRequestTimeout)
	if cfg.PingFailures <= 0 {
		cfg.PingFailures = DefaultPingFailures
	}
	if cfg.MaxRestarts == 0 {
		cfg.MaxRestarts = DefaultMaxRestarts
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.start == nil {
		cfg.start = func(c upstream.Config, h upstream.Handler) (process, error) { return upstream.Start(c, h) }
	}
	return cfg
}

// Name is the server's configured name.
func (h *Hub) Name() string { return h.cfg.Name }

// MaxMessageBytes is the size limit of one message, both directions.
func (h *Hub) MaxMessageBytes() int { return h.cfg.Upstream.MaxMessageBytes }

// Logs returns the recent log lines about this server, oldest first.
func (h *Hub) Logs() []string { return h.cfg.events.recent() }

// FollowLogs calls fn with each new log line about this server until ctx is
// done or fn fails.
func (h *Hub) FollowLogs(ctx context.Context, fn func(string) error) error {
	return h.cfg.events.follow(ctx, fn)
}

// fail answers a request that will get no answer from the server.
func (h *Hub) fail(r idmap.Route, e *jsonrpc.Error) {
	c := h.sessions.get(r.Session)
	if c == nil {
		h.settle(dataOf(r))
		return
	}
	frame := e.WithServer(h.cfg.Name).Response(r.ID)
	if taps := h.cfg.Taps.active(); taps != nil {
		h.cfg.Taps.tellAnswer(taps, h.cfg.Name, c, "down", r, nil, true, frame)
	}
	c.deliver(r, frame, nil)
}

// broadcast sends a frame to every ready session.
func (h *Hub) broadcast(frame []byte) {
	for _, c := range h.sessions.ready() {
		c.send(frame)
	}
}

func (h *Hub) closeAll(reason error) {
	for _, c := range h.sessions.all() {
		c.sess.Close(reason)
	}
}

// Status is a snapshot of a hub for `mcpmux status`.
type Status struct {
	Name     string   `json:"name"`
	State    State    `json:"state"`
	Pid      int      `json:"pid,omitempty"`
	Uptime   string   `json:"uptime,omitempty"`
	Protocol string   `json:"protocol,omitempty"` // the revision the server speaks
	Era      string   `json:"era,omitempty"`      // legacy or modern
	Restarts int      `json:"restarts"`
	Sessions int      `json:"sessions"`
	Inflight int      `json:"inflight"`
	Queued   int      `json:"queued_bytes,omitempty"` // waiting in the server's write queue (its stdin)
	LastExit string   `json:"last_exit,omitempty"`
	Stderr   []string `json:"stderr,omitempty"` // the server's last stderr lines
	// StartingFor is how long the server has been starting, while it is.
	StartingFor string `json:"starting_for,omitempty"`
	// Shortage is why the server does not run, while its starts fail for
	// want of the machine's resources (EMFILE, ENFILE, ENOMEM, EAGAIN): no
	// crash, it is started again with backoff and never failed for it.
	Shortage string `json:"shortage,omitempty"`
	// Asks is the kinds of request seen causing the server's own requests
	// ("tools/call NAME", "prompts/get NAME", a method), which take turns
	// under server_requests = "auto".
	Asks []string `json:"asks,omitempty"`
	// Serialized: every interactive request of every session takes turns
	// (server_requests = "serialize", or "auto" on the word of an older
	// mcpmux, until it learns which requests ask).
	Serialized bool `json:"serialized,omitempty"`
	// Dormant counts the server's Streamable HTTP sessions that went
	// dormant (http_session_dormant) and have not come back; the daemon
	// sets it.
	Dormant int `json:"dormant_http_sessions,omitempty"`

	SessionList []SessionStatus  `json:"session_list"`
	Instances   []InstanceStatus `json:"instances,omitempty"` // share = "project": one per project
}

// InstanceStatus describes one project's process (share = "project").
type InstanceStatus struct {
	Project  string `json:"project"`
	State    State  `json:"state"`
	Pid      int    `json:"pid,omitempty"`
	Sessions int    `json:"sessions"`
	LastExit string `json:"last_exit,omitempty"`
}

// SessionStatus describes one session.
type SessionStatus struct {
	ID        uint64 `json:"id"`
	Transport string `json:"transport"`
	Peer      string `json:"peer,omitempty"`
	Client    string `json:"client,omitempty"` // clientInfo.name from its initialize
	Protocol  string `json:"protocol,omitempty"`
	Era       string `json:"era,omitempty"` // legacy or modern, once the session said
	Age       string `json:"age"`
	Inflight  int    `json:"inflight"`
	BytesIn   int64  `json:"bytes_in"`
	BytesOut  int64  `json:"bytes_out"`
	Queued    int    `json:"queued_bytes,omitempty"` // answers waiting in its outbox
}

// Status reports the hub's state.
func (h *Hub) Status() Status {
	s := Status{Name: h.cfg.Name, Inflight: h.flights.len()}
	s.Asks, s.Serialized = h.flights.asking()
	h.life.status(&s)
	if q, ok := h.life.current().(interface{ Queued() int }); ok {
		s.Queued = q.Queued()
	}
	cs := h.sessions.all()
	s.Sessions = len(cs)
	s.SessionList = make([]SessionStatus, 0, len(cs))
	for _, c := range cs {
		s.SessionList = append(s.SessionList, c.status())
	}
	slices.SortFunc(s.SessionList, func(a, b SessionStatus) int { return cmp.Compare(a.ID, b.ID) })
	return s
}

// describedServer is the cached description of the server; nil before the
// first process was opened.
func (h *Hub) describedServer() *serverInfo { return h.life.described() }
