package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/endpoint"
	"github.com/mcpmux/mcpmux/metrics"
	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/socket"
	"github.com/mcpmux/mcpmux/upstream"
)

// ErrNotRunning is Reload's answer when Run is not serving.
var ErrNotRunning = errors.New("daemon: not running")

// InUseError is a socket that another live daemon serves.
type InUseError struct {
	Path string // the socket folder, for the control socket; else the server's socket
}

func (e *InUseError) Error() string { return "another mcpmux is already serving " + e.Path }

// Unwrap lets errors.Is(err, socket.ErrInUse) hold.
func (e *InUseError) Unwrap() error { return socket.ErrInUse }

// WebError is the web listener failing to open.
type WebError struct {
	Addr string // WebConfig.Addr
	Err  error  // socket.ListenWeb's error
}

func (e *WebError) Error() string { return fmt.Sprintf("web listener %s: %v", e.Addr, e.Err) }

func (e *WebError) Unwrap() error { return e.Err }

// Daemon serves a Config; Run serves it, once.
type Daemon struct {
	cfg     Config
	log     *slog.Logger
	connLog *slog.Logger               // rate limited: what connections can provoke at will
	ids     atomic.Uint64              // session ids, shared by every server
	taps    mux.Taps                   // the taps of GET /tap, shared by every server
	web     atomic.Pointer[socket.Web] // the web listener, once open; for Status
	budget  *outbox.Budget             // MaxQueuedBytes, shared by every session; nil when unbounded
	started time.Time
	ran     atomic.Bool
	// recorded: Run wrote the daemon's record, and removes it when it returns.
	recorded bool

	reloads chan reloadCall // served by Run's goroutine
	done    chan struct{}   // closed when Run stops taking reloads

	wg sync.WaitGroup // every server's goroutines

	metrics *metrics.Registry // GET /metrics (metrics.go)

	mu        sync.Mutex
	servers   map[string]*served
	endpoints []*servedEndpoint           // fixed for the daemon's life
	inherited map[string]*socket.Listener // passed sockets not taken yet, by path; Run's goroutine only
}

// served is one server while the daemon serves it.
type served struct {
	given Server // as configured, for the reload diff
	srv   mux.Server
	l     *socket.Listener

	stopIntake context.CancelFunc // ends its socket and sessions
	stopHub    context.CancelFunc // ends its router and process
	intakeDone chan struct{}
	hubDone    chan struct{}
}

// servedEndpoint is one endpoint while the daemon serves it.
type servedEndpoint struct {
	given      Endpoint // as configured, for the reload diff
	ep         *endpoint.Endpoint
	l          *socket.Listener
	stopIntake context.CancelFunc // ends its socket and sessions
	intakeDone chan struct{}
}

// reloadCall is a Reload waiting for Run's goroutine.
type reloadCall struct {
	reply chan reloadReply // 1-buffered
}

type reloadReply struct {
	res ReloadResult
	err error
}

// New checks cfg and returns a daemon for it; Run serves it.
func New(cfg Config) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Daemon{
		cfg:       cfg,
		log:       log,
		connLog:   socket.YamuxLogger(log),
		reloads:   make(chan reloadCall),
		done:      make(chan struct{}),
		servers:   map[string]*served{},
		inherited: cfg.Inherited,
	}
	if cfg.MaxQueuedBytes > 0 {
		d.budget = outbox.NewBudget(cfg.MaxQueuedBytes)
	}
	d.watch()
	return d, nil
}

// Budget is the daemon-wide bound on queued bytes (Config.MaxQueuedBytes)
// that every session's outbox counts against; nil when there is none.
// Other buffers that hold answers for clients may join it.
func (d *Daemon) Budget() *outbox.Budget { return d.budget }

