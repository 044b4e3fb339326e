package mux

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/metrics"
	"github.com/mcpmux/mcpmux/upstream"
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
		h.life.setState(StateStopped)
		h.closeAll(fmt.Errorf("server %s stopped: the daemon is shutting down", h.cfg.Name))
	}()
	if h.cfg.Lazy {
		h.life.setState(StateIdle)
		if !h.waitDemand(ctx) {
			return nil
		}
	}
	r := restarts{h: h, backoff: h.cfg.RestartBackoff}
	for {
		why, healthy, err := h.runOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if healthy {
			r.reset() // it ran a whole window: its crash starts afresh
		}
		switch {
		case why == endRestart:
			h.life.countRestart()
			h.cfg.Metrics.Restart(metrics.Requested)
			continue
		case why == endIdle:
			h.life.setState(StateIdle)
			h.log.Info("server stopped: no sessions", "idle_timeout", h.cfg.IdleTimeout)
			if !h.waitDemand(ctx) {
				return nil
			}
			r.reset()
			continue
		case err != nil && shortage(err):
			// The machine, not the server: not a crash, and never a reason
			// to give up on the server.
			h.log.Warn("server did not start for want of machine resources; trying again, it is no crash", "cause", shortageCause(err))
		default:
			switch r.crashed(ctx) {
			case stop:
				return nil
			case startNow:
				continue
			}
		}
		if !r.wait(ctx) {
			return nil
		}
	}
}

// runOnce starts the process and supervises it until it ends. healthy: it
// ran for a whole restart window; err: why it did not start.
func (h *Hub) runOnce(ctx context.Context) (why ending, healthy bool, err error) {
	proc, err := h.startOnce(ctx)
	if err != nil {
		if ctx.Err() == nil {
			short := shortage(err)
			if !short {
				h.log.Error("server did not start", "error", err) // a shortage: Run says so
			}
			h.life.startFailed(shortageCause(err), cannotExec(err), short)
		}
		h.ended = metrics.StartFailed
		return endCrash, false, err
	}
	up := time.Now()
	why = h.supervise(ctx, proc)
	h.exited(proc)
	h.ended = proc.Exit().Reason
	return why, time.Since(up) >= h.cfg.RestartWindow, nil
}

// what Run does after a crash
type afterCrash int

const (
	backOff  afterCrash = iota // wait, then start again
	startNow                   // started again on request, after giving up
	stop                       // ctx ended
)

// restarts is Run's account of crashes: the capped, jittered exponential
// backoff, and the crashes within the restart window.
type restarts struct {
	h       *Hub
	backoff time.Duration
	crashes []time.Time
}

func (r *restarts) reset() { r.backoff, r.crashes = r.h.cfg.RestartBackoff, nil }

// crashed counts a crash; past MaxRestarts within the window the server is
// failed until Restart.
func (r *restarts) crashed(ctx context.Context) afterCrash {
	now := time.Now()
	r.crashes = append(r.crashes, now)
	for len(r.crashes) > 0 && now.Sub(r.crashes[0]) > r.h.cfg.RestartWindow {
		r.crashes = r.crashes[1:]
	}
	if r.h.cfg.MaxRestarts > 0 && len(r.crashes) > r.h.cfg.MaxRestarts {
		if !r.h.giveUp(ctx, len(r.crashes)) {
			return stop
		}
		r.reset()
		r.h.life.countRestart()
		r.h.cfg.Metrics.Restart(metrics.Requested)
		return startNow
	}
	return backOff
}

// wait is the backoff before the next start; false means ctx ended first.
func (r *restarts) wait(ctx context.Context) bool {
	h := r.h
	h.life.setState(StateBackoff)
	delay := jitter(r.backoff)
	h.log.Info("restarting server", "in", delay.Round(time.Millisecond))
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-h.life.kick:
	case <-ctx.Done():
		return false
	}
	r.backoff = min(2*r.backoff, h.cfg.RestartBackoffMax)
	h.life.countRestart()
	h.cfg.Metrics.Restart(h.ended)
	return true
}

