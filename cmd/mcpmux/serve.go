package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/bridge"
	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/internal/statefile"
	"github.com/mcpmux/mcpmux/socket"
)

func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon in the foreground (logs go to stderr)",
		Args:  cobra.NoArgs,
	}
	load := configFlag(cmd)
	var autostarted bool
	var logPath string
	var logMax int64
	cmd.Flags().BoolVar(&autostarted, autostartedFlag, false, "started by `mcpmux connect` (auto-start)")
	cmd.Flags().MarkHidden(autostartedFlag)
	cmd.Flags().StringVar(&logPath, logFileFlag, "", "log to this file, rotated by size, instead of stderr (auto-start)")
	cmd.Flags().MarkHidden(logFileFlag)
	cmd.Flags().Int64Var(&logMax, "log-max", daemon.LogMax, "the size at which --log-file rotates")
	cmd.Flags().MarkHidden("log-max")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := load()
		if err != nil {
			return err
		}
		var logw io.Writer = cmd.ErrOrStderr()
		var lf *daemon.LogFile
		if logPath != "" {
			if logMax <= 0 {
				return fmt.Errorf("--log-max %d: must be positive", logMax)
			}
			lf, err = daemon.OpenLogFile(logPath, logMax, daemon.LogKeep)
			if err != nil {
				return err
			}
			defer lf.Close()
			logw = lf
		}
		log := newLogger(cfg, logw)
		if lf != nil {
			for _, note := range lf.Repairs() {
				log.Warn(note)
			}
		}
		if note := cfg.Listen.SocketDirNote; note != "" {
			log.Warn("the usual socket folder cannot be used: "+note, "socket_dir", cfg.Listen.SocketDir)
		}
		// Servers with stderr = "inherit" write into the log as the daemon
		// does: through the rotating file when there is one.
		env := daemonEnv{environ: os.Environ(), stderr: logw, autostarted: autostarted}
		env.state, _ = config.StateDir(os.Getenv) // none: nothing is remembered
		env.state = prepareState(env.state, log)
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

// prepareState makes the state folder private by statefile's rules (a
// folder of ours open to others is set to 0700, and the log says so) and
// returns it; another user's folder, or a symlink, is refused and logged,
// and the daemon then remembers nothing ("").
func prepareState(state string, log *slog.Logger) string {
	if state == "" {
		return ""
	}
	note, err := statefile.PrepareDir(state)
	if err != nil {
		log.Warn("the state folder is refused: nothing is remembered or restored", "error", err)
		return ""
	}
	if note != "" {
		log.Warn(note)
	}
	return state
}

// daemonEnv is what the daemon takes from its own process: its environment
// (servers inherit an allowlist of it), its stderr (for stderr = "inherit")
// and the argv that re-executes it as a reaper (nil: none).
type daemonEnv struct {
	environ   []string
	stderr    io.Writer
	reaper    []string
	inherited map[string]*socket.Listener // sockets passed by systemd socket activation, by path
	state     string                      // the state folder, where mcpmux remembers things of servers and records where it serves; "" none
	// autostarted: `mcpmux connect` started this daemon, holding the
	// auto-start lock, and says so with the hidden flag autostartedFlag.
	autostarted bool
}

// autostartedFlag is the hidden flag of serve that auto-start passes.
const autostartedFlag = "autostarted"

// logFileFlag is the hidden flag of serve that auto-start passes with its
// log file, which the daemon then rotates.
const logFileFlag = "log-file"

// reaperMode, as the first argument, makes the mcpmux binary a reaper
// (upstream.RunReaper) instead of a command: each server runs under one, so
// that it dies with mcpmux even when mcpmux is SIGKILLed.
const reaperMode = "__reaper"

