//go:build unix

package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/upstream"
)

// quiet is how long a negative check ("nothing reaches the server") waits.
const quiet = 200 * time.Millisecond

// padded is a request with a params string that makes it about size bytes.
func padded(id int, size int) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"pad":%q}}`, id, strings.Repeat("p", max(size-60, 0)))
}

// resultIDs lists the ids of the results received, in order.
func (r *recorder) resultIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for _, m := range r.msgs {
		if m.Kind == jsonrpc.KindResult {
			ids = append(ids, string(m.ID))
		}
	}
	return ids
}

// waitResults waits for n results and returns their ids in order.
func (r *recorder) waitResults(t *testing.T, n int, why string) []string {
	t.Helper()
	require.Eventually(t, func() bool { return len(r.resultIDs()) >= n },
		patience, 5*time.Millisecond, "%d results: %s (have %v)", n, why, r.resultIDs())
	return r.resultIDs()
}

func idStrings(from, to int) []string {
	var ids []string
	for id := from; id <= to; id++ {
		ids = append(ids, strconv.Itoa(id))
	}
	return ids
}

// SendLater holds frames back until Flush, which sends them in one go.
func TestSendLaterWaitsForFlush(t *testing.T) {
	t.Parallel()
	p, rec, _ := start(t, fakeConfig(t, "echo", ""))
	rec.waitReady(t)

	require.NoError(t, p.SendLater(request(1, "ping")))
	require.NoError(t, p.SendLater(request(2, "ping")))
	assert.Equal(t, len(request(1, "ping"))+len(request(2, "ping"))+2, p.Queued(), "queued, newlines included")
	assert.Never(t, func() bool { return len(rec.resultIDs()) > 0 }, quiet, 5*time.Millisecond,
		"SendLater alone must not reach the server")

	p.Flush()
	assert.Equal(t, []string{"1", "2"}, rec.waitResults(t, 2, "after Flush"))
	assert.Equal(t, 0, p.Queued())
	p.Flush() // nothing queued: no effect
	call(t, p, rec, 3, "ping")
}

// A run over one atomic pipe write goes through writeLoop; the frames still
// arrive whole and in order, each Send and SendLater in its place.
func TestSendLaterAndSendKeepOrder(t *testing.T) {
	t.Parallel()
	p, rec, _ := start(t, fakeConfig(t, "echo", ""))
	rec.waitReady(t)

	type step struct {
		later bool // SendLater rather than Send
		size  int
		flush bool // Flush after it
	}
	steps := []step{
		{later: true, size: 100},
		{later: true, size: 6000, flush: true}, // over 4096 bytes: the writer's
		{later: false, size: 100},              // Send sends what was held too
		{later: true, size: 100, flush: true},  // small: Flush writes it itself
		{later: true, size: 100},
		{later: false, size: 200 << 10}, // over the coalescing size: from its own slice
		{later: true, size: 3000},
		{later: true, size: 3000, flush: true}, // two frames over 4096 together
		{later: true, size: 50},
		{later: true, size: 80 << 10},
		{later: true, size: 50, flush: true},
	}
	for i, s := range steps {
		f := padded(i+1, s.size)
		if s.later {
			require.NoError(t, p.SendLater(f), "SendLater %d", i+1)
		} else {
			require.NoError(t, p.Send(f), "Send %d", i+1)
		}
		if s.flush {
			p.Flush()
		}
	}
	assert.Equal(t, idStrings(1, len(steps)), rec.waitResults(t, len(steps), "every frame"))
	require.Eventually(t, func() bool { return p.Queued() == 0 }, patience, 5*time.Millisecond)
}

// Several goroutines mixing Send, SendLater and Flush: each one's frames
// reach the server in its order, none lost, none twice.
func TestSendLaterConcurrent(t *testing.T) {
	t.Parallel()
	const senders, each = 6, 200
	p, rec, _ := start(t, fakeConfig(t, "echo", ""))
	rec.waitReady(t)

	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for g := range senders {
		wg.Go(func() {
			for i := range each {
				id := (g+1)*10000 + i
				size := 60 + i%5*400
				if i%37 == 36 {
					size = 5000
				}
				f := padded(id, size)
				var err error
				switch i % 4 {
				case 0:
					err = p.Send(f)
				case 1, 2:
					err = p.SendLater(f)
				case 3:
					err = p.SendLater(f)
					p.Flush()
				}
				if err != nil {
					errs <- fmt.Errorf("sender %d, frame %d: %w", g, i, err)
					return
				}
			}
			p.Flush()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	ids := rec.waitResults(t, senders*each, "every frame")
	next := make([]int, senders)
	for _, s := range ids {
		id, err := strconv.Atoi(s)
		require.NoError(t, err, "id %s", s)
		g, i := id/10000-1, id%10000
		require.Equal(t, next[g], i, "sender %d's frames out of order", g)
		next[g]++
	}
	assert.Len(t, ids, senders*each, "no frame twice")
	require.Eventually(t, func() bool { return p.Queued() == 0 }, patience, 5*time.Millisecond)
}

// A run that SendLater takes past WriteQueueBytes must drain without a
// Flush: the sessions wait in WaitWritable for that very queue.
func TestSendLaterPastWriteQueueBytesWakesWriter(t *testing.T) {
	t.Parallel()
	const soft = 8 << 10
	cfg := fakeConfig(t, "echo", "")
	cfg.WriteQueueBytes = soft
	p, rec, _ := start(t, cfg)
	rec.waitReady(t)

	// Three frames of 3000 bytes: the third takes the queue past the bound
	// (and stays under twice it, where SendLater would refuse).
	for id := 1; id <= 3; id++ {
		require.NoError(t, p.SendLater(padded(id, 3000)), "SendLater %d", id)
	}
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	assert.NoError(t, p.WaitWritable(ctx), "WaitWritable returns once the queue drains, with no Flush")
	assert.Equal(t, idStrings(1, 3), rec.waitResults(t, 3, "no Flush was called"))
}

// sized is a ping request of exactly n bytes.
func sized(id, n int) []byte {
	f := padded(id, 0)
	return padded(id, 60+n-len(f))
}

// A Flush that finds the pipe full writes nothing and loses nothing: the
// frames wait for writeLoop, which sends them once the server reads.
func TestFlushIntoFullPipe(t *testing.T) {
	t.Parallel()
	cfg := fakeConfig(t, "no-read", "")
	p, rec, _ := start(t, cfg)
	rec.waitReady(t)

	// One write of 64 KiB, a pipe's whole capacity on Linux, which the
	// server does not read: the pipe is full and writeLoop idle.
	big := sized(1, 64<<10-1)
	require.Len(t, big, 64<<10-1)
	require.NoError(t, p.Send(big))
	require.Eventually(t, func() bool { return p.Queued() == 0 }, patience, time.Millisecond, "the big frame written")

	small := request(2, "ping")
	require.NoError(t, p.SendLater(small))
	p.Flush()
	assert.Equal(t, len(small)+1, p.Queued(), "the frame Flush could not write is still queued")

	require.NoError(t, syscall.Kill(p.Pid(), syscall.SIGUSR1)) // start reading
	assert.Equal(t, []string{"1", "2"}, rec.waitResults(t, 2, "once the server reads"))
	require.Eventually(t, func() bool { return p.Queued() == 0 }, patience, 5*time.Millisecond)
}

// flushRecorder is a recorder that is also an upstream.Flusher, and keeps
// the order of its calls: "msg METHOD", "large" and "flush".
type flushRecorder struct {
	recorder
	callsMu sync.Mutex
	calls   []string
}

func (r *flushRecorder) HandleMessage(m *jsonrpc.Message) {
	r.recorder.HandleMessage(m)
	r.note("msg " + m.Method)
}

func (r *flushRecorder) HandleTooLarge(id json.RawMessage, size int64) {
	r.recorder.HandleTooLarge(id, size)
	r.note("large")
}

func (r *flushRecorder) Flush() { r.note("flush") }

func (r *flushRecorder) note(s string) {
	r.callsMu.Lock()
	defer r.callsMu.Unlock()
	r.calls = append(r.calls, s)
}

func (r *flushRecorder) snapshot() []string {
	r.callsMu.Lock()
	defer r.callsMu.Unlock()
	return slices.Clone(r.calls)
}

// startCat runs cat(1) as the server: what the test sends on stdin comes
// back on stdout, in the pieces it was written in. A run of frames that
// SendLater holds and Flush sends is one atomic pipe write each way, so the
// reader finds the whole run in its buffer at once.
func startCat(t *testing.T, cfg upstream.Config, h upstream.Handler) *upstream.Process {
	t.Helper()
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Skip("no cat:", err)
	}
	cfg.Name, cfg.Command = "cat", cat
	p, err := upstream.Start(cfg, h)
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Kill("test over")
		<-p.Done()
	})
	return p
}

// notification is a frame that cat sends back as a notification.
func notification(method string) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"` + method + `"}`)
}

