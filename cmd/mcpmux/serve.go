package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
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
		return serve(cmd.Context(), cfg, daemonEnv{environ: os.Environ(), stderr: cmd.ErrOrStderr()}, log)
	}
	return cmd
}

// daemonEnv is what the daemon takes from its own process: its environment
// (servers inherit an allowlist of it) and its stderr (for stderr = "inherit").
type daemonEnv struct {
	environ []string
	stderr  io.Writer
}

// serve runs the daemon until ctx is done.
func serve(ctx context.Context, cfg *config, env daemonEnv, log *slog.Logger) error {
	dir := cfg.Listen.SocketDir
	if err := socket.PrepareDir(dir); err != nil {
		return err
	}

	type served struct {
		hub mux.Server
		l   *socket.Listener
	}
	var all []served
	// The control socket first: it is the daemon's lock on socket_dir.
	ctl, err := listenControl(dir, log)
	if errors.Is(err, socket.ErrInUse) {
		return fmt.Errorf("another mcpmux is already serving %s", dir)
	} else if err != nil {
		return err
	}
	closeAll := func() {
		ctl.Close()
		for _, s := range all {
			s.l.Close()
		}
	}
	ids := new(atomic.Uint64)
	for _, sc := range cfg.Servers {
		path := filepath.Join(dir, sc.Name+".sock")
		l, err := socket.ListenUnix(path)
		if err != nil {
			closeAll()
			if errors.Is(err, socket.ErrInUse) {
				return fmt.Errorf("another mcpmux is already serving %s", path)
			}
			return err
		}
		l.Logger = log
		hub := mux.NewServer(hubConfig(cfg, sc, env, log, ids), sc.Isolated)
		all = append(all, served{hub, l})
	}
	log.Info("mcpmux serving", "version", mcpmuxVersion(), "socket_dir", dir, "servers", len(all))

	var wg sync.WaitGroup
	hubs := make([]mux.Server, len(all))
	for i, s := range all {
		hubs[i] = s.hub
	}
	wg.Go(func() {
		if err := serveControl(ctx, ctl, controlHandler(hubs, time.Now()), log); err != nil {
			log.Error("control socket failed", "error", err)
		}
	})
	for _, s := range all {
		maxBytes := s.hub.MaxMessageBytes()
		wg.Go(func() { s.hub.Run(ctx) })
		wg.Go(func() {
			err := socket.Serve(ctx, s.l, func(ctx context.Context, c net.Conn) {
				if err := s.hub.Serve(ctx, session.NewStream(c, maxBytes), unixPeer(c)); err != nil {
					log.Debug("session ended", "server", s.hub.Name(), "error", err)
				}
			})
			if err != nil {
				log.Error("listener failed", "server", s.hub.Name(), "error", err)
			}
		})
	}
	<-ctx.Done()
	log.Info("mcpmux shutting down")
	wg.Wait()
	log.Info("mcpmux stopped")
	return nil
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

// unixPeer names the process at the other end of a Unix connection.
func unixPeer(c net.Conn) session.Peer {
	p, err := socket.PeerOf(c)
	if err != nil {
		return session.Peer{Transport: "unix"}
	}
	return session.Peer{Transport: "unix", Addr: fmt.Sprintf("pid %d uid %d", p.PID, p.UID)}
}
