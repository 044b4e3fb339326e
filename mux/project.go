package mux

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
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
//
// A project must be in one of ProjectRoots (the user's home folder unless
// configured), its folder's symlinks resolved so that one folder is one
// project; a client elsewhere is served in the daemon's folder. At most
// MaxProjects processes live: past it, a new project ends the one idle for
// longest, or is refused when every one has sessions.
type Projects struct {
	cfg     Config
	markers []string
	roots   []string  // where a project may be; nil: nowhere but the daemon's folder
	events  *eventLog // shared by the instances
	log     *slog.Logger

	started chan struct{} // closed by Run once ctx is set
	ctx     context.Context

	mu        sync.Mutex
	instances map[string]*instance // by project root
	wg        sync.WaitGroup       // the instances' Run
}

// instance is one hub of a pool, found by a key (a project's root, a
// client), and how many sessions use it.
type instance struct {
	key      string
	hub      *Hub
	cancel   context.CancelFunc
	done     chan struct{} // closed when its Run has returned
	sessions int
	idle     *time.Timer // running while sessions == 0
	since    time.Time   // when sessions last became 0
}

// projectIdle is how long a project's process outlives its last session
// when IdleTimeout is zero.
const projectIdle = 10 * time.Minute

// DefaultMaxProjects bounds the live project processes when MaxProjects
// is zero.
const DefaultMaxProjects = 16

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
	if p.cfg.MaxProjects <= 0 {
		p.cfg.MaxProjects = DefaultMaxProjects
	}
	p.roots = projectRoots(cfg.ProjectRoots, p.log)
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
	for _, in := range p.instances {
		p.stopLocked(in)
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
	dir, t := p.folderOf(ctx, t, peer)
	root := p.projectOf(dir)
	in, err := p.admit(ctx, root)
	switch {
	case errors.Is(err, ErrTooManyProjects):
		p.refuse(t, peer, root)
		return err
	case err != nil:
		t.Close()
		return err // the daemon is stopping
	}
	defer p.release(in)
	return in.hub.Serve(ctx, t, peer)
}

// folderKeeper is a transport that keeps the folder its session's roots
// told, so that the session is served in the same project when a later
// daemon makes it again (an HTTP session's record).
type folderKeeper interface{ KeepFolder(dir string) }

// folderOf is the folder a session's client works in, "" when it cannot
// be told, and the transport to serve the session on.
func (p *Projects) folderOf(ctx context.Context, t session.Transport, peer session.Peer) (string, session.Transport) {
	if peer.Dir != "" {
		return peer.Dir, t
	}
	// A client on the web listener, or where the system does not say a
	// peer's folder: its roots may tell (see lobby.go).
	dir, l := p.clientDir(ctx, t)
	if dir != "" {
		p.log.Debug("a project session told its folder by its roots", "dir", dir)
		if k, ok := t.(folderKeeper); ok {
			k.KeepFolder(dir)
		}
	}
	return dir, l
}

// projectOf is the project of a client working in dir: the project root
// of dir with its symlinks resolved, when that is within the project
// roots; else the project of the daemon's folder.
func (p *Projects) projectOf(dir string) string {
	if dir == "" {
		p.log.Debug("no client folder for a project session; using the daemon's", "error", errNoFolder)
	} else if real, err := filepath.EvalSymlinks(dir); err != nil {
		p.log.Warn("cannot resolve a project session's folder; serving it in the daemon's folder", "dir", dir, "error", err)
	} else if !within(real, p.roots) {
		p.log.Warn("a project session's folder is outside project_roots; serving it in the daemon's folder", "dir", real, "project_roots", strings.Join(p.roots, ", "))
	} else {
		if root := ProjectRoot(real, p.markers); within(root, p.roots) {
			return root
		}
		return real
	}
	d := p.cfg.Upstream.Dir
	if d == "" {
		d, _ = os.Getwd()
	}
	if real, err := filepath.EvalSymlinks(d); err == nil {
		d = real
	}
	return ProjectRoot(d, p.markers)
}

// projectRoots are the folders a project may be in, their symlinks
// resolved: configured, else the user's home folder.
func projectRoots(configured []string, log *slog.Logger) []string {
	if configured == nil {
		home, err := os.UserHomeDir()
		if err != nil {
			log.Warn("no home folder, so no project roots: every project session is served in the daemon's folder", "error", err)
			return nil
		}
		configured = []string{home}
	}
	roots := make([]string, 0, len(configured))
	for _, r := range configured {
		if real, err := filepath.EvalSymlinks(r); err == nil {
			r = real
		}
		roots = append(roots, filepath.Clean(r))
	}
	return roots
}

