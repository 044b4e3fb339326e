//go:build unix

package socket_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/socket"
)

// TestProgressConnSlowReader: a peer that reads slowly, each read within
// the stall timeout but the whole write taking many of them, gets all of
// it; one that stops reading makes the write fail with ErrPeerStalled.
func TestProgressConnSlowReader(t *testing.T) {
	const stall = 100 * time.Millisecond
	server, client := pipePair(t)
	pc := socket.ProgressConn(server, stall)
	payload := bytes.Repeat([]byte("x"), 32<<10)
	got := make(chan int, 1)
	go func() { // waited for below
		n := 0
		tick := time.NewTicker(stall / 3) // a slow reader: 1 KiB at a time
		defer tick.Stop()
		buf := make([]byte, 1<<10)
		for n < len(payload) {
			<-tick.C
			m, err := client.Read(buf)
			n += m
			if err != nil {
				break
			}
		}
		got <- n
	}()
	began := time.Now()
	n, err := pc.Write(payload)
	require.NoError(t, err, "a slow reader is not a stalled one")
	assert.Equal(t, len(payload), n)
	assert.Equal(t, len(payload), <-got)
	assert.Greater(t, time.Since(began), 5*stall, "the write took many stall timeouts")

	began = time.Now()
	n, err = pc.Write(payload) // no one reads now
	assert.ErrorIs(t, err, socket.ErrPeerStalled)
	assert.Zero(t, n)
	assert.Less(t, time.Since(began), 20*stall)
}

// TestServeYamuxSilentClient: a yamux client that reads but never sends a
// byte, not even the answer to a ping, is closed with ErrPeerStalled; a
// live one that makes no call, but answers pings, keeps its connection
// past many times that.
func TestServeYamuxSilentClient(t *testing.T) {
	cfg := socket.YamuxConfig{StallTimeout: 100 * time.Millisecond, PingInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	serve := func(server net.Conn) chan error {
		done := make(chan error, 1)
		go func() { // waited for by the callers
			done <- socket.ServeYamux(t.Context(), server, cfg, func(_ context.Context, st net.Conn, _ uint32) { st.Close() })
		}()
		return done
	}

	server, client := unixPair(t)
	done := serve(server)
	go io.Copy(io.Discard, client) // ends when the server closes
	select {
	case err := <-done:
		assert.ErrorIs(t, err, socket.ErrPeerStalled)
	case <-time.After(10 * time.Second):
		t.Fatal("a silent client was not closed")
	}

	server, client = unixPair(t)
	done = serve(server)
	sess, err := socket.DialYamux(client, 0)
	require.NoError(t, err)
	select {
	case err := <-done:
		t.Fatalf("a live client was closed: %v", err)
	case <-time.After(20 * (cfg.StallTimeout + cfg.PingInterval)):
	}
	sess.Close()
	select {
	case err := <-done:
		assert.NoError(t, err, "the client's hang-up")
	case <-time.After(10 * time.Second):
		t.Fatal("ServeYamux did not return")
	}
}

// TestWaiting: a byte waiting on a socket is seen without being read, even
// past the connection's read deadline; none, or a conn that is no socket,
// reports false.
func TestWaiting(t *testing.T) {
	server, client := unixPair(t)
	assert.False(t, socket.Waiting(server), "nothing sent yet")
	require.NoError(t, server.SetReadDeadline(time.Unix(1, 0)))
	_, err := client.Write([]byte("{"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return socket.Waiting(server) }, 5*time.Second, time.Millisecond)
	assert.True(t, socket.Waiting(server), "still there: not read")
	p, _ := pipePair(t)
	assert.False(t, socket.Waiting(p))
}
