package streamable

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/outbox"
)

// attached opens a POST stream on tr with a recorded response attached.
func attached(tr *transport) (*stream, *httptest.ResponseRecorder) {
	st := tr.openPOST()
	rec := httptest.NewRecorder()
	st.attach(newSSEConn(rec, time.Second), 0)
	return st, rec
}

func answer(st *stream, body string) outbox.Frame {
	return outbox.Frame{Data: []byte(body), Tag: st.no, Last: true}
}

func isOver(st *stream) bool {
	select {
	case <-st.over:
		return true
	default:
		return false
	}
}

// TestTryWritePlacesQuickAnswers: the final event of a POST stream goes
// into its response from the caller's goroutine, unflushed, and ends the
// stream; what would be flushed, is too large for the response's buffer or
// meets a busy stream is declined, and a partial TryWrite's rest goes first
// in the next WriteFrames.
func TestTryWritePlacesQuickAnswers(t *testing.T) {
	tr := newTransport("", "demo", time.Minute, time.Second, nil, 8)

	quick, rec := attached(tr)
	ok, more := tr.TryWrite([]outbox.Frame{answer(quick, `{"id":1}`)})
	require.True(t, ok)
	assert.False(t, more)
	assert.Contains(t, rec.Body.String(), "data: {\"id\":1}\n\n", "the answer is in the response")
	assert.False(t, rec.Flushed, "not flushed: it leaves with the end of the response")
	assert.True(t, isOver(quick), "the answer ended its stream")

	progress, prec := attached(tr)
	note := outbox.Frame{Data: []byte(`{"method":"notifications/progress"}`), Tag: progress.no}
	ok, more = tr.TryWrite([]outbox.Frame{note})
	assert.False(t, ok || more, "an event that must be flushed is left to the writer")
	assert.Empty(t, prec.Body.String(), "and nothing of it was written")

	large, lrec := attached(tr)
	ok, _ = tr.TryWrite([]outbox.Frame{answer(large, `{"r":"`+strings.Repeat("x", responseBuffer)+`"}`)})
	assert.False(t, ok, "an answer over the response's buffer is left to the writer")
	assert.Empty(t, lrec.Body.String())

	busy, brec := attached(tr)
	busy.mu.Lock()
	ok, _ = tr.TryWrite([]outbox.Frame{answer(busy, `{"id":2}`)})
	busy.mu.Unlock()
	assert.False(t, ok, "a stream whose lock is held is left to the writer")
	assert.Empty(t, brec.Body.String())

	// A batch placed in part: the first answer goes, the rest is kept and
	// goes, in order, before what the next WriteFrames brings.
	first, frec := attached(tr)
	ok, more = tr.TryWrite([]outbox.Frame{answer(first, `{"id":3}`), note, answer(progress, `{"id":4}`)})
	require.True(t, ok)
	require.True(t, more, "the rest is kept")
	assert.True(t, isOver(first))
	assert.Contains(t, frec.Body.String(), `{"id":3}`)
	assert.Empty(t, prec.Body.String(), "the kept rest waits for WriteFrames")
	ok, _ = tr.TryWrite([]outbox.Frame{answer(busy, `{"id":2}`)})
	assert.False(t, ok, "nothing more is tried while a rest is owed")
	require.NoError(t, tr.WriteFrames([]outbox.Frame{answer(large, `{"id":5}`)}))
	got := prec.Body.String()
	require.Contains(t, got, "notifications/progress")
	assert.Less(t, strings.Index(got, "notifications/progress"), strings.Index(got, `{"id":4}`), "in the order queued")
	assert.True(t, isOver(progress))
	assert.Contains(t, lrec.Body.String(), `{"id":5}`, "then what WriteFrames was given")
}

// TestTryWriteKeepsFinishedBound: answers placed by TryWrite finish their
// streams as WriteFrames does: finishedKept are kept, the oldest let go.
func TestTryWriteKeepsFinishedBound(t *testing.T) {
	tr := newTransport("", "demo", time.Minute, time.Second, nil, 8)
	var streams []*stream
	for i := range finishedKept + 3 {
		st, rec := attached(tr)
		streams = append(streams, st)
		ok, more := tr.TryWrite([]outbox.Frame{answer(st, fmt.Sprintf(`{"id":%d}`, i))})
		require.True(t, ok, "answer %d", i)
		require.False(t, more)
		require.True(t, bytes.Contains(rec.Body.Bytes(), fmt.Appendf(nil, `{"id":%d}`, i)))
	}
	tr.mu.Lock()
	kept := len(tr.finished)
	_, oldest := tr.streams[streams[0].no]
	tr.mu.Unlock()
	assert.Equal(t, finishedKept, kept)
	assert.False(t, oldest, "the oldest finished stream is let go")
	streams[0].mu.Lock()
	defer streams[0].mu.Unlock()
	assert.True(t, streams[0].released, "and keeps nothing")
	assert.Nil(t, streams[0].events)
}

// TestStreamReleasesFrames: a frame's buffer is given back once the stream
// lets go of its event, never while the event may still be written: a
// large answer as soon as it is written (it is past what a stream keeps
// for resumption), one kept for a client that has not read it when the
// stream is forgotten, and one the stream does not keep at once.
func TestStreamReleasesFrames(t *testing.T) {
	large := `{"jsonrpc":"2.0","id":1,"result":{"x":"` + strings.Repeat("a", replayBytes) + `"}}`
	counted := func(n *int, body string, st *stream) outbox.Frame {
		f := answer(st, body)
		f.Release = func() { *n++ }
		return f
	}

	tr := newTransport("", "demo", time.Minute, time.Second, nil, 8)
	st, rec := attached(tr)
	var written int
	require.NoError(t, tr.WriteFrames([]outbox.Frame{counted(&written, large, st)}))
	assert.Contains(t, rec.Body.String(), `"x":"aaa`, "written before it was given back")
	assert.Equal(t, 1, written, "a large answer, once written")

	kept := tr.openPOST() // no connection: the answer waits for its client
	var waiting int
	require.NoError(t, tr.WriteFrames([]outbox.Frame{counted(&waiting, large, kept)}))
	assert.Zero(t, waiting, "not while its client may still read it")
	kept.release()
	assert.Equal(t, 1, waiting, "once the stream is forgotten")

	var late int
	kept.push(9, counted(&late, large, kept), true)
	assert.Equal(t, 1, late, "a stream that keeps nothing more gives it back at once")
}