// sendRun holds frames back and flushes them as one write.
func sendRun(t *testing.T, p *upstream.Process, frames ...[]byte) {
	t.Helper()
	size := 0
	for _, f := range frames {
		require.NoError(t, p.SendLater(f))
		size += len(f) + 1
	}
	require.LessOrEqual(t, size, 4096, "precondition: the run is one atomic pipe write")
	p.Flush()
}

// The reader flushes once per run of messages it finds buffered together,
// and before every read that may wait.
func TestReaderFlushesOncePerRun(t *testing.T) {
	t.Parallel()
	h := new(flushRecorder)
	p := startCat(t, upstream.Config{}, h)

	sendRun(t, p, notification("a/1"), notification("a/2"), notification("a/3"))
	require.Eventually(t, func() bool { return slices.Contains(h.snapshot(), "msg a/3") }, patience, 5*time.Millisecond)
	sendRun(t, p, notification("b/1"), notification("b/2"))
	want := []string{"flush", "msg a/1", "msg a/2", "msg a/3", "flush", "msg b/1", "msg b/2", "flush"}
	require.Eventually(t, func() bool { return len(h.snapshot()) >= len(want) }, patience, 5*time.Millisecond, "calls: %v", h.snapshot())
	assert.Equal(t, want, h.snapshot(), "a Flush before the first read, and one after each run")
}