// shortage reports whether a start failed for want of the machine's
// resources (descriptors, memory, processes), which passes by itself.
func shortage(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EAGAIN} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// shortageCause is err naming the resource the machine lacked, when it is
// a shortage: "out of file descriptors (EMFILE): start x: stdin pipe: ...".
func shortageCause(err error) error {
	for _, c := range []struct {
		errno syscall.Errno
		what  string
	}{
		{syscall.EMFILE, "out of file descriptors (EMFILE)"},
		{syscall.ENFILE, "the system is out of file descriptors (ENFILE)"},
		{syscall.ENOMEM, "out of memory (ENOMEM)"},
		{syscall.EAGAIN, "out of processes or memory (EAGAIN)"},
	} {
		if errors.Is(err, c.errno) {
			return fmt.Errorf("%s: %w", c.what, err)
		}
	}
	return err
}

// cannotExec reports whether a start failed because the command cannot be
// run at all (not found, not executable): every request waiting for the
// server is refused at once, until a start succeeds.
func cannotExec(err error) bool {
	var pe *os.PathError
	if errors.Is(err, exec.ErrNotFound) {
		return true
	}
	return errors.As(err, &pe) && pe.Op == "fork/exec" && !shortage(err)
}

// giveUp puts the server in the failed state until Restart is called; false
// means ctx ended first.
func (h *Hub) giveUp(ctx context.Context, crashes int) bool {
	why := h.life.fail(crashes, h.cfg.RestartWindow)
	h.log.Error("server failed; not restarting it until `mcpmux restart`", "why", why)
	select {
	case <-h.life.kick:
		h.log.Info("restarting a failed server on request")
		return true
	case <-ctx.Done():
		return false
	}
}

// Restart bounces a running server (its sessions stay attached) or brings a
// failed one back.
func (h *Hub) Restart() {
	notify(h.life.kick)
}

