package outbox_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/outbox"
)

// served returns a queue in Serve's mode whose fail function counts its
// calls and keeps the last error.
func served(w *fakeWriter) (q *outbox.Queue, fails *atomic.Int32, last *atomic.Value) {
	q = newQueue(w, outbox.Config{})
	fails, last = new(atomic.Int32), new(atomic.Value)
	q.Serve(func(err error) {
		fails.Add(1)
		last.Store(err)
	})
	return q, fails, last
}

// In Serve's mode the writer goroutine exists only while frames wait for
// it: none before the first Send, one while a write blocks, none once the
// queue is empty; and a Flush that can write itself starts none.
func TestServeRunsAWriterOnlyWhileThereIsWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		w := &fakeWriter{hold: hold}
		q, fails, _ := served(w)
		assert.False(t, q.WriterUp(), "a writer before anything was queued")

		require.NoError(t, q.Send(frame(`{"a":1}`)))
		synctest.Wait() // the writer is inside WriteFrames, waiting for hold
		assert.True(t, q.WriterUp(), "no writer while a frame waits")
		require.NoError(t, q.SendLater(frame(`{"b":2}`)))
		q.Flush() // the writer holds the Writer: left to it
		w.set(func(w *fakeWriter) { w.hold = nil })
		close(hold)
		synctest.Wait()
		calls, wire := w.snapshot()
		assert.Equal(t, []string{`{"a":1}`, `{"b":2}`}, wire)
		assert.Equal(t, []string{"write", "write"}, calls)
		assert.False(t, q.WriterUp(), "the writer outlived its work")

		require.NoError(t, q.SendLater(frame(`{"c":3}`)))
		q.Flush() // written by TryWrite, on this goroutine
		assert.False(t, q.WriterUp(), "a writer started for a frame Flush wrote itself")
		calls, wire = w.snapshot()
		assert.Equal(t, "try", calls[len(calls)-1])
		assert.Equal(t, `{"c":3}`, wire[len(wire)-1])

		q.Stop()
		q.Wait()
		assert.Zero(t, fails.Load())
		assert.Zero(t, w.overlaps.Load(), "overlapping Writer calls")
		assert.Equal(t, 0, q.Bytes())
	})
}

// A failed write calls fail once, and no writer starts after it.
func TestServeFailsOnceAndStartsNoMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		broken := errors.New("broken pipe")
		w := &fakeWriter{fail: broken}
		q, fails, last := served(w)
		require.NoError(t, q.Send(frame(`{"a":1}`)))
		synctest.Wait()
		assert.EqualValues(t, 1, fails.Load())
		assert.ErrorIs(t, last.Load().(error), broken)

		require.NoError(t, q.Send(frame(`{"b":2}`)))
		synctest.Wait()
		assert.False(t, q.WriterUp(), "a writer started after a failed write")
		assert.EqualValues(t, 1, fails.Load(), "fail called again")
		calls, _ := w.snapshot()
		assert.Equal(t, []string{"write"}, calls)
		q.Stop()
		q.Wait()
	})
}

// Drain in Serve's mode takes turns with a writer still writing and
// returns with everything written: what the writer holds, and what was
// queued behind it without a Flush.
func TestServeDrainTakesTurnsWithTheWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		w := &fakeWriter{hold: hold}
		q, _, _ := served(w)
		require.NoError(t, q.Send(frame(`{"a":1}`)))
		synctest.Wait()
		require.NoError(t, q.SendLater(frame(`{"b":2}`)))
		drained := make(chan error, 1)
		go func() { drained <- q.Drain() }()
		synctest.Wait() // Drain waits for the writer's turn to end
		w.set(func(w *fakeWriter) { w.hold = nil })
		close(hold)
		require.NoError(t, <-drained)
		q.Stop()
		q.Wait()
		_, wire := w.snapshot()
		assert.Equal(t, []string{`{"a":1}`, `{"b":2}`}, wire)
		assert.Zero(t, w.overlaps.Load(), "overlapping Writer calls")
		assert.Equal(t, 0, q.Bytes())
	})
}

// TestDrainWokenAfterWriterMissedTurn: a Drain that waits for a Flush
// writing directly is woken at the Flush's end, even when Serve's writer
// goroutine, started before Drain, looked for its turn meanwhile and found
// it taken: that look once made the Flush's end forget Drain, which then
// waited for good (a session's Run hung at its end).
func TestDrainWokenAfterWriterMissedTurn(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	w := &fakeWriter{}
	w.during = func() {
		close(entered)
		<-release
	}
	q := outbox.New(w, outbox.Config{HighWater: 1 << 20, Max: 1 << 20})
	q.Serve(func(error) {})
	require.NoError(t, q.SendLater(outbox.Frame{Data: []byte("one")}))
	flushed := make(chan struct{})
	go func() { // the Flush that writes directly, held in its TryWrite
		defer close(flushed)
		q.Flush()
	}()
	<-entered
	drained := make(chan error, 1)
	go func() { // Drain, which waits for the Flush
		drained <- q.Drain()
	}()
	require.Eventually(t, q.DrainWaits, patience, time.Millisecond, "Drain waits for the Flush")
	require.True(t, q.TakeTurn(), "the writer goroutine finds the turn taken")
	close(release)
	<-flushed
	select {
	case err := <-drained:
		require.NoError(t, err)
	case <-time.After(patience):
		t.Fatal("Drain was not woken at the end of the Flush it waited for")
	}
	q.Stop()
	q.Wait()
	_, wire := w.snapshot()
	require.Equal(t, []string{"one"}, wire)
}