// serve runs the daemon until ctx is done. SIGHUP, or `mcpmux reload`,
// reads the config file again.
func serve(ctx context.Context, cfg *config.Config, env daemonEnv, log *slog.Logger) error {
	if len(cfg.Servers) == 0 {
		log.Warn("the config has no servers: nothing is served until it has a [servers.NAME] table and is reloaded", "config", cfg.Path)
	}
	dcfg, err := runConfig(cfg, env, log)
	if err != nil {
		return err
	}
	release, err := startLock(ctx, cfg, env)
	if err != nil {
		return err
	}
	defer release()
	dcfg.Ready = release // the folder is this daemon's: a connect now waits for it
	d, err := daemon.New(dcfg)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { reloadOnHangUp(ctx, d, cfg.Path, log) })
	err = d.Run(ctx)
	stop()
	wg.Wait()
	var we *daemon.WebError
	var inUse *daemon.InUseError
	switch {
	case errors.As(err, &inUse):
		return alreadyServed(inUse, cfg, env)
	case errors.Is(err, socket.ErrNotLoopback): // "localhost" bound beyond loopback
		return notLoopback(cfg.Listen)
	case errors.As(err, &we):
		return fmt.Errorf("[listen] http = %q: %w", we.Addr, we.Err)
	}
	return err
}

// startLock takes the auto-start lock of the socket folder for a daemon
// started by hand, until it holds the folder (its control socket; then
// release), so that a connect started at the same moment waits for it
// instead of starting a second daemon. A daemon started by connect runs
// under that connect's hold of the lock already.
func startLock(ctx context.Context, cfg *config.Config, env daemonEnv) (release func(), err error) {
	if env.autostarted {
		return func() {}, nil
	}
	if err := socket.PrepareDir(cfg.Listen.SocketDir); err != nil {
		return nil, err
	}
	unlock, err := bridge.AutostartLock(ctx, cfg.Listen.SocketDir)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(unlock) }, nil
}

// alreadyServed words the refusal of a daemon whose socket folder another
// one serves, naming that one from its record when it left one.
func alreadyServed(e *daemon.InUseError, cfg *config.Config, env daemonEnv) error {
	if env.state == "" {
		return e
	}
	recs := daemon.RecordsServing(env.state, cfg.Listen.SocketDir)
	if len(recs) == 0 {
		return e
	}
	r := recs[0]
	if daemon.SameConfig(r.Config, cfg.Path) {
		return fmt.Errorf("%w (%s): it serves this config already; `mcpmux status` shows it, or stop it (kill %d) to run serve yourself",
			e, r.Describe(), r.Pid)
	}
	return fmt.Errorf("%w (%s): it serves another config; stop it (kill %d), or give this config another socket_dir", e, r.Describe(), r.Pid)
}

// reloadOnHangUp reloads the daemon at every SIGHUP until ctx is done.
func reloadOnHangUp(ctx context.Context, d *daemon.Daemon, path string, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-hup:
			log.Info("SIGHUP: reloading the config", "config", path)
			d.Reload(ctx) // the daemon logs the outcome
		case <-ctx.Done():
			return
		}
	}
}

