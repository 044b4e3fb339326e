package mux

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/upstream"
)

// State is where a hub's server is in its life.
type State string

const (
	StateIdle     State = "idle" // not started yet (lazy), or stopped for want of sessions
	StateStarting State = "starting"
	StateReady    State = "ready"
	StateBackoff  State = "backoff" // waiting to restart after a crash
	StateFailed   State = "failed"  // crashed too often; waits for `mcpmux restart`
	StateStopped  State = "stopped"
)

// life is the server process as the sessions see it: which process serves,
// whether it is ready, what it said of itself, and how it last ended.
// Invariant: ready is closed exactly while proc is an opened process and
// info describes it; when that process goes, ready is replaced.
type life struct {
	mu    sync.Mutex
	proc  process
	state State
	ready chan struct{}
	info  *serverInfo // the last opened process's; kept across restarts
	// remembered: info came from Memory, and no process has been opened
	// since the daemon started.
	remembered bool
	restarts   int
	lastExit   string
	started    time.Time
	began      time.Time       // when the current start began
	failedAt   string          // why the server is failed, for its errors
	noExec     string          // why the command cannot be run at all, since the last start; "" when it can
	shortage   string          // why the last start failed, when the machine lacked resources; "" after a start
	up         upstream.Config // how to start the server; reconfigure replaces it
	stderr     []string        // the last process's stderr tail, once it has gone
	changed    chan struct{}   // closed and replaced at each change of state: waiting sessions look again

	// Wake-ups of Run, each 1-buffered.
	kick     chan struct{} // restart now
	demand   chan struct{} // a session wants the server
	sessions chan struct{} // a session came or went
}

func newLife(up upstream.Config, lazy bool) life {
	state := StateStarting
	if lazy {
		state = StateIdle
	}
	return life{
		up:       up,
		state:    state,
		ready:    make(chan struct{}),
		changed:  make(chan struct{}),
		kick:     make(chan struct{}, 1),
		demand:   make(chan struct{}, 1),
		sessions: make(chan struct{}, 1),
	}
}

func (l *life) setState(s State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s == StateStarting && l.state != StateStarting || l.began.IsZero() {
		l.began = time.Now()
	}
	l.state = s
	l.changedLocked()
}

// changedLocked wakes the sessions waiting for the server, so that they
// look at it again.
func (l *life) changedLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// current is the running process, opened or not; nil when there is none.
func (l *life) current() process {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.proc
}

// serving is the process and its description when the server is ready.
func (l *life) serving() (process, *serverInfo, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.proc, l.info, l.ready
}

// described is the cached description of the server; nil before the first
// process was opened.
func (l *life) described() *serverInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.info
}

// starting records a new process that is being opened: mcpmux's own
// requests may use it, the sessions wait for publish.
func (l *life) starting(proc process) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.proc = proc
}

// remember takes a description from Memory, before any start.
func (l *life) remember(info *serverInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.info, l.remembered = info, true
}

// publish makes an opened process the one sessions use, and returns the
// description of the one before (nil at the first start, unless Memory
// had one: remembered says so).
func (l *life) publish(info *serverInfo) (prev *serverInfo, remembered bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev, remembered = l.info, l.remembered
	l.remembered = false
	l.info = info
	l.state = StateReady
	l.started = time.Now()
	l.noExec, l.shortage = "", ""
	close(l.ready)
	l.changedLocked()
	return prev, remembered
}

// readyNow is the common case, on every request: the server is up.
func (l *life) readyNow() (process, *serverInfo, bool) {
	proc, info, ready := l.serving()
	return proc, info, isClosed(ready) && proc != nil && !proc.Closed()
}

// describedNow is description's answer when it needs no waiting.
func (l *life) describedNow() (*serverInfo, bool) {
	w := l.look()
	if w.info == nil || w.state == StateFailed || w.noExec != "" {
		return nil, false
	}
	if w.state == StateIdle {
		notify(l.demand)
	}
	return w.info, true
}

// description is what a session's initialize or server/discover is
// answered from: the ready server's; while it starts (or restarts), the
// last one it gave, or Memory's, at once (the session's requests wait for
// the server as before, and a lazy server is asked to start); else the
// server's once it is ready. A server that is failed or cannot be
// started at all is refused as in waitReady.
func (l *life) description(ctx context.Context, name string, timeout startWait) (*serverInfo, error) {
	if info, ok := l.describedNow(); ok {
		return info, nil
	}
	_, info, err := l.waitReady(ctx, name, timeout)
	return info, err
}

// retire forgets a process that has ended; tail is its last stderr lines.
func (l *life) retire(proc process, exit string, tail []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.proc == proc {
		l.proc = nil
	}
	select {
	case <-l.ready:
		l.ready = make(chan struct{})
	default:
	}
	l.lastExit = exit
	l.stderr = tail
	l.changedLocked()
}

// startFailed records why a start did not succeed; noExec: the command
// cannot be run at all, so waiting for it is pointless; short: the machine
// lacked resources, so the start is tried again and status says why.
func (l *life) startFailed(err error, noExec, short bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastExit = err.Error()
	if noExec {
		l.noExec = err.Error()
	}
	if short {
		l.shortage = err.Error()
	}
	l.changedLocked()
}

