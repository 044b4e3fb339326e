package mux

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/upstream"
)

// Projects serves share = "project": one process per project, shared by
// every session of that project. Many servers answer for the folder they
// run in (a code search, a linter, git): an editor starts them in its
// project, and one shared process running in the daemon's folder would
// answer for the wrong one. A session's project is the nearest folder at
// or above its client's folder that holds one of the markers (.git unless
// configured), else that folder itself; the process runs there, with
// {project} in its arguments and environment replaced by it. A process
// starts with the first session of its project and stops IdleTimeout
// (default projectIdle) after its last.
type Projects struct {
	cfg     Config
	markers []string
	events  *eventLog // shared by the instances
	log     *slog.Logger

	started chan struct{} // closed by Run once ctx is set
	ctx     context.Context

	mu        sync.Mutex
	instances map[string]*instance // by project root
	wg        sync.WaitGroup       // the instances' Run
}

// instance is one project's hub and how many sessions use it.
type instance struct {
	root     string
	hub      *Hub
	cancel   context.CancelFunc
	done     chan struct{} // closed when its Run has returned
	sessions int
	idle     *time.Timer // running while sessions == 0
}

// projectIdle is how long a project's process outlives its last session
// when IdleTimeout is zero.
const projectIdle = 10 * time.Minute

// DefaultProjectMarkers name what makes a folder a project's root.
var DefaultProjectMarkers = []string{".git"}

// NewProjects returns a pool of project instances; Run must be running for
// Serve to start one.
func NewProjects(cfg Config) *Projects {
	p := &Projects{cfg: cfg, markers: cfg.ProjectMarkers, events: newEventLog(), started: make(chan struct{}), instances: make(map[string]*instance)}
	base := cfg.Logger
	if base == nil {
		base = slog.New(slog.DiscardHandler)
	}
	p.log = slog.New(newTeeHandler(base.Handler(), p.events)).With("server", cfg.Name)
	if len(p.markers) == 0 {
		p.markers = DefaultProjectMarkers
	}
	if p.cfg.IdleTimeout <= 0 {
		p.cfg.IdleTimeout = projectIdle
	}
	p.cfg.events = p.events
	return p
}

// Name is the server's configured name.
func (p *Projects) Name() string { return p.cfg.Name }

// MaxMessageBytes is the size limit of one message, both directions.
func (p *Projects) MaxMessageBytes() int { return p.cfg.Upstream.MaxMessageBytes }

// Full is never true: max_sessions counts per project (each instance's hub
// refuses past it).
func (p *Projects) Full() bool { return false }

// Run keeps the instances until ctx is done, then stops them all and
// returns once every process is stopped.
func (p *Projects) Run(ctx context.Context) error {
	p.ctx = ctx
	close(p.started)
	<-ctx.Done()
	p.stopAll()
	p.wg.Wait()
	return nil
}

// stopAll stops every instance and their idle timers; acquire starts no
// more once ctx is done, so nothing is added to wg after this.
func (p *Projects) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for root, in := range p.instances {
		if in.idle != nil {
			in.idle.Stop()
		}
		in.cancel()
		delete(p.instances, root)
	}
}

// ProjectRoot is the project of a client working in dir: the nearest
// folder at or above it that holds one of markers, else dir itself.
func ProjectRoot(dir string, markers []string) string {
	for d := dir; ; {
		for _, m := range markers {
			if _, err := os.Lstat(filepath.Join(d, m)); err == nil {
				return d
			}
		}
		up := filepath.Dir(d)
		if up == d {
			return dir
		}
		d = up
	}
}

// errNoFolder: the session's client folder is not known, so its project
// cannot be told.
var errNoFolder = errors.New("mux: the client's folder is not known")

// Serve serves a session on its project's instance, starting it if needed.
func (p *Projects) Serve(ctx context.Context, t session.Transport, peer session.Peer) error {
	select {
	case <-p.started:
	case <-ctx.Done():
		t.Close()
		return context.Cause(ctx)
	}
	dir := peer.Dir
	if dir == "" {
		// A client on the web listener, or where the system does not say
		// a peer's folder: its roots may tell (see lobby.go).
		var l *lobby
		dir, l = p.clientDir(ctx, t)
		t = l
		if dir != "" {
			p.log.Debug("a project session told its folder by its roots", "dir", dir)
		}
	}
	if dir == "" {
		// Else it shares the instance of the daemon's folder.
		dir = p.cfg.Upstream.Dir
		if dir == "" {
			dir, _ = os.Getwd()
		}
		p.log.Debug("no client folder for a project session; using the daemon's", "error", errNoFolder, "dir", dir)
	}
	root := ProjectRoot(dir, p.markers)
	in, started := p.acquire(root)
	if in == nil {
		t.Close()
		return context.Cause(p.ctx) // the daemon is stopping
	}
	if started {
		p.log.Info("started the project's instance", "project", root)
	}
	defer p.release(in)
	return in.hub.Serve(ctx, t, peer)
}