// runConfig turns the config file into the daemon's configuration;
// reloads read the file again and keep [daemon] and [listen] as started.
func runConfig(cfg *config.Config, env daemonEnv, log *slog.Logger) (daemon.Config, error) {
	dc := daemon.Config{
		SocketDir:         cfg.Listen.SocketDir,
		Servers:           servers(cfg, cfg.Listen, env),
		Endpoints:         endpoints(cfg, cfg.Listen),
		MaxStreamsPerConn: cfg.Listen.MaxStreamsPerConn,
		IdleExit:          cfg.Daemon.IdleExit,
		FirstByteTimeout:  cfg.Daemon.FirstByteTimeout,
		LineTimeout:       cfg.Daemon.LineTimeout,
		MaxQueuedBytes:    cfg.Daemon.MaxQueuedBytes,
		Inherited:         env.inherited,
		ConfigFile:        cfg.Path,
		StateDir:          env.state,
		Autostarted:       env.autostarted,
		Version:           mcpmuxVersion(),
		ResidentBytes:     daemon.ResidentBytes,
		Logger:            log,
		Reload: func() (daemon.Reloaded, error) {
			next, err := config.Load(cfg.Path)
			if err != nil {
				return daemon.Reloaded{}, err
			}
			r := daemon.Reloaded{Servers: servers(next, cfg.Listen, env), Endpoints: endpoints(next, cfg.Listen)}
			if !reflect.DeepEqual(next.Listen, cfg.Listen) {
				r.Ignored = append(r.Ignored, "[listen]")
			}
			if !reflect.DeepEqual(next.Daemon, cfg.Daemon) {
				r.Ignored = append(r.Ignored, "[daemon]")
			}
			return r, nil
		},
	}
	if cfg.Listen.Web.Addr != "" {
		web, err := webConfig(cfg.Listen, env, log)
		if err != nil {
			return dc, err
		}
		web.MaxHTTPSessions = cfg.Daemon.MaxHTTPSessions
		dc.Web = &web
	}
	return dc, nil
}

// servers are the [servers.NAME] tables, with the session limits of lc
// and what the daemon takes from its own process (env). The daemon sets
// each router's logger, session ids and version.
func servers(cfg *config.Config, lc config.Listen, env daemonEnv) []daemon.Server {
	out := slices.Clone(cfg.Servers)
	for i := range out {
		h := &out[i].Hub
		h.Session = lc.Session
		h.Upstream.Environ = env.environ
		h.Upstream.StderrInherit = env.stderr
		h.Upstream.Reaper = env.reaper
	}
	return out
}

// endpoints are the [endpoints.NAME] tables and the endpoint all, with
// the session limits of lc.
func endpoints(cfg *config.Config, lc config.Listen) []daemon.Endpoint {
	out := make([]daemon.Endpoint, len(cfg.Endpoints))
	for i, e := range cfg.Endpoints {
		out[i] = daemon.Endpoint{Endpoint: e, Session: lc.Session}
	}
	return out
}

func notLoopback(lc config.Listen) error {
	return fmt.Errorf("[listen] http = %q is not a loopback address; set http_allow_remote = true to serve beyond this machine", lc.Web.Addr)
}

// webConfig is the web listener of [listen] http. The token is http_token,
// or the one kept in the state folder (made on first use).
func webConfig(lc config.Listen, env daemonEnv, log *slog.Logger) (socket.WebConfig, error) {
	// The address first: a refused one must not leave a token behind.
	web := lc.Web
	if err := socket.CheckWebAddr(web.Addr, web.AllowRemote); errors.Is(err, socket.ErrNotLoopback) {
		return socket.WebConfig{}, notLoopback(lc)
	}
	where := "http_token in the config file"
	if web.Token == "" {
		path, err := socket.TokenPath(env.environ)
		if err != nil {
			return socket.WebConfig{}, fmt.Errorf("[listen] http: %w", err)
		}
		var created bool
		var refused error
		web.Token, created, refused, err = socket.ServeToken(path)
		if refused != nil {
			log.Warn("removed a token file that was refused; a new token is made", "error", refused)
		}
		if err != nil {
			return socket.WebConfig{}, fmt.Errorf("[listen] http: %w", err)
		}
		where, web.TokenFile = path, path
		if created {
			log.Info("generated the web token", "token_file", path)
		}
	}
	if web.AllowRemote {
		log.Warn("the web listener accepts connections from other machines (http_allow_remote = true)", "addr", web.Addr)
	}
	log.Info("web token", "token_from", where)
	web.HTTPSessionDir = httpSessionDir(env.state)
	return web, nil
}

// httpSessionDir is where the Streamable HTTP sessions are kept for the
// next daemon: http-sessions in the state folder; "" (none kept) without
// one.
func httpSessionDir(state string) string {
	if state == "" {
		return ""
	}
	return filepath.Join(state, "http-sessions")
}
