package main

import (
	"time"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/upstream"
)

// hubConfig turns one [servers.NAME] table, with the session limits of
// [listen], into the router's configuration. The daemon sets its logger,
// session ids and version.
func hubConfig(lc config.Listen, sc config.Server, env daemonEnv) mux.Config {
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
			MaxInflight:     lc.MaxInflight,
			OutboxHighWater: lc.OutboxHighWater,
			OutboxMax:       lc.OutboxMax,
			DrainTimeout:    lc.DrainTimeout,
		},
		StartTimeout:         sc.StartTimeout,
		InitializeTimeout:    sc.InitTimeout,
		Protocol:             sc.Protocol,
		UpstreamCapabilities: sc.UpstreamCaps,
		MaxSessions:          sc.MaxSessions,
		MaxConcurrency:       sc.MaxConcurrency,
		Memory:               env.memory(sc),
		ProjectMarkers:       sc.ProjectMarkers,

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
