package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/socket"
	"github.com/mcpmux/mcpmux/upstream"
)

func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon in the foreground (logs go to stderr)",
		Args:  cobra.NoArgs,
	}
	load := configFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := load()
		if err != nil {
			return err
		}
		log := newLogger(cfg, cmd.ErrOrStderr())
		env := daemonEnv{environ: os.Environ(), stderr: cmd.ErrOrStderr()}
		if exe, err := os.Executable(); err != nil {
			log.Warn("cannot find the mcpmux executable to run reapers; a server will outlive a killed mcpmux", "error", err)
		} else {
			env.reaper = []string{exe, reaperMode}
		}
		if env.inherited, err = socket.Inherited(os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS"), os.Getpid()); err != nil {
			return fmt.Errorf("socket activation: %w", err)
		}
		return serve(cmd.Context(), cfg, env, log)
	}
	return cmd
}

// daemonEnv is what the daemon takes from its own process: its environment
// (servers inherit an allowlist of it), its stderr (for stderr = "inherit")
// and the argv that re-executes it as a reaper (nil: none).
type daemonEnv struct {
	environ   []string
	stderr    io.Writer
	reaper    []string
	inherited map[string]*socket.Listener // sockets passed by systemd socket activation, by path
}

// reaperMode, as the first argument, makes the mcpmux binary a reaper
// (upstream.RunReaper) instead of a command: each server runs under one, so
// that it dies with mcpmux even when mcpmux is SIGKILLed.
const reaperMode = "__reaper"

