package mux

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// why a supervised process ended
type ending int

const (
	endCrash    ending = iota // it exited, or was killed for misbehaving
	endRestart                // `mcpmux restart` asked for it
	endIdle                   // no sessions for IdleTimeout
	endShutdown               // the daemon is stopping
)

// Run keeps the server running until ctx is done: it starts the process,
// initializes it, restarts it with capped, jittered exponential backoff when
// it exits, and gives up (state failed) when it crashes more than
// MaxRestarts times within RestartWindow, until Restart is called. When ctx
// is done it stops the process with the configured escalation, closes the
// sessions and returns.
func (h *Hub) Run(ctx context.Context) error {
	defer func() {
		h.setState(StateStopped)
		h.closeAll(fmt.Errorf("server %s stopped: the daemon is shutting down", h.cfg.Name))
	}()
	if h.cfg.Lazy {
		h.setState(StateIdle)
		if !h.waitDemand(ctx) {
			return nil
		}
	}
	backoff := h.cfg.RestartBackoff
	var crashes []time.Time
	for {
		why := endCrash
		proc, err := h.startOnce(ctx)
		if err == nil {
			up := time.Now()
			why = h.supervise(ctx, proc)
			h.exited(proc)
			if time.Since(up) >= h.cfg.RestartWindow {
				backoff, crashes = h.cfg.RestartBackoff, nil
			}
		} else if ctx.Err() == nil {
			h.log.Error("server did not start", "error", err)
			h.mu.Lock()
			h.lastExit = err.Error()
			h.mu.Unlock()
		}
		if ctx.Err() != nil {
			return nil
		}
		switch why {
		case endRestart:
			h.countRestart()
			continue
		case endIdle:
			h.setState(StateIdle)
			h.log.Info("server stopped: no sessions", "idle_timeout", h.cfg.IdleTimeout)
			if !h.waitDemand(ctx) {
				return nil
			}
			backoff, crashes = h.cfg.RestartBackoff, nil
			continue
		}

		now := time.Now()
		crashes = append(crashes, now)
		for len(crashes) > 0 && now.Sub(crashes[0]) > h.cfg.RestartWindow {
			crashes = crashes[1:]
		}
		if h.cfg.MaxRestarts > 0 && len(crashes) > h.cfg.MaxRestarts {
			if !h.giveUp(ctx, len(crashes)) {
				return nil
			}
			backoff, crashes = h.cfg.RestartBackoff, nil
			h.countRestart()
			continue
		}
		h.setState(StateBackoff)
		delay := jitter(backoff)
		h.log.Info("restarting server", "in", delay.Round(time.Millisecond))
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-h.kick:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return nil
		}
		backoff = min(2*backoff, h.cfg.RestartBackoffMax)
		h.countRestart()
	}
}

func (h *Hub) countRestart() {
	h.mu.Lock()
	h.restarts++
	h.mu.Unlock()
}

// giveUp puts the server in the failed state until Restart is called; false
// means ctx ended first.
func (h *Hub) giveUp(ctx context.Context, crashes int) bool {
	h.mu.Lock()
	h.state = StateFailed
	h.failedAt = fmt.Sprintf("it crashed %d times within %s (last exit: %s)", crashes, h.cfg.RestartWindow, h.lastExit)
	why := h.failedAt
	h.mu.Unlock()
	h.log.Error("server failed; not restarting it until `mcpmux restart`", "why", why)
	select {
	case <-h.kick:
		h.log.Info("restarting a failed server on request")
		return true
	case <-ctx.Done():
		return false
	}
}

// Restart bounces a running server (its sessions stay attached) or brings a
// failed one back.
func (h *Hub) Restart() {
	notify(h.kick)
}

// waitDemand waits, idle, for a session to want the server; false means
// ctx ended first.
func (h *Hub) waitDemand(ctx context.Context) bool {
	for {
		h.mu.Lock()
		wanted := len(h.clients) > 0
		h.mu.Unlock()
		if wanted {
			return true
		}
		select {
		case <-h.demand: // look again: the session may have gone
		case <-h.kick:
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// supervise watches a running process until it ends, and says why.
func (h *Hub) supervise(ctx context.Context, proc process) ending {
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.stopTimeout())
		defer cancel()
		proc.Stop(sctx)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	pctx, cancelPing := context.WithCancel(ctx)
	defer cancelPing()
	if h.cfg.PingInterval > 0 {
		wg.Go(func() { h.pingLoop(pctx, proc) })
	}

	var idle *time.Timer
	var idleC <-chan time.Time
	armIdle := func() {
		if h.cfg.IdleTimeout <= 0 {
			return
		}
		h.mu.Lock()
		n := len(h.clients)
		h.mu.Unlock()
		switch {
		case n == 0 && idle == nil:
			idle = time.NewTimer(h.cfg.IdleTimeout)
			idleC = idle.C
		case n > 0 && idle != nil:
			idle.Stop()
			idle, idleC = nil, nil
		}
	}
	defer func() {
		if idle != nil {
			idle.Stop()
		}
	}()
	armIdle()
	for {
		select {
		case <-proc.Done():
			return endCrash
		case <-ctx.Done():
			stop()
			return endShutdown
		case <-h.kick:
			h.log.Info("restarting server on request")
			stop()
			return endRestart
		case <-h.sessions:
			armIdle()
		case <-idleC:
			idle, idleC = nil, nil
			h.mu.Lock()
			n := len(h.clients)
			h.mu.Unlock()
			if n == 0 {
				stop()
				return endIdle
			}
		}
	}
}

// pingLoop pings the server every PingInterval and kills it after
// PingFailures missed answers in a row. Off by default: many servers cannot
// answer while a long tool call runs.
func (h *Hub) pingLoop(ctx context.Context, proc process) {
	t := time.NewTicker(h.cfg.PingInterval)
	defer t.Stop()
	missed := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-proc.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, h.cfg.PingInterval)
		_, err := h.call(cctx, proc, "ping", nil)
		cancel()
		if err == nil {
			missed = 0
			continue
		}
		if ctx.Err() != nil {
			return
		}
		missed++
		h.log.Warn("server missed a ping", "missed", missed, "error", err)
		if missed >= h.cfg.PingFailures {
			proc.Kill("unresponsive")
			return
		}
	}
}

// notify wakes a 1-buffered channel without blocking.
func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