// acquire counts a session in on root's instance, starting it if needed;
// nil once Run is ending.
func (p *Projects) acquire(root string) (in *instance, started bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return nil, false
	}
	in = p.instances[root]
	if in == nil {
		in, started = p.startLocked(root), true
	}
	in.sessions++
	if in.idle != nil {
		in.idle.Stop()
		in.idle = nil
	}
	return in, started
}

// startLocked makes and runs root's instance.
func (p *Projects) startLocked(root string) *instance {
	cfg := p.cfg
	cfg.Upstream = projectUpstream(cfg.Upstream, root)
	cfg.Lazy, cfg.IdleTimeout = false, 0
	ctx, cancel := context.WithCancel(p.ctx)
	in := &instance{root: root, hub: New(cfg), cancel: cancel, done: make(chan struct{})}
	p.instances[root] = in
	p.wg.Go(func() {
		defer close(in.done)
		in.hub.Run(ctx)
	})
	return in
}

// release counts a session out; the last one arms the instance's idle stop.
func (p *Projects) release(in *instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	in.sessions--
	if in.sessions > 0 {
		return
	}
	in.idle = time.AfterFunc(p.cfg.IdleTimeout, func() { p.stopIfIdle(in) })
}

// stopIfIdle stops an instance that still has no session.
func (p *Projects) stopIfIdle(in *instance) {
	if !p.forget(in) {
		return
	}
	p.log.Info("stopping the project's instance: no sessions", "project", in.root, "idle_timeout", p.cfg.IdleTimeout)
	in.cancel()
}

func (p *Projects) forget(in *instance) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if in.sessions > 0 || p.instances[in.root] != in {
		return false
	}
	delete(p.instances, in.root)
	return true
}

// projectUpstream is how root's process starts: in root, with {project}
// replaced by it in the arguments and the environment.
func projectUpstream(up upstream.Config, root string) upstream.Config {
	up.Dir = root
	args := make([]string, len(up.Args))
	for i, a := range up.Args {
		args[i] = strings.ReplaceAll(a, "{project}", root)
	}
	up.Args = args
	if up.Env != nil {
		env := make(map[string]string, len(up.Env))
		for k, v := range up.Env {
			env[k] = strings.ReplaceAll(v, "{project}", root)
		}
		up.Env = env
	}
	return up
}

func (p *Projects) all() []*instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*instance, 0, len(p.instances))
	for _, in := range p.instances {
		out = append(out, in)
	}
	return out
}

// Status sums up the instances, each named by its project.
func (p *Projects) Status() Status {
	st := Status{Name: p.cfg.Name, State: "project", SessionList: []SessionStatus{}, Instances: []InstanceStatus{}}
	for _, in := range p.all() {
		hs := in.hub.Status()
		st.Sessions += hs.Sessions
		st.Inflight += hs.Inflight
		st.Restarts += hs.Restarts
		st.SessionList = append(st.SessionList, hs.SessionList...)
		st.Instances = append(st.Instances, InstanceStatus{Project: in.root, State: hs.State, Pid: hs.Pid, Sessions: hs.Sessions, LastExit: hs.LastExit})
	}
	slices.SortFunc(st.SessionList, func(a, b SessionStatus) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(st.Instances, func(a, b InstanceStatus) int { return cmp.Compare(a.Project, b.Project) })
	return st
}

// Restart restarts every instance's process; the sessions stay.
func (p *Projects) Restart() {
	for _, in := range p.all() {
		in.hub.Restart()
	}
}

// Logs returns the recent log lines of all the instances.
func (p *Projects) Logs() []string { return p.events.recent() }

// FollowLogs calls fn with each new log line until ctx is done or fn fails.
func (p *Projects) FollowLogs(ctx context.Context, fn func(string) error) error {
	return p.events.follow(ctx, fn)
}

// Reconfigure changes how processes start: new instances' at once, the
// running ones' by a restart.
func (p *Projects) Reconfigure(up upstream.Config) {
	p.setUpstream(up)
	for _, in := range p.all() {
		in.hub.Reconfigure(projectUpstream(up, in.root))
	}
}

func (p *Projects) setUpstream(up upstream.Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	up.Name, up.Logger, up.MaxMessageBytes = p.cfg.Upstream.Name, p.cfg.Upstream.Logger, p.cfg.Upstream.MaxMessageBytes
	p.cfg.Upstream = up
}