// waitDemand waits, idle, for a session to want the server; false means
// ctx ended first.
func (h *Hub) waitDemand(ctx context.Context) bool {
	for {
		if h.sessions.using() > 0 {
			return true
		}
		select {
		case <-h.life.demand: // look again: the session may have gone
		case <-h.life.kick:
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
		n := h.sessions.using()
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
		case <-h.life.kick:
			h.log.Info("restarting server on request")
			stop()
			return endRestart
		case <-h.life.sessions:
			armIdle()
		case <-idleC:
			idle, idleC = nil, nil
			if h.sessions.using() == 0 {
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
		var err error
		if info := h.describedServer(); info != nil && info.era == eraModern {
			_, err = h.call(cctx, proc, "server/discover", h.discoverParams()) // the modern revision has no ping
		} else {
			_, err = h.call(cctx, proc, "ping", nil)
		}
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

// startOnce starts a process and opens it. On success the process is
// published and sessions may use it.
func (h *Hub) startOnce(ctx context.Context) (process, error) {
	h.life.setState(StateStarting)
	proc, err := h.cfg.start(h.life.upstream(), &upstreamHandler{h: h})
	if err != nil {
		return nil, err
	}
	h.life.starting(proc) // for the hub's own requests; sessions wait for publish
	stop := logStarting(h.log, proc, h.cfg.StartTimeout)
	info, err := h.open(ctx, proc)
	stop()
	if err != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.stopTimeout())
		proc.Stop(sctx)
		cancel()
		h.exited(proc)
		return nil, err // it names the request that failed: "initialize: server exited (exit status 1)"
	}
	prev, remembered := h.life.publish(info)
	h.log.Info("server ready", "pid", proc.Pid(), "protocol", info.version, "era", info.era, "name", info.serverName)
	h.memo.keep(prev, info)
	changed := h.memo.refresh(ctx, info, func(ctx context.Context, method string) (*jsonrpc.Message, error) {
		return h.call(ctx, proc, method, nil)
	})
	switch {
	case prev == nil || remembered && prev.same(info):
		// The sessions answered from Memory were told the truth, but for
		// the lists that changed.
		if len(changed) > 0 {
			h.log.Info("server lists otherwise than remembered; telling its sessions", "lists", changed)
			h.listsChanged(info, changed)
		}
	case remembered:
		h.log.Info("server describes itself otherwise than remembered; telling its sessions")
		h.afterRestart(prev, info)
	default:
		h.afterRestart(prev, info)
	}
	return proc, nil
}

// afterRestart keeps the sessions on a server that came back the same, and
// tells them to refresh their lists; a server that came back different closes
// them, because a legacy client cannot renegotiate mid-session.
func (h *Hub) afterRestart(prev, cur *serverInfo) {
	if why := prev.incompatible(cur); why != "" {
		h.log.Warn("server came back changed; closing its sessions", "why", why)
		h.closeAll(fmt.Errorf("server %s restarted with %s", h.cfg.Name, why))
		return
	}
	h.replay(cur)
	h.listsChanged(cur, []string{"tools", "prompts", "resources"})
}

// listsChanged tells every session that the lists of kinds ("tools",
// "prompts", "resources") the server offers may have changed.
func (h *Hub) listsChanged(cur *serverInfo, kinds []string) {
	for _, kind := range kinds {
		if cur.has(kind) {
			n, _ := jsonrpc.Notification("notifications/"+kind+"/list_changed", nil)
			h.broadcast(n)
			if m, err := jsonrpc.Parse(n); err == nil {
				h.down.toLocalListens(m)
			}
		}
	}
}

// replay gives a restarted server the state the sessions hold: their
// subscriptions and the log level (a modern server: mcpmux's listen for the
// legacy sessions; the modern sessions open their own again, theirs having
// ended with the process).
func (h *Hub) replay(cur *serverInfo) {
	if cur.era == eraModern {
		h.up.syncOwnedListen()
		return
	}
	proc := h.life.current()
	for _, uri := range h.subs.uris() {
		h.fire(proc, "resources/subscribe", map[string]string{"uri": uri})
	}
	if level := h.levels.last(); level != "" {
		h.fire(proc, "logging/setLevel", map[string]string{"level": level})
	}
}

// exited retires a process: every request in flight on it gets an error now.
func (h *Hub) exited(proc process) {
	exit := proc.Exit()
	h.life.retire(proc, exit.String(), proc.StderrTail())
	h.calls.wakeAll()
	h.forgetServerReqs()
	h.tasks.reset() // the new process knows none of them
	h.sessions.roots.forget()
	h.up.owned.lost()

	reason, code := jsonrpc.ReasonUpstreamExited, "server exited"
	if exit.Reason == "stalled" {
		reason, code = jsonrpc.ReasonUpstreamStalled, "server stalled"
	}
	routes := h.flights.reset()
	if len(routes) > 0 {
		h.log.Warn("failing the requests in flight", "exit", exit.String(), "requests", len(routes))
	}
	for up, r := range routes {
		if r.Session == 0 {
			continue
		}
		e := &jsonrpc.Error{
			Code:    jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("%s (%s) with the request in flight", code, exit.String()),
			Reason:  reason,
			Extra:   map[string]any{"exit": exit.String()},
		}
		if isParkedID(r.ID) {
			h.settle(dataOf(r))
			h.flights.parkedEnded(up, nil, e) // its retry is answered with e
			continue
		}
		h.fail(r, e)
	}
}

// stopTimeout bounds a stop: both graces and a margin.
func (h *Hub) stopTimeout() time.Duration {
	up := h.life.upstream()
	return max(up.StdinGrace, 0) + max(up.TermGrace, 0) + 5*time.Second
}

// Reconfigure changes how the server is started (command, arguments,
// environment, folder, stderr, graces, output limits) and restarts it; the
// sessions stay attached, as they do over any restart. The size limit of
// messages is not among what it changes.
func (h *Hub) Reconfigure(up upstream.Config) {
	h.life.reconfigure(up)
	h.log.Info("configuration changed; restarting the server")
	h.Restart()
}

// jitter spreads a delay over [d/2, d) so that servers restarted together do
// not return in lockstep.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// logStarting logs, every 10 s (or a third of start_timeout, if that is
// shorter) until stop is called, that the server is still starting, with
// its last stderr line: a first start that downloads the server shows
// that it moves. stop waits for the goroutine it starts.
func logStarting(log *slog.Logger, proc process, startTimeout time.Duration) (stop func()) {
	every := min(10*time.Second, startTimeout/3)
	began := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				last := "none"
				if tail := proc.StderrTail(); len(tail) > 0 {
					last = tail[len(tail)-1]
				}
				log.Info(fmt.Sprintf("still starting (%s), last stderr: %s", time.Since(began).Round(time.Second), last), "pid", proc.Pid())
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
