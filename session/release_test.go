//go:build unix

package session_test

import (
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
