//go:build unix

package session_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
)

// TestStreamReleasesWrittenFrames: a Stream calls a frame's Release once
// the frame is written, or copied into what a partial TryWrite keeps, and
// never for a frame a refused TryWrite leaves to the queue: that one's
// buffer is still to be written from.
func TestStreamReleasesWrittenFrames(t *testing.T) {
	watchdog(t)
	var released atomic.Int32
	frames := func(sizes ...int) []outbox.Frame {
		var fs []outbox.Frame
		for i, n := range sizes {
			fs = append(fs, outbox.Frame{Data: []byte(`{"i":` + string(rune('0'+i)) + `,"p":"` + strings.Repeat("x", n) + `"}`), Release: func() { released.Add(1) }})
		}
		return fs
	}
	server, client := socketPair(t)
	defer server.Close()
	setSendBuffer(t, server, 4<<10)
	require.NoError(t, server.SetWriteDeadline(time.Now().Add(waitLong)))
	st := session.NewStream(server, 1<<20)

	filler := fillSendBuffer(t, server)
	ok, _ := st.TryWrite(frames(10, 100))
	require.False(t, ok, "TryWrite into a full send buffer")
	assert.Equal(t, int32(0), released.Load(), "a refused TryWrite releases nothing")

	big := frames(100, 1<<20, 10)
	want := len(filler)
	for _, f := range big {
		want += len(f.Data) + 1
	}
	read := readInBackground(t, client, want)
	require.NoError(t, st.WriteFrames(big))
	assert.Equal(t, int32(3), released.Load(), "each written frame released once")
	assert.Len(t, read(), want)

	read = readInBackground(t, client, len(frames(100)[0].Data)+1)
	ok, more := st.TryWrite(frames(100))
	assert.Equal(t, []bool{true, false}, []bool{ok, more}, "TryWrite into an empty send buffer")
	assert.Equal(t, int32(4), released.Load(), "a frame TryWrite wrote is released")
	read()
}

// TestWebSocketReleasesWrittenFrames: a WebSocket calls a frame's Release
// once the frame is written, or copied into what a partial TryWrite keeps,
// and never for a frame a refused TryWrite leaves to the queue.
func TestWebSocketReleasesWrittenFrames(t *testing.T) {
	watchdog(t)
	var released atomic.Int32
	frames := func(sizes ...int) []outbox.Frame {
		var fs []outbox.Frame
		for _, n := range sizes {
			fs = append(fs, outbox.Frame{Data: []byte(`{"p":"` + strings.Repeat("x", n) + `"}`), Release: func() { released.Add(1) }})
		}
		return fs
	}
	tr, client := wsPair(t, session.WebSocketConfig{})
	setSendBuffer(t, tr.Conn().NetConn(), 64<<10)
	require.NoError(t, client.SetReadDeadline(time.Now().Add(waitLong)))
	// readAll reads fs's messages on a goroutine of its own; the channel
	// gives its outcome, bounded by the client's read deadline.
	readAll := func(fs []outbox.Frame) <-chan error {
		done := make(chan error, 1)
		go func() {
			for i, f := range fs {
				_, got, err := client.ReadMessage()
				if err == nil && len(got) != len(f.Data) {
					err = fmt.Errorf("%d bytes, want %d", len(got), len(f.Data))
				}
				if err != nil {
					done <- fmt.Errorf("message %d: %w", i, err)
					return
				}
			}
			done <- nil
		}()
		return done
	}

	big := frames(100, 1<<20, 10)
	read := readAll(big)
	require.NoError(t, tr.WriteFrames(big))
	assert.Equal(t, int32(3), released.Load(), "each written frame released once")
	require.NoError(t, <-read)

	// The client reads nothing meanwhile: a 4 MiB message is more than the
	// connection takes without blocking, and the rest is kept (a copy).
	huge := frames(4 << 20)
	ok, more := tr.TryWrite(huge)
	require.Equal(t, []bool{true, true}, []bool{ok, more}, "TryWrite of more than the connection takes")
	assert.Equal(t, int32(4), released.Load(), "a frame TryWrite copied the rest of is released")
	small := frames(10)
	ok, _ = tr.TryWrite(small)
	require.False(t, ok, "TryWrite while a rest is owed")
	assert.Equal(t, int32(4), released.Load(), "a refused TryWrite releases nothing")
	read = readAll(append(huge, small...))
	require.NoError(t, tr.WriteFrames(small))
	assert.Equal(t, int32(5), released.Load(), "the queue's frame, written after the rest")
	require.NoError(t, <-read)
}