// Run opens the listeners in order (the control socket first, then every
// server's socket, then the web listener), serves until ctx is done or
// the daemon has been idle for IdleExit, then stops intake and sessions
// before the servers. It returns only after every goroutine it started
// has: nil after a shutdown, else why it could not start.
func (d *Daemon) Run(ctx context.Context) error {
	if d.ran.Swap(true) {
		return errors.New("daemon: Run called twice")
	}
	defer close(d.done)
	defer d.unrecord()
	ctx, stop := context.WithCancel(ctx) // idle exit stops it too
	defer stop()
	ls, err := d.open()
	if err == nil && ls.web != nil {
		d.web.Store(ls.web)
	}
	if err != nil {
		return err
	}
	d.started = time.Now()
	for _, s := range ls.servers {
		d.start(ctx, s)
	}
	for _, e := range ls.endpoints {
		d.startEndpoint(ctx, e)
	}
	d.closeUnused()
	d.log.Info("mcpmux serving", "version", d.cfg.Version, "socket_dir", d.cfg.SocketDir, "servers", len(ls.servers))

	var intake sync.WaitGroup // the control endpoint and the web listener
	intake.Go(func() {
		if err := serveControl(ctx, ls.control, d.controlHandler(), d.log); err != nil {
			d.log.Error("control socket failed", "error", err)
		}
	})
	if ls.web != nil {
		intake.Go(func() {
			if err := ls.web.Serve(ctx); err != nil {
				d.log.Error("web listener failed", "error", err)
			}
		})
	}
	var idle sync.WaitGroup
	if d.cfg.IdleExit > 0 {
		idle.Go(func() { exitWhenIdle(ctx, d.list, d.cfg.IdleExit, stop, d.log) })
	}
	d.takeReloads(ctx)

	d.log.Info("mcpmux shutting down")
	idle.Wait()
	intake.Wait()
	d.stopAll()
	d.wg.Wait()
	d.log.Info("mcpmux stopped")
	return nil
}

// listeners are what Run opens before it serves anything.
type listeners struct {
	control   *socket.Listener
	servers   []*served
	endpoints []*servedEndpoint
	web       *socket.Web
}

// open takes the control socket, then every server's socket, then the web
// listener; on a failure it closes what it opened.
func (d *Daemon) open() (ls listeners, err error) {
	dir := d.cfg.SocketDir
	if err := socket.PrepareDir(dir); err != nil {
		return ls, err
	}
	ls.control, err = d.listenUnix(filepath.Join(dir, ControlSocket), dir)
	if err != nil {
		return ls, err
	}
	d.record() // before any server's socket answers
	if d.cfg.Ready != nil {
		d.cfg.Ready()
	}
	defer func() {
		if err != nil {
			ls.control.Close()
			for _, s := range ls.servers {
				s.l.Close()
			}
			for _, e := range ls.endpoints {
				e.l.Close()
			}
		}
	}()
	for _, s := range d.cfg.Servers {
		sv, err := d.listen(s)
		if err != nil {
			return ls, err
		}
		ls.servers = append(ls.servers, sv)
	}
	for _, e := range d.cfg.Endpoints {
		se, err := d.listenEndpoint(e, d.cfg.Servers)
		if err != nil {
			return ls, err
		}
		ls.endpoints = append(ls.endpoints, se)
	}
	if d.cfg.Web != nil {
		wc := *d.cfg.Web
		wc.Lookup = d.endpoint
		if wc.Metrics {
			wc.MetricsHandler = d.metrics.Handler()
		}
		if wc.Logger == nil {
			wc.Logger = d.log
		}
		if ls.web, err = socket.ListenWeb(wc); err != nil {
			return ls, &WebError{Addr: wc.Addr, Err: err}
		}
		d.log.Info("web listener", "url", fmt.Sprintf("ws://%s%sNAME", ls.web.Addr(), socket.ServersPath))
	}
	return ls, nil
}

// closeUnused closes the passed sockets that no server took.
func (d *Daemon) closeUnused() {
	for path, l := range d.inherited {
		d.log.Warn("the service manager passed a socket no server uses; closing it", "socket", path)
		l.Close()
	}
	d.inherited = nil
}

