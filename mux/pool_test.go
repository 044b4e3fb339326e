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

	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/upstream"
)

// TestIsolatedPoolKeepsOneProcessPerClient: with share = "isolated", the
// sessions of one request each (2026-07-28 over HTTP) that name one client
// share that client's process, which outlives each request and stops
// IdleTimeout after the client's last; another client, and a request that
// names none, get processes of their own.
func TestIsolatedPoolKeepsOneProcessPerClient(t *testing.T) {
	srv := newFakeServer()
	const idle = 300 * time.Millisecond
	pool := NewPool(Config{Name: "iso", IdleTimeout: idle, Upstream: upstream.Config{MaxMessageBytes: 1 << 20}, start: srv.start, IDs: new(atomic.Uint64)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { pool.Run(ctx) })
	h := &harness{t: t, srv: srv, ctx: ctx}
	request := func(client, id string) {
		t.Helper()
		c := h.pipe(func(conn net.Conn) {
			pool.Serve(ctx, session.NewStream(conn, 1<<20), session.Peer{Transport: "http", OneRequest: true, Client: client})
		})
		c.send(modern(id, "tools/call", `{"name":"echo"}`, "M", `{}`))
		m := c.recv()
		require.Equal(t, id, string(m.ID), "%s", m.Frame)
		require.Nil(t, m.Error, "%s", m.Frame)
		c.conn.Close()
	}
	for _, id := range []string{"1", "2", "3"} {
		request("a", id)
	}
	assert.Equal(t, 1, srv.started(), "one process for three requests of client a")
	request("b", "4")
	assert.Equal(t, 2, srv.started(), "client b has its own")
	request("", "5")
	assert.Equal(t, 3, srv.started(), "a request that names no client has its own")
	request("a", "6")
	assert.Equal(t, 3, srv.started(), "client a's process is still its")
	eventually(t, "the clients' processes outlive their requests, the other goes with its", func() bool { return len(pool.running()) == 2 })

	start := time.Now()
	eventually(t, "every process stopped", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		for _, p := range srv.procs {
			if !p.closed.Load() {
				return false
			}
		}
		return true
	})
	assert.GreaterOrEqual(t, time.Since(start), idle/2, "not before the idle time")
	assert.Empty(t, pool.running())
	request("a", "7")
	assert.Equal(t, 4, srv.started(), "client a's next request starts a process again")
	cancel()
	h.wg.Wait()
}
