package outbox_test

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/outbox"
)

// big is a queue bound no test here reaches by accident.
const big = 64 << 20

func newQueue(w *fakeWriter, cfg outbox.Config) *outbox.Queue {
	if cfg.Max == 0 {
		cfg.Max = big
	}
	if cfg.HighWater == 0 {
		cfg.HighWater = big
	}
	return outbox.New(w, cfg)
}

func isReady(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// SendLater holds frames back until Flush, which writes them itself, in
// one call, before it returns; the count includes the separators.
func TestSendLaterWaitsForFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := new(fakeWriter)
		q := newQueue(w, outbox.Config{Separator: 1})
		running(t, q)

		require.NoError(t, q.SendLater(frame(`{"a":1}`)))
		require.NoError(t, q.SendLater(frame(`{"b":2}`)))
		synctest.Wait()
		calls, wire := w.snapshot()
		assert.Empty(t, calls, "SendLater alone must not reach the Writer")
		assert.Empty(t, wire)
		assert.Equal(t, len(`{"a":1}`)+len(`{"b":2}`)+2, q.Bytes(), "queued, separators included")

		q.Flush() // synchronous: the writer is idle
		calls, wire = w.snapshot()
		assert.Equal(t, []string{"try"}, calls, "one TryWrite on Flush's goroutine")
		assert.Equal(t, []string{`{"a":1}`, `{"b":2}`}, wire)
		assert.Equal(t, 0, q.Bytes())
		assert.Equal(t, int64(len(`{"a":1}{"b":2}`)+2), q.Written())

		q.Flush() // nothing queued: nothing written
		require.NoError(t, q.Send(frame(`{"c":3}`)))
		synctest.Wait()
		calls, wire = w.snapshot()
		assert.Equal(t, []string{"try", "write"}, calls, "Send wakes the writer goroutine")
		assert.Equal(t, []string{`{"a":1}`, `{"b":2}`, `{"c":3}`}, wire)
		assert.Zero(t, w.overlaps.Load(), "overlapping Writer calls")
	})
}

// What Flush does depends on the size of the run and on what the writer
// goroutine is doing; the frames always arrive whole, once, in order.
func TestFlushWritesItselfOnlyWhenItCannotBlock(t *testing.T) {
	tests := []struct {
		name      string
		cfg       outbox.Config
		frames    []int  // sizes
		mode      string // TryWrite's outcome
		wantCalls []string
	}{
		{"a small run", outbox.Config{}, []int{100, 100}, "all", []string{"try"}},
		{"exactly DirectMax", outbox.Config{DirectMax: 300, Separator: 1}, []int{149, 149}, "all", []string{"try"}},
		{"over DirectMax", outbox.Config{DirectMax: 300, Separator: 1}, []int{150, 150}, "all", []string{"write"}},
		{"over the default DirectMax, in two runs", outbox.Config{}, []int{40 << 10, 30 << 10}, "all", []string{"write", "write"}},
		{"refused: the writer goroutine writes", outbox.Config{}, []int{100}, "none", []string{"try", "write"}},
		{"taken in part: the writer goroutine sends the rest, nothing else queued", outbox.Config{}, []int{10, 20, 30}, "part", []string{"try", "write"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &fakeWriter{mode: func() string { return tt.mode }}
				q := newQueue(w, tt.cfg)
				running(t, q)
				var want []string
				for i, n := range tt.frames {
					f := numbered(0, i, n)
					want = append(want, string(f.Data))
					require.NoError(t, q.SendLater(f))
				}
				q.Flush()
				synctest.Wait()
				calls, wire := w.snapshot()
				assert.Equal(t, tt.wantCalls, calls, "Writer calls")
				assert.Equal(t, want, wire, "the frames, once each, in order")
				assert.Equal(t, 0, q.Bytes(), "the queue drained")
				assert.Zero(t, w.overlaps.Load(), "overlapping Writer calls")
			})
		})
	}
}

