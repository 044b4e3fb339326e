//go:build unix

package upstream_test

import (
	"encoding/json"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/upstream"
)

// flushRecorder is a recorder that keeps the order of its calls:
// "msg METHOD", "large" and "flush".
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
// Handler's held-back sends must not wait for a read that never comes. The
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
