package mux

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	h.session("2025-11-25")
	assert.Equal(t, 2, len(h.srv.messages("initialize")), "started again for the next session")
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