// Frames queued while a Flush is writing go out after the frames that
// Flush could not write, whatever TryWrite took.
func TestFramesQueuedDuringTryWriteGoAfter(t *testing.T) {
	for _, mode := range []string{"all", "none", "part"} {
		t.Run("TryWrite took "+mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &fakeWriter{mode: func() string { return mode }}
				q := newQueue(w, outbox.Config{})
				running(t, q)
				var duringErr error
				w.during = func() {
					w.set(func(w *fakeWriter) { w.during = nil }) // once
					duringErr = q.SendLater(frame(`{"later":1}`))
					q.Flush() // the writer is busy (this very Flush): it is left to the writer goroutine
				}
				for _, f := range []string{`{"a":1}`, `{"b":2}`, `{"c":3}`} {
					require.NoError(t, q.SendLater(frame(f)))
				}
				q.Flush()
				synctest.Wait()
				require.NoError(t, duringErr)
				_, wire := w.snapshot()
				assert.Equal(t, []string{`{"a":1}`, `{"b":2}`, `{"c":3}`, `{"later":1}`}, wire)
				assert.Zero(t, w.overlaps.Load(), "overlapping Writer calls")
				assert.Equal(t, 0, q.Bytes())
			})
		})
	}
}

// While the writer goroutine is in a write, Flush neither writes nor
// waits: it leaves the frames to the writer, which takes them next.
func TestFlushLeavesFramesToABusyWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		w := &fakeWriter{hold: hold}
		q := newQueue(w, outbox.Config{})
		running(t, q)

		require.NoError(t, q.Send(frame(`{"a":1}`)))
		synctest.Wait() // the writer is inside WriteFrames, waiting for hold
		require.NoError(t, q.SendLater(frame(`{"b":2}`)))
		require.NoError(t, q.SendLater(frame(`{"c":3}`)))
		q.Flush() // returns: synctest would report a deadlock otherwise
		calls, wire := w.snapshot()
		assert.Equal(t, []string{"write"}, calls, "Flush must not write while the writer is in a write")
		assert.Empty(t, wire)

		w.set(func(w *fakeWriter) { w.hold = nil })
		close(hold)
		synctest.Wait()
		calls, wire = w.snapshot()
		assert.Equal(t, []string{"write", "write"}, calls)
		assert.Equal(t, []string{`{"a":1}`, `{"b":2}`, `{"c":3}`}, wire)
		assert.Zero(t, w.overlaps.Load(), "overlapping Writer calls")
	})
}

// What a partial TryWrite left is owed to WriteFrames: until the writer
// goroutine has sent it, Flush does not try again.
func TestFlushWaitsForAnOwedRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &fakeWriter{mode: func() string { return "part" }}
		q := newQueue(w, outbox.Config{})
		for _, f := range []string{`{"a":1}`, `{"b":2}`} {
			require.NoError(t, q.SendLater(frame(f)))
		}
		q.Flush() // writes {"a":1}, keeps {"b":2}
		require.NoError(t, q.SendLater(frame(`{"c":3}`)))
		q.Flush()
		calls, _ := w.snapshot()
		assert.Equal(t, []string{"try"}, calls, "no second TryWrite while a rest is owed")

		running(t, q) // the writer goroutine, woken by the first Flush
		synctest.Wait()
		calls, wire := w.snapshot()
		assert.Equal(t, []string{"try", "write"}, calls, "the rest and the frame queued after it, in one call")
		assert.Equal(t, []string{`{"a":1}`, `{"b":2}`, `{"c":3}`}, wire)
		assert.Equal(t, 0, q.Bytes())
	})
}

// A run of Sends and SendLaters of all sizes (over DirectMax, over the
// writer's run size, one frame larger than that) arrives whole and in
// order, each one in its place; the writer goroutine hands the Writer at
// most 64 KiB per call, or a single larger frame.
func TestSendAndSendLaterKeepOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := new(fakeWriter)
		q := newQueue(w, outbox.Config{DirectMax: 4096, Separator: 1})
		running(t, q)
		type step struct {
			later bool // SendLater rather than Send
			size  int
			flush bool // Flush after it
		}
		steps := []step{
			{later: true, size: 100},
			{later: true, size: 6000, flush: true}, // over DirectMax: the writer's
			{later: false, size: 100},              // Send sends what was held too
			{later: true, size: 100, flush: true},  // small: Flush writes it itself
			{later: true, size: 100},
			{later: false, size: 200 << 10}, // larger than a run: alone
			{later: true, size: 3000},
			{later: true, size: 3000, flush: true}, // two frames over DirectMax together
			{later: true, size: 50},
			{later: true, size: 80 << 10},
			{later: true, size: 50, flush: true},
		}
		var want []string
		for i, s := range steps {
			f := numbered(0, i, s.size)
			want = append(want, string(f.Data))
			if s.later {
				require.NoError(t, q.SendLater(f), "SendLater %d", i)
			} else {
				require.NoError(t, q.Send(f), "Send %d", i)
			}
			if s.flush {
				q.Flush()
			}
			synctest.Wait() // each step's writes are over before the next
		}
		_, wire := w.snapshot()
		assert.Equal(t, want, wire, "every frame, in order")
		assert.Equal(t, 0, q.Bytes())
		w.mu.Lock()
		defer w.mu.Unlock()
		for i, n := range w.sizes {
			assert.True(t, n <= 64<<10 || n == 200<<10 || n == 80<<10, "WriteFrames call %d carried %d bytes", i, n)
		}
	})
}