// Whatever the reader handled before it stops reading is flushed: a
// Flusher's held-back sends must not wait for a read that never comes. The
// ways a reader stops: the server's stdout ends, or the server floods it
// with junk and is killed.
func TestReaderFlushesBeforeItStops(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		run    [][]byte
		reason string
	}{
		{"stdout ends", [][]byte{notification("held/1")}, upstream.ReasonStopped},
		{"junk flood", [][]byte{notification("held/1"), []byte("junk 1"), []byte("junk 2")}, upstream.ReasonJunkOutput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := new(flushRecorder)
			p := startCat(t, upstream.Config{MaxJunkLines: 1}, h)
			sendRun(t, p, tt.run...)
			require.Eventually(t, func() bool { return slices.Contains(h.snapshot(), "msg held/1") }, patience, 5*time.Millisecond,
				"calls: %v", h.snapshot())
			if tt.reason == upstream.ReasonStopped {
				require.NoError(t, p.Stop(t.Context())) // cat sees EOF on stdin and exits
			}
			waitDone(t, p)
			assert.Equal(t, tt.reason, p.Exit().Reason, "exit %v", p.Exit())
			calls := h.snapshot()
			last := slices.Index(calls, "msg held/1")
			assert.Contains(t, calls[last+1:], "flush", "no Flush after the last message handled: its held sends wait forever (calls %v)", calls)
		})
	}
}
