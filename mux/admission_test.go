package mux

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// Twenty sessions send a call each at once to a server whose stdin holds
// four frames and which reads none yet: the sixteen the queue cannot take
// wait for room (all twenty stay in flight), none is refused with "write
// queue full", and once the server reads every session gets its own answer.
func TestSessionsWaitForRoomInTheWriteQueue(t *testing.T) {
	const n, room = 20, 4
	srv := newFakeServer()
	srv.inCap = room
	srv.callGate = make(chan struct{})
	h := newHarnessOn(t, srv, nil)
	clients := make([]*testClient, n)
	for i := range clients {
		clients[i] = h.session("2025-11-25")
	}
	for i, c := range clients {
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"c%d","method":"tools/call","params":{"name":"echo"}}`, i))
	}
	eventually(t, "every call in flight, most waiting for room", func() bool { return h.Status().Inflight == n })
	close(srv.callGate)
	for i, c := range clients {
		m := c.recv()
		assert.Equal(t, fmt.Sprintf(`"c%d"`, i), string(m.ID))
		assert.Equal(t, jsonrpc.KindResult, m.Kind, "%s", m.Frame)
	}
}

// A session that leaves while it waits for room in the write queue is gone
// at once: its wait ends with the client, not with the server's reading.
func TestSessionWaitingForRoomLeaves(t *testing.T) {
	const room = 2
	srv := newFakeServer()
	srv.inCap = room
	srv.callGate = make(chan struct{})
	h := newHarnessOn(t, srv, nil)
	var clients []*testClient
	for i := range room + 2 {
		c := h.session("2025-11-25")
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"c%d","method":"tools/call","params":{"name":"echo"}}`, i))
		clients = append(clients, c)
	}
	eventually(t, "every call in flight", func() bool { return h.Status().Inflight == room+2 })
	for _, c := range clients[room+1:] { // the last one: it waits for room
		c.conn.Close()
	}
	eventually(t, "the waiting session gone", func() bool { return h.Status().Sessions == room+1 })
	close(srv.callGate)
	for i, c := range clients[:room+1] {
		m := c.recv()
		assert.Equal(t, fmt.Sprintf(`"c%d"`, i), string(m.ID))
		assert.Equal(t, jsonrpc.KindResult, m.Kind, "%s", m.Frame)
	}
}

// Under server_requests = "serialize" one interactive request at a time
// holds the turn. Sessions that keep calling while the server crashes
// again and again have some of their requests failed by the crashes, in
// every phase of being forwarded; none may leave the turn held for good:
// afterwards every session's next call is answered.
func TestCrashesNeverLeaveTheTurnHeld(t *testing.T) {
	const sessions, crashes = 8, 30
	h := newHarness(t, func(c *Config) {
		c.ServerRequests = ServerRequestsSerialize
		c.StartTimeout = 10 * time.Second
		c.RestartBackoffMax = 5 * time.Millisecond
		c.MaxRestarts = NoLimit // it crashes over and over
	})
	clients := make([]*testClient, sessions)
	for i := range clients {
		clients[i] = h.session("2025-11-25")
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.conn.Write([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":"s%d-%d","method":"tools/call","params":{"name":"echo"}}`+"\n", i, n))); err != nil {
					return
				}
				if _, err := c.recvFrame(); err != nil {
					return
				}
			}
		})
	}
	for range crashes {
		before := h.srv.started()
		h.srv.current().crash("exited")
		eventually(t, "a new process", func() bool { return h.srv.started() > before && h.Status().State == StateReady })
	}
	close(stop)
	wg.Wait()
	for i, c := range clients {
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"last%d","method":"tools/call","params":{"name":"echo"}}`, i))
	}
	for i, c := range clients {
		m := c.recv()
		for string(m.ID) != fmt.Sprintf(`"last%d"`, i) { // an answer of the loop may come first
			m = c.recv()
		}
		assert.Equal(t, jsonrpc.KindResult, m.Kind, "session %d: %s", i, m.Frame)
	}
}