// Several goroutines mixing Send, SendLater and Flush, against a Writer
// whose TryWrite takes all, none or part in turn: every frame is written
// once, each goroutine's in its order, and no two Writer calls overlap.
func TestSendersKeepTheirOrder(t *testing.T) {
	const senders, each = 6, 400
	w := &fakeWriter{slow: true}
	var tries int
	w.mode = func() string { // under w.mu
		tries++
		return [...]string{"all", "none", "part", "all"}[tries%4]
	}
	q := newQueue(w, outbox.Config{DirectMax: 8 << 10})
	running(t, q)
	size := func(g, i int) int {
		if i%50 == 49 {
			return 9000 // over DirectMax alone: the writer goroutine's
		}
		return 10 + (g*each+i)%7*300
	}
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for g := range senders {
		wg.Go(func() {
			for i := range each {
				f := numbered(g, i, size(g, i))
				var err error
				switch i % 5 {
				case 0:
					err = q.Send(f)
				case 1, 2:
					err = q.SendLater(f) // out with the next Send or Flush, anyone's
				case 3:
					err = q.SendLater(f)
					q.Flush()
				case 4:
					q.Flush()
					err = q.SendLater(f)
				}
				if err != nil {
					errs <- fmt.Errorf("sender %d, frame %d: %w", g, i, err)
					return
				}
			}
			q.Flush()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	calls, wire := w.waitWire(t, senders*each, "every frame")
	next := make([]int, senders)
	for _, s := range wire {
		var g, i int
		_, err := fmt.Sscanf(s, `{"g":%d,"i":%d,`, &g, &i)
		require.NoError(t, err, "frame %.60q", s)
		require.Equal(t, next[g], i, "sender %d's frames out of order", g)
		require.Len(t, s, len(numbered(g, i, size(g, i)).Data), "frame %d of sender %d", i, g)
		next[g]++
	}
	assert.Len(t, wire, senders*each, "no frame twice")
	assert.Zero(t, w.overlaps.Load(), "overlapping Writer calls")
	nTries := 0
	for _, c := range calls {
		if c == "try" {
			nTries++
		}
	}
	t.Logf("%d Writer calls, %d of them TryWrites", len(calls), nTries)
	assert.Eventually(t, func() bool { return q.Bytes() == 0 }, patience, time.Millisecond, "the queue drains")
}

// Max bounds the bytes queued or being written: a frame that would pass it
// is refused and not queued, except into an empty queue, which takes any
// one frame.
func TestMaxRefusesABacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		w := &fakeWriter{hold: hold}
		q := newQueue(w, outbox.Config{Max: 1000, HighWater: 1000, Separator: 1})
		running(t, q)

		require.NoError(t, q.Send(numbered(0, 0, 2000)), "an empty queue takes one frame over Max")
		synctest.Wait() // being written: it still counts
		assert.Equal(t, 2001, q.Bytes())
		assert.ErrorIs(t, q.SendLater(frame("x")), outbox.ErrFull, "a backlog over Max")

		w.set(func(w *fakeWriter) { w.hold = nil })
		close(hold)
		synctest.Wait()
		assert.Equal(t, 0, q.Bytes())
		require.NoError(t, q.SendLater(numbered(0, 1, 599)), "600 bytes")
		require.NoError(t, q.SendLater(numbered(0, 2, 399)), "1000: exactly Max")
		assert.ErrorIs(t, q.Send(frame("")), outbox.ErrFull, "one byte (the separator) more")
		assert.Equal(t, 1000, q.Bytes(), "a refused frame is not queued")
		require.NoError(t, q.Send(outbox.Frame{Tag: 7, Last: true}), "an end marker has no size")
		synctest.Wait()
		assert.Equal(t, 0, q.Bytes())
		_, wire := w.snapshot()
		assert.Len(t, wire, 4)
		w.mu.Lock()
		defer w.mu.Unlock()
		assert.Equal(t, outbox.Frame{Tag: 7, Last: true}, w.wire[3], "tags and Last reach the Writer as they were sent")
	})
}