func (l *life) countRestart() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.restarts++
}

// fail puts the server in the failed state and returns the reason.
func (l *life) fail(crashes int, window time.Duration) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state = StateFailed
	l.failedAt = fmt.Sprintf("it crashed %d times within %s (last exit: %s)", crashes, window, l.lastExit)
	l.changedLocked()
	return l.failedAt
}

// upstream is how the next process starts.
func (l *life) upstream() upstream.Config {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up
}

// reconfigure changes how processes start; the name, logger and message
// size limit stay.
func (l *life) reconfigure(up upstream.Config) {
	l.mu.Lock()
	defer l.mu.Unlock()
	up.Name, up.Logger, up.MaxMessageBytes = l.up.Name, l.up.Logger, l.up.MaxMessageBytes
	l.up = up
}

// waitState is what a waiting session looks at on each round.
type waitState struct {
	ready    <-chan struct{}
	changed  <-chan struct{}
	proc     process
	info     *serverInfo
	state    State
	lastExit string
	failedAt string
	noExec   string
	began    time.Time
}

func (l *life) look() waitState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return waitState{l.ready, l.changed, l.proc, l.info, l.state, l.lastExit, l.failedAt, l.noExec, l.began}
}

// startWait is how long a session waits for a starting server, and the
// key that says so.
type startWait struct {
	d   time.Duration
	key string
}

// startWait is start_timeout, or first_start_timeout while the server has
// never been described: nothing is remembered of it and no start has
// finished, so its first start may be a download.
func (h *Hub) startWait() startWait {
	if _, ok := h.life.describedNow(); !ok && h.cfg.FirstStartTimeout > h.cfg.StartTimeout {
		return startWait{h.cfg.FirstStartTimeout, "first_start_timeout"}
	}
	return startWait{h.cfg.StartTimeout, "start_timeout"}
}

// waitReady waits until a server is ready and returns it with its
// description. A failed server, or none ready within timeout, is a
// *jsonrpc.Error with reason upstream_unavailable.
func (l *life) waitReady(ctx context.Context, name string, timeout startWait) (process, *serverInfo, error) {
	if proc, info, ok := l.readyNow(); ok {
		return proc, info, nil
	}
	t := time.NewTimer(timeout.d)
	defer t.Stop()
	for {
		w := l.look()
		// A process that takes no more input is ending (it crashed, and
		// is winding down): wait for the next one, as for a start.
		// Once it is gone, retire says so through changed.
		var ending <-chan struct{}
		if w.proc != nil && w.proc.Closed() {
			if ending = w.proc.Done(); isClosed(ending) {
				ending = nil
			}
		} else if isClosed(w.ready) && w.proc != nil {
			return w.proc, w.info, nil
		}
		switch {
		case w.state == StateFailed:
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("server %s is failed: %s; `mcpmux restart %s` starts it again", name, w.failedAt, name), Reason: jsonrpc.ReasonUpstreamUnavailable, Extra: map[string]any{"last_exit": w.lastExit}}
		case w.noExec != "":
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("server %s cannot start: %s", name, w.noExec), Reason: jsonrpc.ReasonUpstreamUnavailable, Extra: map[string]any{"last_exit": w.lastExit}}
		case w.state == StateIdle:
			notify(l.demand)
		}
		ready := w.ready
		if w.proc != nil && w.proc.Closed() {
			ready = nil // closed for the ending process: look again once it is gone
		}
		select {
		case <-ready:
		case <-w.changed:
		case <-ending:
		case <-t.C:
			msg := fmt.Sprintf("server %s is not ready within %s (%s)", name, timeout.key, timeout.d)
			if !w.began.IsZero() && w.state == StateStarting {
				msg += fmt.Sprintf("; it has been starting for %s", time.Since(w.began).Round(time.Second))
			}
			if w.lastExit != "" {
				msg += " (last exit: " + w.lastExit + ")"
			}
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg, Reason: jsonrpc.ReasonUpstreamUnavailable}
		case <-ctx.Done():
			return nil, nil, context.Cause(ctx)
		}
	}
}

// status fills the process's part of a Status.
func (l *life) status(s *Status) {
	proc := l.statusLocked(s)
	if proc != nil {
		s.Stderr = proc.StderrTail() // the process's own lock: not under ours
	}
}

func (l *life) statusLocked(s *Status) process {
	l.mu.Lock()
	defer l.mu.Unlock()
	s.State, s.Restarts, s.LastExit, s.Stderr = l.state, l.restarts, l.lastExit, l.stderr
	s.Shortage = l.shortage
	switch {
	case l.proc != nil && l.state == StateReady:
		s.Pid = l.proc.Pid()
		s.Uptime = time.Since(l.started).Round(time.Second).String()
	case l.proc != nil && l.state == StateStarting:
		s.Pid = l.proc.Pid()
		s.StartingFor = time.Since(l.began).Round(time.Second).String()
	}
	if l.info != nil {
		s.Protocol, s.Era = l.info.version, l.info.era.String()
	}
	return l.proc
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// notify wakes a 1-buffered channel without blocking.
func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