// listen opens a server's socket and makes its router; start runs them.
func (d *Daemon) listen(s Server) (*served, error) {
	path := filepath.Join(d.cfg.SocketDir, s.Name()+".sock")
	l, err := d.listenUnix(path, path)
	if err != nil {
		return nil, err
	}
	cfg := s.Hub
	if cfg.Logger == nil {
		cfg.Logger = d.log
	}
	if cfg.Version == "" {
		cfg.Version = d.cfg.Version
	}
	cfg.Metrics = d.metrics.Server(s.Name())
	if cfg.Memory == nil {
		cfg.Memory = serverMemory(d.cfg.StateDir, cfg, d.log)
	}
	cfg.IDs = &d.ids
	cfg.Taps = &d.taps
	if cfg.Session.Budget == nil {
		cfg.Session.Budget = d.budget
	}
	if cfg.Upstream.MaxMessageBytes == 0 { // the sessions' readers take their limit from the hub
		cfg.Upstream.MaxMessageBytes = upstream.DefaultMaxMessageBytes
	}
	return &served{given: s, srv: mux.NewServer(cfg, s.Share), l: l}, nil
}

// listenEndpoint opens an endpoint's socket and makes the endpoint, whose
// members are among servers.
func (d *Daemon) listenEndpoint(e Endpoint, servers []Server) (*servedEndpoint, error) {
	path := filepath.Join(d.cfg.SocketDir, e.Name()+".sock")
	l, err := d.listenUnix(path, path)
	if err != nil {
		return nil, err
	}
	sc := e.Session
	if sc.Budget == nil {
		sc.Budget = d.budget
	}
	ep := endpoint.New(endpointConfig(e, servers), endpoint.Options{Lookup: d.member, Session: sc, IDs: &d.ids, Version: d.cfg.Version, Logger: d.log})
	return &servedEndpoint{given: e, ep: ep, l: l}, nil
}

// endpointConfig is e's configuration, reading its clients' messages with
// the largest limit of its members (among servers).
func endpointConfig(e Endpoint, servers []Server) endpoint.Config {
	cfg := e.Endpoint
	if cfg.MaxMessageBytes == 0 {
		for _, s := range servers {
			if slices.Contains(cfg.Servers, s.Name()) {
				cfg.MaxMessageBytes = max(cfg.MaxMessageBytes, cmp.Or(s.Hub.Upstream.MaxMessageBytes, upstream.DefaultMaxMessageBytes))
			}
		}
	}
	return cfg
}

// member finds an endpoint's member server.
func (d *Daemon) member(name string) (endpoint.Member, bool) {
	srv, ok := d.server(name)
	return srv, ok
}

// startEndpoint runs an endpoint's socket and sessions until ctx is done
// or its stopIntake.
func (d *Daemon) startEndpoint(ctx context.Context, e *servedEndpoint) {
	e.stopIntake, e.intakeDone = d.serveIntake(ctx, e.l, e.ep, "endpoint", e.ep.Name())
	d.mu.Lock()
	defer d.mu.Unlock()
	d.endpoints = append(d.endpoints, e)
}

// serveIntake accepts sessions of h on l, until ctx is done or stop, on a
// goroutine of the daemon's wait group; done is closed when it has ended.
// what and name name h in the log ("server", "memory").
func (d *Daemon) serveIntake(ctx context.Context, l *socket.Listener, h servable, what, name string) (stop context.CancelFunc, done chan struct{}) {
	intakeCtx, stop := context.WithCancel(ctx)
	done = make(chan struct{})
	o := &unixOpts{maxStreams: d.cfg.MaxStreamsPerConn, log: d.log, connLog: d.connLog,
		firstByte: d.cfg.FirstByteTimeout, line: d.cfg.LineTimeout}
	d.wg.Go(func() {
		defer close(done)
		err := socket.Serve(intakeCtx, l, func(ctx context.Context, c net.Conn) { serveUnix(ctx, h, c, o) })
		if err != nil {
			d.log.Error("listener failed", what, name, "error", err)
		}
	})
	return stop, done
}