// Room is ready while the queue is at or below HighWater; a backlog above
// it opens Room as its runs are written, not only at the end. Frames held
// with SendLater past HighWater wake the writer goroutine: the queue must
// drain for Room to open, whoever was to flush it.
func TestRoomFollowsHighWater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		w := &fakeWriter{hold: hold}
		q := newQueue(w, outbox.Config{HighWater: 130 << 10, Separator: 1})
		running(t, q)
		assert.True(t, isReady(q.Room()), "Room of an empty queue")
		assert.True(t, q.HasRoom(), "HasRoom of an empty queue")

		// Three runs of 60 KiB: the third takes the queue past HighWater.
		for i := range 3 {
			require.NoError(t, q.SendLater(numbered(0, i, 60<<10-1)))
		}
		room := q.Room()
		assert.False(t, isReady(room), "Room above HighWater")
		assert.False(t, q.HasRoom(), "HasRoom above HighWater")
		synctest.Wait()
		calls, _ := w.snapshot()
		assert.Equal(t, []string{"write"}, calls, "SendLater past HighWater woke the writer, no Flush called")

		hold2 := make(chan struct{})
		w.set(func(w *fakeWriter) { w.hold = hold2 })
		close(hold) // the first run is written; the writer holds in the second
		synctest.Wait()
		assert.True(t, isReady(room), "Room opens once the first run is written (%d bytes queued)", q.Bytes())
		assert.True(t, q.HasRoom(), "HasRoom once the first run is written")
		assert.Equal(t, 2*(60<<10), q.Bytes(), "the two runs still queued or being written")

		w.set(func(w *fakeWriter) { w.hold = nil })
		close(hold2)
		synctest.Wait()
		assert.Equal(t, 0, q.Bytes())
		assert.Equal(t, int64(3*(60<<10)), q.Written())
	})
}

// Run returns nil once stop is closed, and the Writer's error when a
// write fails; what that write was to carry leaves the count, unwritten.
func TestRunReturnsTheWriteError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := new(fakeWriter)
		q := newQueue(w, outbox.Config{})
		stop := running(t, q)
		require.NoError(t, q.Send(frame(`{"a":1}`)))
		synctest.Wait()
		assert.NoError(t, stop(), "Run after stop")

		broken := errors.New("broken pipe")
		w.set(func(w *fakeWriter) { w.fail = broken })
		stopCh := make(chan struct{})
		defer close(stopCh)
		res := make(chan error, 1)
		go func() { res <- q.Run(stopCh) }()
		require.NoError(t, q.Send(frame(`{"b":2}`)))
		assert.ErrorIs(t, <-res, broken)
		assert.Equal(t, 0, q.Bytes(), "the failed write's frames left the count")
		assert.Equal(t, int64(len(`{"a":1}`)), q.Written(), "and are not counted as written")
	})
}

// Close refuses frames, drops those waiting, opens Room, and makes Flush
// a no-op; a write in progress that ends after it leaves the count at 0.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		w := &fakeWriter{hold: hold}
		q := newQueue(w, outbox.Config{HighWater: 10})
		running(t, q)
		require.NoError(t, q.Send(frame(`{"in flight":1}`)))
		synctest.Wait()
		require.NoError(t, q.SendLater(frame(`{"waiting":1}`)))
		room := q.Room()
		require.False(t, isReady(room), "precondition: above HighWater")
		require.False(t, q.HasRoom(), "precondition: above HighWater")

		q.Close()
		q.Close() // idempotent
		assert.True(t, isReady(room), "Room after Close")
		assert.True(t, q.HasRoom(), "HasRoom after Close")
		assert.Equal(t, 0, q.Bytes(), "Bytes after Close")
		assert.ErrorIs(t, q.Send(frame("{}")), outbox.ErrClosed)
		assert.ErrorIs(t, q.SendLater(frame("{}")), outbox.ErrClosed)
		q.Flush()

		close(hold)
		synctest.Wait()
		assert.Equal(t, 0, q.Bytes(), "the write in progress ended")
		calls, wire := w.snapshot()
		assert.Equal(t, []string{"write"}, calls, "nothing after Close")
		assert.Equal(t, []string{`{"in flight":1}`}, wire)
	})
}

