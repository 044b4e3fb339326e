//go:build unix

package upstream

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/outbox"
)

// pipeWriter is a stdinWriter over a fresh pipe, and the pipe's read end;
// both are closed at cleanup.
func pipeWriter(t *testing.T, stall time.Duration) (*stdinWriter, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() {
		w.Close()
		r.Close()
	})
	raw, err := w.SyscallConn()
	require.NoError(t, err)
	return &stdinWriter{f: w, raw: raw, stall: stall}, r
}

// readAll reads what the pipe brings until want bytes have come, on a
// goroutine; wait returns them.
func readAll(t *testing.T, r *os.File, want int) (wait func() []byte) {
	t.Helper()
	require.NoError(t, r.SetReadDeadline(time.Now().Add(patience)))
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, want)
		n, _ := io.ReadFull(r, b)
		got <- b[:n]
	}()
	return func() []byte { return <-got } // bounded by the read deadline
}

const patience = 10 * time.Second

func frames(data ...string) []outbox.Frame {
	out := make([]outbox.Frame, len(data))
	for i, d := range data {
		out[i] = outbox.Frame{Data: []byte(d)}
	}
	return out
}

// Each frame goes out as one line: small ones gathered, large ones from
// their own slice, end markers not at all.
func TestStdinWriterLines(t *testing.T) {
	w, r := pipeWriter(t, 0)
	large := `{"large":"` + strings.Repeat("L", coalesceBytes) + `"}`
	fs := frames(`{"a":1}`, large, `{"b":2}`)
	fs = append(fs, outbox.Frame{Tag: 1, Last: true})
	want := `{"a":1}` + "\n" + large + "\n" + `{"b":2}` + "\n"
	read := readAll(t, r, len(want))
	require.NoError(t, w.WriteFrames(fs))
	assert.Equal(t, want, string(read()))
}

// A WriteFrames with stall detection clears its write deadline when it is
// done: a deadline left behind, once passed, refused every TryWrite after
// it, so the frames of each Flush went the long way, through the writer
// goroutine.
func TestStdinWriterLeavesNoStaleDeadline(t *testing.T) {
	const stall = 20 * time.Millisecond
	w, r := pipeWriter(t, stall)
	require.NoError(t, w.WriteFrames(frames(`{"a":1}`)))
	passed := time.Now().Add(2 * stall)
	require.Eventually(t, func() bool { return time.Now().After(passed) }, patience, time.Millisecond,
		"the deadline the write had is over")
	read := readAll(t, r, len("{\"a\":1}\n{\"b\":2}\n"))
	ok, more := w.TryWrite(frames(`{"b":2}`))
	assert.Equal(t, []bool{true, false}, []bool{ok, more}, "TryWrite after a write with stall detection")
	assert.Equal(t, "{\"a\":1}\n{\"b\":2}\n", string(read()))
}

// A TryWrite into a full pipe writes nothing; the frames go out with the
// next WriteFrames once the server reads.
func TestStdinWriterFullPipe(t *testing.T) {
	w, r := pipeWriter(t, 0)
	var filler []byte
	for {
		chunk := bytes.Repeat([]byte{'f'}, pipeBuf)
		ok, _, rest := outbox.TryWriteRaw(w.raw, chunk)
		if !ok {
			break
		}
		filler = append(filler, chunk[:len(chunk)-len(rest)]...)
		if rest != nil {
			break
		}
	}
	require.NotEmpty(t, filler)
	ok, more := w.TryWrite(frames(`{"late":1}`))
	require.Equal(t, []bool{false, false}, []bool{ok, more}, "TryWrite into a full pipe")

	want := append(filler, "{\"late\":1}\n"...)
	read := readAll(t, r, len(want))
	require.NoError(t, w.WriteFrames(frames(`{"late":1}`)))
	assert.True(t, bytes.Equal(want, read()), "the filler, then the frame, once")
}

// A blocking write that moves no byte for the stall timeout fails with
// errStalled.
func TestStdinWriterStall(t *testing.T) {
	w, _ := pipeWriter(t, 50*time.Millisecond)
	began := time.Now()
	err := w.WriteFrames(frames(strings.Repeat("x", 256<<10))) // more than a pipe holds, nobody reads
	assert.ErrorIs(t, err, errStalled)
	assert.GreaterOrEqual(t, time.Since(began), 50*time.Millisecond)
}