// within reports whether path is one of roots or in one of them.
func within(path string, roots []string) bool {
	for _, r := range roots {
		if path == r || strings.HasPrefix(path, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}

// ErrTooManyProjects: the server has MaxProjects project processes, each
// with sessions.
var ErrTooManyProjects = errors.New("mux: too many projects")

// admit counts a session in on root's instance, starting it if needed. At
// MaxProjects it first stops the instance idle for longest and waits for
// its process to end.
func (p *Projects) admit(ctx context.Context, root string) (*instance, error) {
	for {
		in, started, victim, err := p.acquire(root)
		if victim == nil {
			if started {
				p.log.Info("started the project's instance", "project", root)
			}
			return in, err
		}
		p.log.Info("stopping the idlest project's instance to make room (max_projects)", "project", victim.key,
			"idle", time.Since(victim.since).Round(time.Second), "max_projects", p.cfg.MaxProjects, "for", root)
		select {
		case <-victim.done:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// acquire counts a session in on root's instance, starting it if needed;
// at MaxProjects it stops and returns the idlest instance instead (the
// caller waits for it, then asks again), or fails with ErrTooManyProjects.
func (p *Projects) acquire(root string) (in *instance, started bool, victim *instance, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return nil, false, nil, context.Cause(p.ctx)
	}
	in = p.instances[root]
	if in == nil {
		if len(p.instances) >= p.cfg.MaxProjects {
			if victim = p.idlestLocked(); victim == nil {
				return nil, false, nil, ErrTooManyProjects
			}
			p.stopLocked(victim)
			return nil, false, victim, nil
		}
		in, started = p.startLocked(root), true
	}
	in.sessions++
	if in.idle != nil {
		in.idle.Stop()
		in.idle = nil
	}
	return in, started, nil, nil
}

// idlestLocked is the instance without sessions for longest; nil when
// each has sessions.
func (p *Projects) idlestLocked() *instance {
	var best *instance
	for _, in := range p.instances {
		if in.sessions == 0 && (best == nil || in.since.Before(best.since)) {
			best = in
		}
	}
	return best
}

// stopLocked stops an instance and forgets it.
func (p *Projects) stopLocked(in *instance) {
	if in.idle != nil {
		in.idle.Stop()
	}
	in.cancel()
	delete(p.instances, in.key)
}

// refuse tells a client whose project would pass max_projects why, and
// closes it.
func (p *Projects) refuse(t session.Transport, peer session.Peer, root string) {
	max := p.cfg.MaxProjects
	p.log.Warn("refused a session: max_projects reached, each project with sessions", "project", root, "transport", peer.Transport, "peer", peer.Addr, "max_projects", max)
	e := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Reason: jsonrpc.ReasonTooManySessions, Server: p.cfg.Name,
		Message: fmt.Sprintf("server %s has its maximum of %d projects (max_projects), each with sessions: none is started for %s", p.cfg.Name, max, root)}
	t.WriteFrames([]outbox.Frame{{Data: e.Response(nil), Last: true}})
	t.Close()
}

// startLocked makes and runs root's instance.
func (p *Projects) startLocked(root string) *instance {
	cfg := p.cfg
	cfg.Upstream = projectUpstream(cfg.Upstream, root)
	cfg.Lazy, cfg.IdleTimeout = false, 0
	ctx, cancel := context.WithCancel(p.ctx)
	in := &instance{key: root, hub: New(cfg), cancel: cancel, done: make(chan struct{})}
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
	in.since = time.Now()
	in.idle = time.AfterFunc(p.cfg.IdleTimeout, func() { p.stopIfIdle(in) })
}

// stopIfIdle stops an instance that still has no session.
func (p *Projects) stopIfIdle(in *instance) {
	if !p.forget(in) {
		return
	}
	p.log.Info("stopping the project's instance: no sessions", "project", in.key, "idle_timeout", p.cfg.IdleTimeout)
	in.cancel()
}

func (p *Projects) forget(in *instance) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if in.sessions > 0 || p.instances[in.key] != in {
		return false
	}
	delete(p.instances, in.key)
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
		st.Queued += hs.Queued
		st.Restarts += hs.Restarts
		st.SessionList = append(st.SessionList, hs.SessionList...)
		st.Instances = append(st.Instances, InstanceStatus{Project: in.key, State: hs.State, Pid: hs.Pid, Sessions: hs.Sessions, LastExit: hs.LastExit})
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
		in.hub.Reconfigure(projectUpstream(up, in.key))
	}
}

// SetTools changes the tool view of every instance, running or to come.
func (p *Projects) SetTools(v ToolView) {
	p.setTools(v)
	for _, in := range p.all() {
		in.hub.SetTools(v)
	}
}

func (p *Projects) setTools(v ToolView) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg.Tools = v
}

func (p *Projects) setUpstream(up upstream.Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	up.Name, up.Logger, up.MaxMessageBytes = p.cfg.Upstream.Name, p.cfg.Upstream.Logger, p.cfg.Upstream.MaxMessageBytes
	p.cfg.Upstream = up
}