// Drain, after Run, writes what is queued and what a partial TryWrite
// left; a Flush in progress is waited for, never overlapped (a closing
// session's last flush once raced a Flush of the server's reader).
func TestDrainWaitsForAFlushInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &fakeWriter{mode: func() string { return "part" }}
		q := newQueue(w, outbox.Config{})
		stop := running(t, q)
		require.NoError(t, stop(), "Run ends first, as when a client half-closes")

		inTry, release := make(chan struct{}), make(chan struct{})
		w.during = func() {
			w.set(func(w *fakeWriter) { w.during = nil })
			close(inTry)
			<-release // a Flush caught mid-write
		}
		for _, f := range []string{`{"a":1}`, `{"b":2}`, `{"c":3}`} {
			require.NoError(t, q.SendLater(frame(f)))
		}
		flushed := make(chan struct{})
		go func() {
			defer close(flushed)
			q.Flush()
		}()
		<-inTry
		require.NoError(t, q.SendLater(frame(`{"d":4}`)))
		drained := make(chan error, 1)
		go func() { drained <- q.Drain() }()
		synctest.Wait()
		calls, _ := w.snapshot()
		assert.Equal(t, []string{"try"}, calls, "Drain must wait for the Flush in progress")

		close(release)
		<-flushed
		require.NoError(t, <-drained)
		calls, wire := w.snapshot()
		assert.Equal(t, []string{"try", "write"}, calls)
		assert.Equal(t, []string{`{"a":1}`, `{"b":2}`, `{"c":3}`, `{"d":4}`}, wire, "the rest of the Flush, then what was queued")
		assert.Zero(t, w.overlaps.Load(), "overlapping Writer calls")
		assert.Equal(t, 0, q.Bytes())
	})
}

// Drain with nothing queued and nothing owed writes nothing; a Flush
// after Drain began writes nothing itself either (a partial write would
// leave a rest that nobody sends).
func TestDrainOfAnEmptyQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := new(fakeWriter)
		q := newQueue(w, outbox.Config{})
		require.NoError(t, q.Drain())
		require.NoError(t, q.SendLater(frame(`{"late":1}`)))
		q.Flush()
		calls, _ := w.snapshot()
		assert.Empty(t, calls)
		assert.Equal(t, len(`{"late":1}`), q.Bytes(), "left queued")
	})
}

// Frames with nil Data count nothing and are handed on as they are, in
// their place among the others.
func TestEndMarkersPassThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := new(fakeWriter)
		q := newQueue(w, outbox.Config{Separator: 1})
		running(t, q)
		sent := []outbox.Frame{
			{Data: []byte(`{"progress":1}`), Tag: 3},
			{Tag: 4, Last: true},
			{Data: []byte(`{"answer":1}`), Tag: 3, Last: true},
		}
		for _, f := range sent {
			require.NoError(t, q.SendLater(f))
		}
		assert.Equal(t, len(`{"progress":1}{"answer":1}`)+2, q.Bytes())
		q.Flush()
		w.mu.Lock()
		defer w.mu.Unlock()
		assert.Equal(t, sent, w.wire)
	})
}

func TestNewRefusesNoBound(t *testing.T) {
	assert.Panics(t, func() { outbox.New(new(fakeWriter), outbox.Config{}) })
}

// A long run of Sends from one goroutine while the writer writes: the
// batch slices the queue reuses never lose or repeat a frame.
func TestReusedBatchesLoseNothing(t *testing.T) {
	w := &fakeWriter{slow: true}
	q := newQueue(w, outbox.Config{})
	running(t, q)
	const n = 20000
	for i := range n {
		var err error
		if i%3 == 0 {
			err = q.SendLater(frame(strconv.Itoa(i)))
		} else {
			err = q.Send(frame(strconv.Itoa(i)))
		}
		require.NoError(t, err)
	}
	q.Flush()
	_, wire := w.waitWire(t, n, "every frame")
	require.Len(t, wire, n)
	for i, s := range wire {
		require.Equal(t, strconv.Itoa(i), s, "frame %d", i)
	}
}