// serve runs the daemon until ctx is done. SIGHUP, or `mcpmux reload`,
// reads the config again.
func serve(ctx context.Context, cfg *config, env daemonEnv, log *slog.Logger) error {
	ctx, stop := context.WithCancel(ctx) // idle_exit ends the daemon too
	defer stop()
	dir := cfg.Listen.SocketDir
	if err := socket.PrepareDir(dir); err != nil {
		return err
	}
	d := &daemon{env: env, log: log, ids: new(atomic.Uint64), path: cfg.Path, base: ctx, cfg: cfg, running: map[string]*running{}, inherited: env.inherited}
	// The control socket first: it is the daemon's lock on socket_dir.
	ctl, err := d.listenUnix(filepath.Join(dir, controlSocket))
	if errors.Is(err, socket.ErrInUse) {
		return fmt.Errorf("another mcpmux is already serving %s", dir)
	} else if err != nil {
		return err
	}
	ctl.Logger = log
	var opened []*running
	closeAll := func() {
		ctl.Close()
		for _, r := range opened {
			r.l.Close()
		}
	}
	for _, sc := range cfg.Servers {
		r, err := d.listen(sc)
		if err != nil {
			closeAll()
			return err
		}
		opened = append(opened, r)
	}
	var web *socket.Web
	if cfg.Listen.HTTP != "" {
		if web, err = listenWeb(cfg.Listen, env, d.endpoint, log); err != nil {
			closeAll()
			return err
		}
	}
	for _, r := range opened {
		d.start(ctx, r)
		d.running[r.sc.Name] = r
	}
	for path, l := range d.inherited {
		log.Warn("the service manager passed a socket no server uses; closing it", "socket", path)
		l.Close()
	}
	d.inherited = nil
	log.Info("mcpmux serving", "version", mcpmuxVersion(), "socket_dir", dir, "servers", len(opened))

	var wg sync.WaitGroup
	if cfg.Daemon.IdleExit > 0 {
		wg.Go(func() { exitWhenIdle(ctx, d.servers, cfg.Daemon.IdleExit, stop, log) })
	}
	wg.Go(func() {
		if err := serveControl(ctx, ctl, controlHandler(d, time.Now()), log); err != nil {
			log.Error("control socket failed", "error", err)
		}
	})
	if web != nil {
		wg.Go(func() {
			if err := web.Serve(ctx); err != nil {
				log.Error("web listener failed", "error", err)
			}
		})
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for ctx.Err() == nil {
		select {
		case <-hup:
			log.Info("SIGHUP: reloading the config", "config", d.path)
			d.reload() // logs its own outcome
		case <-ctx.Done():
		}
	}
	log.Info("mcpmux shutting down")
	wg.Wait()
	d.wg.Wait()
	log.Info("mcpmux stopped")
	return nil
}

// endpoint finds a server for the web listener.
func (d *daemon) endpoint(name string) (socket.Endpoint, bool) {
	srv, ok := d.server(name)
	return srv, ok
}

// hubConfig turns one [servers.NAME] table into the hub's configuration.
func hubConfig(cfg *config, sc serverConfig, env daemonEnv, log *slog.Logger, ids *atomic.Uint64) mux.Config {
	stderr := map[string]upstream.StderrMode{
		"log":     upstream.StderrLog,
		"inherit": upstream.StderrInherit,
		"discard": upstream.StderrDiscard,
		"file":    upstream.StderrFile,
	}[sc.Stderr]
	return mux.Config{
		Name: sc.Name,
		Upstream: upstream.Config{
			Command:         sc.Command,
			Args:            sc.Args,
			Environ:         env.environ,
			InheritEnv:      sc.InheritEnv,
			Env:             sc.Env,
			Dir:             sc.Cwd,
			Stderr:          stderr,
			StderrPath:      sc.StderrPath,
			StderrInherit:   env.stderr,
			StdinGrace:      explicitZero(sc.StdinGrace),
			TermGrace:       explicitZero(sc.TermGrace),
			MaxMessageBytes: sc.MaxMessageBytes,
			MaxJunkLines:    explicitZeroInt(sc.MaxJunkLines),
			WriteQueueBytes: sc.WriteQueueBytes,

			WriteStallTimeout: sc.WriteStallTimeout,
			Reaper:            env.reaper,
		},
		Session: session.Config{
			MaxInflight:     cfg.Listen.MaxInflight,
			OutboxHighWater: cfg.Listen.OutboxHighWater,
			OutboxMax:       cfg.Listen.OutboxMax,
		},
		StartTimeout: sc.StartTimeout,
		MaxSessions:  sc.MaxSessions,

		ServerRequests:       sc.ServerRequests,
		ServerRequestTimeout: sc.ServerRequestTimeout,
		Roots:                sc.Roots,
		RootsFromSessions:    sc.RootsFromSessions,
		DefaultLogLevel:      sc.DefaultLogLevel,
		RestartBackoff:       sc.RestartBackoff,
		RestartBackoffMax:    sc.RestartBackoffMax,
		RestartWindow:        sc.RestartWindow,
		MaxRestarts:          sc.MaxRestarts,
		RequestTimeout:       sc.RequestTimeout,
		PingInterval:         sc.PingInterval,
		PingFailures:         sc.PingFailures,
		Lazy:                 sc.Lazy,
		IdleTimeout:          sc.IdleTimeout,
		Version:              mcpmuxVersion(),
		Logger:               log,
		IDs:                  ids,
	}
}

// explicitZero turns a configured zero into the upstream package's "none"
// (a negative value), since its zero means "the default".
func explicitZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func explicitZeroInt(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// serveUnix serves one connection to a server's socket: newline-delimited
// JSON-RPC, one session; or, when its first byte is 0x00, yamux, each
// stream one session.
func serveUnix(ctx context.Context, hub mux.Server, c net.Conn, maxStreams int, log *slog.Logger) {
	peer := unixPeer(c)
	first, conn, err := socket.Sniff(ctx, c)
	if err != nil {
		c.Close() // gone before its first byte (a probe, a shutdown)
		return
	}
	maxBytes := hub.MaxMessageBytes()
	if first != socket.YamuxPreface {
		if err := hub.Serve(ctx, session.NewStream(conn, maxBytes), peer); err != nil {
			log.Debug("session ended", "server", hub.Name(), "error", err)
		}
		return
	}
	ylog := log.With("server", hub.Name(), "peer", peer.Addr)
	ylog.Debug("yamux connection")
	err = socket.ServeYamux(ctx, conn, socket.YamuxConfig{MaxStreams: maxStreams, Logger: ylog},
		func(ctx context.Context, stream net.Conn, id uint32) {
			p := session.Peer{Transport: "yamux", Addr: fmt.Sprintf("%s stream %d", peer.Addr, id)}
			if err := hub.Serve(ctx, session.NewStream(stream, maxBytes), p); err != nil {
				log.Debug("session ended", "server", hub.Name(), "error", err)
			}
		})
	if err != nil {
		ylog.Warn("closed a yamux connection that broke the framing", "error", err)
	}
}

// listenWeb opens the web listener of [listen] http. The token is
// http_token, or the one kept in the state folder (made on first use).
func listenWeb(lc listenConfig, env daemonEnv, lookup func(string) (socket.Endpoint, bool), log *slog.Logger) (*socket.Web, error) {
	notLoopback := func() error {
		return fmt.Errorf("[listen] http = %q is not a loopback address; set http_allow_remote = true to serve beyond this machine", lc.HTTP)
	}
	// The address first: a refused one must not leave a token behind.
	if err := socket.CheckWebAddr(lc.HTTP, lc.HTTPAllowRemote); errors.Is(err, socket.ErrNotLoopback) {
		return nil, notLoopback()
	}
	token, where := lc.HTTPToken, "http_token in the config file"
	if token == "" {
		path, err := httpTokenPath(env.environ)
		if err != nil {
			return nil, fmt.Errorf("[listen] http: %w", err)
		}
		var created bool
		if token, created, err = socket.LoadOrCreateToken(path); err != nil {
			return nil, fmt.Errorf("[listen] http: %w", err)
		}
		where = path
		if created {
			log.Info("generated the web token", "token_file", path)
		}
	}
	web, err := socket.ListenWeb(socket.WebConfig{
		Addr:        lc.HTTP,
		Token:       token,
		Origins:     lc.HTTPOrigins,
		AllowRemote: lc.HTTPAllowRemote,
		Lookup:      lookup,
		Logger:      log,

		HTTPSessionIdle: lc.HTTPSessionIdle,
	})
	if errors.Is(err, socket.ErrNotLoopback) { // "localhost" bound beyond loopback
		return nil, notLoopback()
	} else if err != nil {
		return nil, fmt.Errorf("[listen] http = %q: %w", lc.HTTP, err)
	}
	if lc.HTTPAllowRemote {
		log.Warn("the web listener accepts connections from other machines (http_allow_remote = true)", "addr", web.Addr().String())
	}
	log.Info("web listener", "url", fmt.Sprintf("ws://%s%sNAME", web.Addr(), socket.ServersPath), "token_from", where)
	return web, nil
}

// httpTokenPath is where the generated web token is kept:
// $XDG_STATE_HOME/mcpmux/http.token, else ~/.local/state/mcpmux/http.token.
// As the XDG spec asks, a relative XDG_STATE_HOME is ignored.
func httpTokenPath(environ []string) (string, error) {
	getenv := func(key string) string {
		for _, kv := range slices.Backward(environ) {
			if k, v, ok := strings.Cut(kv, "="); ok && k == key {
				return v
			}
		}
		return ""
	}
	if state := getenv("XDG_STATE_HOME"); filepath.IsAbs(state) {
		return filepath.Join(state, "mcpmux", "http.token"), nil
	}
	home := getenv("HOME")
	if !filepath.IsAbs(home) {
		return "", errors.New("cannot place the web token: neither XDG_STATE_HOME nor HOME is set to an absolute path; set http_token")
	}
	return filepath.Join(home, ".local", "state", "mcpmux", "http.token"), nil
}

// unixPeer names the process at the other end of a Unix connection.
func unixPeer(c net.Conn) session.Peer {
	p, err := socket.PeerOf(c)
	if err != nil {
		return session.Peer{Transport: "unix"}
	}
	return session.Peer{Transport: "unix", Addr: fmt.Sprintf("pid %d uid %d", p.PID, p.UID)}
}

// exitWhenIdle stops the daemon once no server has had a session for idle.
func exitWhenIdle(ctx context.Context, servers func() []mux.Server, idle time.Duration, stop func(), log *slog.Logger) {
	tick := time.NewTicker(min(idle/4, time.Second))
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, h := range servers() {
			if h.Status().Sessions > 0 {
				last = time.Now()
				break
			}
		}
		if time.Since(last) >= idle {
			log.Info("no sessions: exiting", "idle_exit", idle)
			stop()
			return
		}
	}
}
