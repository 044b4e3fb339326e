package session_test

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
)

// TestWebSocketFramesOfEverySize: messages of every header form (7-bit,
// 16-bit and 64-bit lengths, and at each boundary) written one by one, as a
// gathered run, and by TryWrite, reach a gorilla/websocket client whole, as
// text, in order.
func TestWebSocketFramesOfEverySize(t *testing.T) {
	tr, client := wsPair(t, session.WebSocketConfig{})
	sizes := []int{0, 1, 125, 126, 127, 4095, 4096, 65535, 65536, 70000, 1 << 20}
	var want [][]byte
	for i, n := range sizes {
		want = append(want, bytes.Repeat([]byte{'a' + byte(i)}, n))
	}

	// read takes the messages of want from the client, in order.
	read := func(label string) error {
		client.SetReadDeadline(time.Now().Add(10 * time.Second))
		for i, w := range want {
			typ, got, err := client.ReadMessage()
			switch {
			case err != nil:
				return fmt.Errorf("%s: message %d: %w", label, i, err)
			case typ != websocket.TextMessage:
				return fmt.Errorf("%s: message %d is of type %d", label, i, typ)
			case !bytes.Equal(w, got):
				return fmt.Errorf("%s: message %d: %d bytes, want %d of %q", label, i, len(got), len(w), w[:min(len(w), 1)])
			}
		}
		return nil
	}

	var frames []outbox.Frame
	for _, w := range want {
		require.NoError(t, tr.WriteFrames([]outbox.Frame{{Data: w}}))
		frames = append(frames, outbox.Frame{Data: w}, outbox.Frame{Tag: 1, Last: true}) // an end marker writes nothing
	}
	require.NoError(t, read("one by one"))

	require.NoError(t, tr.WriteFrames(frames))
	require.NoError(t, read("gathered"))

	// A TryWrite of all of them may take part (the socket buffer is
	// smaller than the run): the rest then goes out first on the next
	// write, here an empty one.
	done := make(chan error, 1)
	go func() { done <- read("tried") }() // returns by its read deadline
	ok, more := tr.TryWrite(frames)
	require.True(t, ok, "TryWrite wrote nothing to an idle connection")
	if more {
		require.NoError(t, tr.WriteFrames(nil))
	}
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("the client did not get the tried messages")
	}
}

// TestWebSocketPingAfterPartialTryWrite: a control frame written while a
// partial TryWrite's rest is pending goes out after that rest, never inside
// a message: the client reads the message whole, then its handler sees the
// pong to its ping.
func TestWebSocketPingAfterPartialTryWrite(t *testing.T) {
	tr, client := wsPair(t, session.WebSocketConfig{})
	big := []byte(strings.Repeat("x", 8<<20)) // past any socket buffer
	ok, more := tr.TryWrite([]outbox.Frame{{Data: big}})
	require.True(t, ok)
	require.True(t, more, "8 MiB was taken whole by a socket nobody reads")

	pong := make(chan string, 1)
	client.SetPongHandler(func(data string) error { pong <- data; return nil })
	require.NoError(t, client.WriteControl(websocket.PingMessage, []byte("p1"), time.Now().Add(5*time.Second)))

	// The server reads the ping (answering it from its read goroutine)
	// while the client reads the message. Both readers end when the
	// transport and the client are closed, at the end.
	var wg sync.WaitGroup
	defer wg.Wait()
	defer client.Close()
	defer tr.Close()
	wg.Go(func() { tr.ReadFrame() })
	client.SetReadDeadline(time.Now().Add(15 * time.Second))
	done := make(chan error, 1)
	wg.Go(func() {
		typ, got, err := client.ReadMessage()
		if err == nil && (typ != websocket.TextMessage || !bytes.Equal(got, big)) {
			err = assert.AnError
		}
		done <- err
	})
	require.NoError(t, tr.WriteFrames(nil), "the rest of the message")
	select {
	case err := <-done:
		require.NoError(t, err, "the message, whole")
	case <-time.After(20 * time.Second):
		t.Fatal("no message")
	}
	// The pong is read by the client's next read, with a deadline of its
	// own: on a loaded machine the 8 MiB message can take most of the first.
	client.SetReadDeadline(time.Now().Add(15 * time.Second))
	wg.Go(func() { client.ReadMessage() })
	select {
	case got := <-pong:
		assert.Equal(t, "p1", got)
	case <-time.After(10 * time.Second):
		t.Fatal("no pong")
	}
}

// TestWebSocketSlowClientIsNotDead: a client that reads a large message
// slowly, never pausing as long as WriteTimeout but taking many times it
// in all (a starved machine), gets the whole message; one that stops
// reading still fails the write.
func TestWebSocketSlowClientIsNotDead(t *testing.T) {
	const timeout = 150 * time.Millisecond
	tr, client := wsPair(t, session.WebSocketConfig{WriteTimeout: timeout})
	big := []byte(strings.Repeat("y", 4<<20))
	read := make(chan int, 1)
	go func() { // waited for below
		n := 0
		buf := make([]byte, 256<<10)
		tick := time.NewTicker(timeout / 3) // a slow reader: 256 KiB a tick
		defer tick.Stop()
		for n < len(big) {
			<-tick.C
			m, err := client.NetConn().Read(buf)
			n += m
			if err != nil {
				break
			}
		}
		read <- n
	}()
	began := time.Now()
	require.NoError(t, tr.WriteFrames([]outbox.Frame{{Data: big}}), "a slow client is not a dead one")
	n := <-read
	assert.GreaterOrEqual(t, n, len(big), "the whole message reached the client")
	assert.Greater(t, time.Since(began), 2*timeout, "the write took longer than one timeout")

	// Now no one reads: the write fails once no byte moves for the timeout.
	// 48 MiB, past what loopback TCP may buffer once the first message grew
	// its windows (Linux's tcp_rmem goes up to 32 MiB, tcp_wmem to 4 MiB):
	// 8 MiB sometimes all fit, and the write then rightly succeeded.
	stuck := make([]outbox.Frame, 12)
	for i := range stuck {
		stuck[i].Data = big
	}
	err := tr.WriteFrames(stuck)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	assert.True(t, ne.Timeout())
}