// SendLaterOr refuses a frame that would take the queue past Max, as
// SendLater does, and hands back a channel that closes once queued bytes
// leave; producers that retry then never take the queue past Max, however
// many there are, and every frame arrives once. Close wakes them too.
func TestSendLaterOrWaitsForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		w := &fakeWriter{hold: hold}
		q := newQueue(w, outbox.Config{Max: 1000, HighWater: 500, Separator: 1})
		running(t, q)

		freed, err := q.SendLaterOr(numbered(0, 0, 599))
		require.NoError(t, err)
		assert.Nil(t, freed, "taken: nothing to wait for")
		synctest.Wait() // past HighWater: the writer has it, held
		freed, err = q.SendLaterOr(numbered(0, 1, 599))
		assert.ErrorIs(t, err, outbox.ErrFull)
		require.NotNil(t, freed)
		assert.False(t, isReady(freed), "nothing has left the queue")

		const producers = 20
		var wg sync.WaitGroup
		var peak atomicMax
		for p := range producers {
			wg.Go(func() {
				for {
					freed, err := q.SendLaterOr(numbered(p+1, 0, 299))
					peak.see(q.Bytes())
					if err == nil {
						return
					}
					<-freed
				}
			})
		}
		synctest.Wait()
		assert.Equal(t, 900, q.Bytes(), "one producer fits, the others wait")
		w.set(func(w *fakeWriter) { w.hold = nil })
		close(hold)
		wg.Wait()
		q.Flush() // the last below HighWater is held, as with SendLater
		synctest.Wait()
		assert.LessOrEqual(t, peak.load(), 1000, "never past Max")
		_, wire := w.snapshot()
		assert.Len(t, wire, 1+producers, "each frame once")

		hold = make(chan struct{})
		w.set(func(w *fakeWriter) { w.hold = hold })
		require.NoError(t, q.Send(numbered(0, 2, 999)))
		synctest.Wait()
		freed, err = q.SendLaterOr(numbered(0, 3, 10))
		assert.ErrorIs(t, err, outbox.ErrFull)
		q.Close()
		assert.True(t, isReady(freed), "Close wakes the waiters")
		_, err = q.SendLaterOr(numbered(0, 3, 10))
		assert.ErrorIs(t, err, outbox.ErrClosed)
		close(hold)
	})
}

// atomicMax keeps the largest value it saw.
type atomicMax struct {
	mu  sync.Mutex
	max int
}

func (a *atomicMax) see(v int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.max = max(a.max, v)
}

func (a *atomicMax) load() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.max
}

// The writer goroutine, woken while a Flush holds the Writer, takes no
// turn and leaves the Flush's turn alone: a second Flush meanwhile only
// queues, so two writes never share the Writer and no frame is lost or
// overwritten. (The stdin writer of earlier releases ended a Flush's turn
// when it woke with nothing to write; two Flushes then wrote at once from
// one buffer, and a request never reached its server.)
func TestWokenWriterLeavesAFlushItsTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		w := &fakeWriter{}
		first := true
		w.during = func() {
			if first { // only the first TryWrite waits: the test's goroutines take turns
				first = false
				<-release
			}
		}
		q := newQueue(w, outbox.Config{})
		running(t, q)

		require.NoError(t, q.SendLater(frame(`{"a":1}`)))
		flushed := make(chan struct{})
		go func() {
			defer close(flushed)
			q.Flush() // writes a itself, and waits inside TryWrite for release
		}()
		synctest.Wait()
		require.NoError(t, q.Send(frame(`{"b":2}`))) // wakes the writer goroutine: busy, it must not take a turn
		synctest.Wait()
		require.NoError(t, q.SendLater(frame(`{"c":3}`)))
		q.Flush() // the first Flush still holds the Writer: this one only queues
		calls, wire := w.snapshot()
		assert.Equal(t, []string{"try"}, calls, "nothing but the first Flush's write began")
		assert.Empty(t, wire)

		close(release)
		<-flushed
		synctest.Wait()
		calls, wire = w.snapshot()
		assert.Equal(t, []string{`{"a":1}`, `{"b":2}`, `{"c":3}`}, wire, "each frame once, in order")
		assert.Equal(t, []string{"try", "write"}, calls, "the rest went in one turn of the writer goroutine")
		assert.Zero(t, w.overlaps.Load(), "overlapping Writer calls")
	})
}