// listenUnix takes the socket a service manager passed for path, if it
// passed one, else listens on path. inUse names the path in the error
// when another daemon serves it.
func (d *Daemon) listenUnix(path, inUse string) (*socket.Listener, error) {
	if l, ok := d.inherited[path]; ok {
		delete(d.inherited, path)
		d.log.Info("using the socket the service manager passed", "socket", path)
		l.Logger = d.log
		return l, nil
	}
	l, err := socket.ListenUnix(path)
	if errors.Is(err, socket.ErrInUse) {
		return nil, &InUseError{Path: inUse}
	} else if err != nil {
		return nil, err
	}
	l.Logger = d.log
	return l, nil
}

// start runs a listened server: its router until stopHub, its socket and
// sessions until ctx is done or stopIntake.
func (d *Daemon) start(ctx context.Context, s *served) {
	hubCtx, stopHub := context.WithCancel(context.WithoutCancel(ctx)) // stopped after the sessions
	s.stopHub, s.hubDone = stopHub, make(chan struct{})
	d.wg.Go(func() {
		defer close(s.hubDone)
		s.srv.Run(hubCtx)
	})
	s.stopIntake, s.intakeDone = d.serveIntake(ctx, s.l, s.srv, "server", s.srv.Name())
	d.mu.Lock()
	defer d.mu.Unlock()
	d.servers[s.given.Name()] = s
}

// stop ends a server: its socket and sessions first, then its router,
// which stops its process.
func (s *served) stop() {
	s.stopIntake()
	<-s.intakeDone
	s.stopHub()
	<-s.hubDone
}

// stopAll ends every server at shutdown: all sessions first, then all
// processes at once, so that their stop escalations overlap.
func (d *Daemon) stopAll() {
	for _, e := range d.takeEndpoints(nil) { // their sessions are sessions of the servers too
		e.stop()
	}
	all := d.take(nil)
	for _, s := range all {
		s.stopIntake()
	}
	for _, s := range all {
		<-s.intakeDone
	}
	for _, s := range all {
		s.stopHub()
	}
	for _, s := range all {
		<-s.hubDone
	}
}

// take removes the named servers from the served set (all of them when
// names is nil) and returns them.
func (d *Daemon) take(names []string) []*served {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*served
	for name, s := range d.servers {
		if names == nil || slices.Contains(names, name) {
			out = append(out, s)
			delete(d.servers, name)
		}
	}
	return out
}

// takeEndpoints removes the endpoints that keep reports false for (all
// of them when keep is nil) from the served set and returns them.
func (d *Daemon) takeEndpoints(keep func(*servedEndpoint) bool) []*servedEndpoint {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out, kept []*servedEndpoint
	for _, e := range d.endpoints {
		if keep != nil && keep(e) {
			kept = append(kept, e)
		} else {
			out = append(out, e)
		}
	}
	d.endpoints = kept
	return out
}

// stop ends an endpoint's socket and sessions.
func (e *servedEndpoint) stop() {
	e.stopIntake()
	<-e.intakeDone
}

// Endpoints are the endpoints served now, by name.
func (d *Daemon) Endpoints() []*endpoint.Endpoint {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*endpoint.Endpoint, len(d.endpoints))
	for i, e := range d.endpoints {
		out[i] = e.ep
	}
	slices.SortFunc(out, func(a, b *endpoint.Endpoint) int { return strings.Compare(a.Name(), b.Name()) })
	return out
}

// list returns the servers served now, by name.
func (d *Daemon) list() []mux.Server {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]mux.Server, 0, len(d.servers))
	for _, s := range d.servers {
		out = append(out, s.srv)
	}
	slices.SortFunc(out, func(a, b mux.Server) int { return strings.Compare(a.Name(), b.Name()) })
	return out
}

// server finds a served server by name.
func (d *Daemon) server(name string) (mux.Server, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.servers[name]
	if !ok {
		return nil, false
	}
	return s.srv, true
}

// endpoint finds a server, or an endpoint, for the web listener.
func (d *Daemon) endpoint(name string) (socket.Endpoint, bool) {
	if srv, ok := d.server(name); ok {
		return srv, true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.endpoints {
		if e.ep.Name() == name {
			return e.ep, true
		}
	}
	return nil, false
}
