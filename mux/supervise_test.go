package mux

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/upstream"
)

func TestCrashLoopFailsThenRestartRevives(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.MaxRestarts = 3
		c.RestartWindow = time.Minute
	})
	c := h.session("2025-11-25")
	h.srv.set(func(f *fakeServer) { f.crashInit = true })
	h.srv.current().crash("exited")
	eventually(t, "the failed state", func() bool { return h.Status().State == StateFailed })
	assert.Equal(t, 4, len(h.srv.messages("initialize")), "one good start, then 3 restarts that crash; the 4th crash fails it")
	assert.Equal(t, "initialize: server exited (signal: killed)", h.Status().LastExit, "the last exit names the request once")

	start := time.Now()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"echo"}`)
	m := c.recv()
	code, reason := errorOf(t, m)
	assert.Equal(t, []any{-32603, "upstream_unavailable"}, []any{code, reason})
	assert.Contains(t, string(m.Error), "failed")
	assert.Less(t, time.Since(start), time.Second, "refused at once")

	h.srv.set(func(f *fakeServer) { f.crashInit = false })
	h.hub.Restart()
	eventually(t, "ready again", func() bool { return h.Status().State == StateReady })
	c.send(`{"jsonrpc":"2.0","id":2,"method":"echo"}`)
	for {
		m := c.recv()
		if m.Kind == jsonrpc.KindNotification {
			continue // list_changed after the restart
		}
		assert.Equal(t, []any{"2", jsonrpc.KindResult}, []any{string(m.ID), m.Kind})
		break
	}
}

func TestRestartKeepsSessions(t *testing.T) {
	h := newHarness(t, nil)
	c := h.session("2025-11-25")
	pid := h.Status().Pid
	h.hub.Restart()
	eventually(t, "a new process", func() bool { s := h.Status(); return s.State == StateReady && s.Pid != pid })
	c.send(`{"jsonrpc":"2.0","id":"after","method":"echo"}`)
	for {
		m := c.recv()
		if m.Kind == jsonrpc.KindNotification {
			continue
		}
		assert.Equal(t, `"after"`, string(m.ID))
		break
	}
	assert.Equal(t, 1, h.Status().Restarts)
}

func TestChangedServerClosesSessions(t *testing.T) {
	h := newHarness(t, nil)
	c := h.session("2025-11-25")
	h.srv.set(func(f *fakeServer) { f.caps = `{"prompts":{}}` }) // tools gone
	h.srv.current().crash("exited")
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.r.Read()
	require.Error(t, err, "the session is closed")
}

func TestRequestTimeout(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RequestTimeout = 100 * time.Millisecond })
	c := h.session("2025-11-25")
	c.send(`{"jsonrpc":"2.0","id":"slow","method":"hang"}`)
	m := c.recv()
	code, reason := errorOf(t, m)
	assert.Equal(t, []any{`"slow"`, -32603, "timeout"}, []any{string(m.ID), code, reason})
	eventually(t, "the cancellation upstream", func() bool { return len(h.srv.messages("notifications/cancelled")) == 1 })
	up := string(h.srv.messages("hang")[0].ID)
	assert.JSONEq(t, `{"requestId":`+up+`,"reason":"timeout"}`, string(h.srv.messages("notifications/cancelled")[0].Params))
	c.send(`{"jsonrpc":"2.0","id":"fast","method":"echo"}`)
	assert.Equal(t, `"fast"`, string(c.recv().ID))
}

func TestLazyStartAndIdleStop(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Lazy = true
		c.IdleTimeout = 100 * time.Millisecond
	})
	assert.Equal(t, StateIdle, h.Status().State)
	assert.Equal(t, 0, len(h.srv.messages("initialize")), "nothing started before a session")
	c := h.session("2025-11-25")
	c.conn.Close()
	eventually(t, "idle after the last session", func() bool { return h.Status().State == StateIdle })
	h.session("2025-11-25") // answered from the last process's description at once
	eventually(t, "started again for the next session", func() bool { return len(h.srv.messages("initialize")) == 2 })
}

func TestMissedPingsRestart(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.PingInterval = 20 * time.Millisecond
		c.PingFailures = 2
		c.Protocol = ProtocolLegacy // a deaf server would hold each start for the probe's timeout
	})
	h.session("2025-11-25")
	eventually(t, "a ping answered", func() bool { return len(h.srv.messages("ping")) >= 1 })
	h.srv.set(func(f *fakeServer) { f.deaf = true })
	eventually(t, "a restart", func() bool { return len(h.srv.messages("initialize")) == 2 })
	h.srv.set(func(f *fakeServer) { f.deaf = false })
	eventually(t, "ready", func() bool { return h.Status().State == StateReady })
}

func TestIsolatedPoolGivesEachSessionAProcess(t *testing.T) {
	srv := newFakeServer()
	pool := NewPool(Config{Name: "iso", Upstream: upstream.Config{MaxMessageBytes: 1 << 20}, start: srv.start, IDs: new(atomic.Uint64)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { pool.Run(ctx) })
	h := &harness{t: t, srv: srv, ctx: ctx}
	attach := func() *testClient {
		c := h.pipe(func(conn net.Conn) {
			pool.Serve(ctx, session.NewStream(conn, 1<<20), session.Peer{Transport: "test"})
		})
		c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
		require.Equal(t, jsonrpc.KindResult, c.recv().Kind)
		return c
	}
	a, b := attach(), attach()
	assert.Equal(t, 2, len(srv.messages("initialize")), "two processes, each initialized once")
	assert.Equal(t, 2, pool.Status().Sessions)
	a.conn.Close()
	b.conn.Close()
	eventually(t, "both processes stopped", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		for _, p := range srv.procs {
			if !p.closed.Load() {
				return false
			}
		}
		return len(srv.procs) == 2
	})
	eventually(t, "the pool empty", func() bool { return pool.Status().Sessions == 0 })
	cancel()
	h.wg.Wait()
}

func TestReconfigureRestartsWithTheNewConfig(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Upstream.Args = []string{"old"} })
	c := h.session("2025-11-25")
	h.hub.Reconfigure(upstream.Config{Command: "x", Args: []string{"new"}})
	eventually(t, "a start with the new args", func() bool {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		return len(h.srv.lastArgs) == 1 && h.srv.lastArgs[0] == "new" && len(h.srv.procs) == 2
	})
	eventually(t, "ready", func() bool { return h.Status().State == StateReady })
	c.send(`{"jsonrpc":"2.0","id":"after","method":"echo"}`)
	assert.Equal(t, `"after"`, string(c.answer().ID), "the session stayed")
}

// failingStarts makes the first n starts fail with err, then starts the
// fake as usual.
func failingStarts(n int, err error) func(*Config) {
	var calls atomic.Int32
	return func(c *Config) {
		start := c.start
		c.start = func(uc upstream.Config, h upstream.Handler) (process, error) {
			if int(calls.Add(1)) <= n {
				return nil, err
			}
			return start(uc, h)
		}
	}
}

// A command that cannot be run refuses every waiting and new request at
// once, naming the command and the error, instead of making them wait out
// start_timeout.
func TestCommandThatCannotRunIsRefusedAtOnce(t *testing.T) {
	notFound := fmt.Errorf("start fake: %w", &upstream.NotFoundError{Command: "no-such-server", Path: "/usr/bin"})
	h := newHarness(t, func(c *Config) {
		c.StartTimeout = time.Minute
		c.RestartBackoff = time.Hour // it stays refused during the backoff too
		failingStarts(1000, notFound)(c)
	})
	c := h.connect()
	start := time.Now()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	m := c.recv()
	assert.Less(t, time.Since(start), 5*time.Second, "not start_timeout")
	code, reason := errorOf(t, m)
	assert.Equal(t, []any{-32603, "upstream_unavailable"}, []any{code, reason})
	assert.Contains(t, string(m.Error), "no-such-server")
}

// Starts that fail for want of the machine's resources are no crashes:
// however many there are, the server is never failed, and serves once the
// shortage passes.
func TestResourceShortageIsNoCrash(t *testing.T) {
	emfile := fmt.Errorf("start fake: stdin pipe: %w", &os.SyscallError{Syscall: "pipe2", Err: syscall.EMFILE})
	h := newHarness(t, func(c *Config) {
		c.MaxRestarts = 2
		failingStarts(8, emfile)(c)
	})
	s := h.session("2025-11-25")
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`)
	assert.Equal(t, `1`, string(s.answer().ID))
	assert.Equal(t, StateReady, h.Status().State)
}

