package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/socket"
)

// daemon is the set of servers a running `mcpmux serve` serves. A reload
// changes it while it runs: servers added start, servers removed stop,
// servers whose table changed restart, and the others see nothing.
type daemon struct {
	env  daemonEnv
	log  *slog.Logger
	ids  *atomic.Uint64
	path string // the config file, read again on reload
	// base is the daemon's own context, the parent of every server's: a
	// reload asked for over the control socket must not tie the servers it
	// starts to that request.
	base context.Context

	wg sync.WaitGroup // every server's goroutines

	mu        sync.Mutex
	cfg       *config // [daemon] and [listen] as started; [servers] as last loaded
	running   map[string]*running
	inherited map[string]*socket.Listener // sockets a service manager passed, not yet used, by path
}

// running is one served server: its router, its socket, and what stops them.
type running struct {
	srv    mux.Server
	sc     serverConfig
	l      *socket.Listener
	cancel context.CancelFunc
	done   chan struct{} // closed when its goroutines have returned
}

// listen opens the socket of a server and makes its router; start runs them.
func (d *daemon) listen(sc serverConfig) (*running, error) {
	path := filepath.Join(d.cfg.Listen.SocketDir, sc.Name+".sock")
	l, err := d.listenUnix(path)
	if errors.Is(err, socket.ErrInUse) {
		return nil, fmt.Errorf("another mcpmux is already serving %s", path)
	} else if err != nil {
		return nil, err
	}
	l.Logger = d.log
	return &running{srv: mux.NewServer(hubConfig(d.cfg, sc, d.env, d.log, d.ids), sc.Isolated), sc: sc, l: l}, nil
}

// start runs a listened server until ctx is done or it is removed.
func (d *daemon) start(ctx context.Context, r *running) {
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { r.srv.Run(ctx) })
	wg.Go(func() {
		err := socket.Serve(ctx, r.l, func(ctx context.Context, c net.Conn) {
			serveUnix(ctx, r.srv, c, d.cfg.Listen.MaxStreamsPerConn, d.log)
		})
		if err != nil {
			d.log.Error("listener failed", "server", r.srv.Name(), "error", err)
		}
	})
	d.wg.Go(func() {
		wg.Wait()
		close(r.done)
	})
}

func (d *daemon) servers() []mux.Server {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]mux.Server, 0, len(d.running))
	for _, r := range d.running {
		out = append(out, r.srv)
	}
	slices.SortFunc(out, func(a, b mux.Server) int {
		if a.Name() < b.Name() {
			return -1
		}
		return 1
	})
	return out
}

func (d *daemon) server(name string) (mux.Server, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.running[name]
	if !ok {
		return nil, false
	}
	return r.srv, true
}

// reloadResult says what a reload did.
type reloadResult struct {
	Added     []string `json:"added"`
	Removed   []string `json:"removed"`
	Restarted []string `json:"restarted"` // changed how it starts: restarted, sessions kept
	Replaced  []string `json:"replaced"`  // changed otherwise: a new router, sessions closed
	Ignored   []string `json:"ignored,omitempty"`
}

// reload reads the config file again and applies its [servers] tables. A
// file that does not load changes nothing. Changes to [daemon] and [listen]
// need a restart of the daemon; they are reported as ignored.
func (d *daemon) reload() (reloadResult, error) {
	var res reloadResult
	cfg, err := loadConfig(d.path)
	if err != nil {
		d.log.Error("reload refused: the config does not load; the running one stays", "error", err)
		return res, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !reflect.DeepEqual(cfg.Listen, d.cfg.Listen) {
		res.Ignored = append(res.Ignored, "[listen]")
	}
	if !reflect.DeepEqual(cfg.Daemon, d.cfg.Daemon) {
		res.Ignored = append(res.Ignored, "[daemon]")
	}
	want := map[string]serverConfig{}
	for _, sc := range cfg.Servers {
		want[sc.Name] = sc
	}
	for name, r := range d.running {
		sc, keep := want[name]
		switch {
		case !keep:
			d.log.Info("reload: server removed; closing its sessions", "server", name)
			r.cancel()
			<-r.done
			delete(d.running, name)
			res.Removed = append(res.Removed, name)
		case reflect.DeepEqual(sc, r.sc):
		case onlyHowItStarts(r.sc, sc):
			d.log.Info("reload: server changed; restarting it, sessions kept", "server", name)
			r.sc = sc
			r.srv.Reconfigure(hubConfig(cfg, sc, d.env, d.log, d.ids).Upstream)
			res.Restarted = append(res.Restarted, name)
		default:
			d.log.Info("reload: server changed beyond how it starts; replacing it and closing its sessions", "server", name)
			r.cancel()
			<-r.done
			delete(d.running, name)
			res.Replaced = append(res.Replaced, name)
		}
	}
	d.cfg.Servers = cfg.Servers
	for _, sc := range cfg.Servers {
		if _, ok := d.running[sc.Name]; ok {
			continue
		}
		r, err := d.listen(sc)
		if err != nil {
			d.log.Error("reload: cannot serve a server", "server", sc.Name, "error", err)
			return res, err
		}
		d.start(d.base, r)
		d.running[sc.Name] = r
		if !slices.Contains(res.Replaced, sc.Name) {
			d.log.Info("reload: server added", "server", sc.Name)
			res.Added = append(res.Added, sc.Name)
		}
	}
	for _, l := range [][]string{res.Added, res.Removed, res.Restarted, res.Replaced} {
		slices.Sort(l)
	}
	d.log.Info("reloaded", "added", res.Added, "removed", res.Removed, "restarted", res.Restarted, "replaced", res.Replaced, "ignored", res.Ignored)
	return res, nil
}

// onlyHowItStarts reports whether two tables differ only in keys that a
// restart of the process applies: command, arguments, environment, folder,
// stderr, graces and output limits. The sessions can then stay.
func onlyHowItStarts(a, b serverConfig) bool {
	startKeys := func(s serverConfig) serverConfig {
		s.Command, s.Args, s.Env, s.InheritEnv, s.Cwd = "", nil, nil, nil, ""
		s.Stderr, s.StderrPath = "", ""
		s.StdinGrace, s.TermGrace = 0, 0
		s.MaxJunkLines, s.WriteQueueBytes, s.WriteStallTimeout = 0, 0, 0
		return s
	}
	return reflect.DeepEqual(startKeys(a), startKeys(b))
}

// listenUnix takes the socket a service manager passed for path, if it
// passed one, else listens on path.
func (d *daemon) listenUnix(path string) (*socket.Listener, error) {
	if l, ok := d.inherited[path]; ok {
		delete(d.inherited, path)
		d.log.Info("using the socket the service manager passed", "socket", path)
		return l, nil
	}
	return socket.ListenUnix(path)
}
