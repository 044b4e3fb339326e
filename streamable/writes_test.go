package streamable_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/streamable"
)

// countingListener counts the writes on every connection it accepts.
type countingListener struct {
	net.Listener
	writes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, writes: &l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A request answered at once leaves with its headers and the end of the
// response in one write; one that takes longer gets its headers after
// the header delay, before its answer.
func TestQuickAnswerInOneWrite(t *testing.T) {
	streamable.SetHeaderDelay(t.Cleanup, time.Second) // longer than any quick answer takes here
	hub := &hubEndpoint{gate: make(chan struct{}), ended: make(chan struct{}, 16)}
	h := streamable.New(streamable.Config{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		h.Serve(rw, r, "demo", hub)
	}))
	ln := &countingListener{Listener: srv.Listener}
	srv.Listener = ln
	srv.Start()
	tr := &http.Transport{}
	hs := &httpServer{base: srv.URL + "/servers/demo", hub: hub, hc: &http.Client{Transport: tr}, h: h}
	t.Cleanup(func() { h.Close(); srv.Close(); tr.CloseIdleConnections() })

	hs.initialize(t)
	assert.Equal(t, int64(1), ln.writes.Load(), "the initialize answer: headers, event and end in one write")

	streamable.SetHeaderDelay(t.Cleanup, 20*time.Millisecond)
	id := hs.initialize(t)
	before := ln.writes.Load()
	resp := hs.do(t, "POST", `{"jsonrpc":"2.0","id":7,"method":"hold"}`, "Mcp-Session-Id: "+id, "MCP-Protocol-Version: 2025-06-18")
	require.Equal(t, http.StatusOK, resp.StatusCode, "a held request's headers came before its answer")
	hub.gate <- struct{}{}
	evs := readEvents(t, resp, -1)
	require.Len(t, evs, 1)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":7,"result":"released"}`, evs[0].data)
	assert.Equal(t, int64(2), ln.writes.Load()-before, "the held request: its headers, then its answer with the end")
}