// A spell of shortage the test ends when it likes: every start fails with
// EMFILE meanwhile, many more times than max_restarts, and status names the
// cause; the server is never failed, and once the spell ends it serves and
// status no longer names one.
func TestShortageSpellShowsItsCauseAndPasses(t *testing.T) {
	emfile := fmt.Errorf("start fake: stdin pipe: %w", &os.SyscallError{Syscall: "pipe2", Err: syscall.EMFILE})
	var short atomic.Bool
	var tries atomic.Int32
	short.Store(true)
	h := newHarness(t, func(c *Config) {
		c.MaxRestarts = 2
		c.RestartWindow = time.Minute
		c.RestartBackoffMax = 20 * time.Millisecond
		c.StartTimeout = time.Minute
		start := c.start
		c.start = func(uc upstream.Config, hd upstream.Handler) (process, error) {
			if short.Load() {
				tries.Add(1)
				return nil, emfile
			}
			return start(uc, hd)
		}
	})
	var states []State
	eventually(t, "ten failed starts", func() bool {
		states = append(states, h.Status().State)
		return tries.Load() >= 10
	})
	st := h.Status()
	assert.NotContains(t, states, StateFailed, "a shortage is no crash")
	assert.Contains(t, st.Shortage, "out of file descriptors (EMFILE)")
	assert.Contains(t, st.Shortage, "pipe2: too many open files")

	c := h.connect()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}`)
	short.Store(false)
	answered := map[string]jsonrpc.Kind{}
	for range 2 {
		m := c.recv()
		answered[string(m.ID)] = m.Kind
	}
	assert.Equal(t, map[string]jsonrpc.Kind{"1": jsonrpc.KindResult, "2": jsonrpc.KindResult}, answered)
	st = h.Status()
	assert.Equal(t, StateReady, st.State)
	assert.Empty(t, st.Shortage, "a start that succeeded ends the shortage")
}

// A session waiting for a server that becomes failed is told at once.
func TestWaitingSessionsHearOfFailure(t *testing.T) {
	srv := newFakeServer()
	srv.crashInit = true
	h := newHarnessOn(t, srv, func(c *Config) {
		c.MaxRestarts = 1
		c.StartTimeout = time.Minute
		c.Protocol = ProtocolLegacy
	})
	c := h.connect()
	start := time.Now()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	m := c.recv()
	assert.Less(t, time.Since(start), 5*time.Second)
	_, reason := errorOf(t, m)
	assert.Equal(t, "upstream_unavailable", reason)
	assert.Contains(t, string(m.Error), "is failed")
}

// start_timeout bounds how long a session waits for a starting server; it
// never kills the server, which may take longer to start (up to
// initialize_timeout) and then serves, started once.
func TestSlowStarterIsNotKilled(t *testing.T) {
	srv := newFakeServer()
	gate := make(chan struct{})
	srv.initGate = gate
	h := newHarnessOn(t, srv, func(c *Config) {
		c.StartTimeout = 100 * time.Millisecond
		c.FirstStartTimeout = 100 * time.Millisecond
		c.Protocol = ProtocolLegacy
	})
	c := h.connect()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	m := c.recv()
	_, reason := errorOf(t, m)
	assert.Equal(t, "upstream_unavailable", reason)
	assert.Contains(t, string(m.Error), "server fake is not ready within start_timeout (100ms); it has been starting for ")
	close(gate)
	eventually(t, "ready", func() bool { return h.Status().State == StateReady })
	c.send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	assert.Equal(t, jsonrpc.KindResult, c.recv().Kind)
	assert.Equal(t, 1, srv.started(), "started once")
}

// TestFirstStartOutlastsStartTimeout: a server never described yet (its
// first start may be a download) is waited for up to first_start_timeout,
// past start_timeout, with its progress in the log; once it has been
// described, start_timeout applies again.
func TestFirstStartOutlastsStartTimeout(t *testing.T) {
	srv := newFakeServer()
	gate := make(chan struct{})
	srv.initGate = gate
	var log testutil.Buffer
	h := newHarnessOn(t, srv, func(c *Config) {
		c.StartTimeout = 300 * time.Millisecond
		c.FirstStartTimeout = time.Minute
		c.Protocol = ProtocolLegacy
		c.Logger = slog.New(slog.NewTextHandler(&log, nil))
	})
	c := h.connect()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	testutil.Until(t, 10*time.Second, "two progress lines", func() bool {
		return strings.Count(log.String(), "still starting (") >= 2
	})
	st := h.Status()
	assert.Equal(t, StateStarting, st.State)
	assert.NotZero(t, st.Pid, "a starting server's pid")
	assert.NotEmpty(t, st.StartingFor, "and how long it has been starting")
	close(gate)
	assert.Equal(t, jsonrpc.KindResult, c.recv().Kind, "the initialize sent at once is served")
	assert.Contains(t, log.String(), "last stderr: ")

	gate2 := make(chan struct{})
	defer close(gate2)
	func() {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		srv.initGate = gate2
	}()
	h.hub.Restart()
	eventually(t, "restarting", func() bool { return h.Status().State != StateReady })
	c2 := h.connect()
	c2.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	require.Equal(t, jsonrpc.KindResult, c2.recv().Kind, "initialize, answered from what the server said of itself")
	c2.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c2.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	m := c2.recv()
	_, reason := errorOf(t, m)
	assert.Equal(t, "upstream_unavailable", reason, "described now: start_timeout applies")
	assert.Contains(t, string(m.Error), "within start_timeout (300ms)")
}
