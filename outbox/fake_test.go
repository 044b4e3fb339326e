package outbox_test

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/outbox"
)

// patience bounds every wait for something another goroutine does, in the
// tests that do not run in a synctest bubble.
const patience = 10 * time.Second

// fakeWriter is an outbox.Writer whose wire is the frames it took, in
// order. TryWrite takes all, none or part of its frames as mode says,
// keeping a part's rest for the next WriteFrames as a real connection's
// Writer does. It counts calls that overlap, which the Queue must never
// make: its writer goroutine and a Flush take turns.
type fakeWriter struct {
	busy     atomic.Int32 // calls in progress
	overlaps atomic.Int32 // calls that began while another was in progress

	mu     sync.Mutex
	calls  []string       // "try" and "write", as they began
	sizes  []int          // the bytes of Data each WriteFrames call was given
	wire   []outbox.Frame // what was written
	rest   []outbox.Frame // what a partial TryWrite kept
	mode   func() string  // TryWrite's outcome: "all", "none" or "part"; nil is "all"
	during func()         // when set, runs at the start of each TryWrite, outside mu
	hold   chan struct{}  // when set, each WriteFrames waits for it to close first
	fail   error          // when set, WriteFrames writes nothing and returns it
	slow   bool           // each call yields mid-way, to widen windows
}

func (f *fakeWriter) enter(kind string) {
	if f.busy.Add(1) > 1 {
		f.overlaps.Add(1)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, kind)
}

func (f *fakeWriter) WriteFrames(frames []outbox.Frame) error {
	f.enter("write")
	defer f.busy.Add(-1)
	f.mu.Lock()
	hold, slow, fail := f.hold, f.slow, f.fail
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	if slow {
		runtime.Gosched()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, fr := range frames {
		n += len(fr.Data)
	}
	f.sizes = append(f.sizes, n)
	if fail != nil {
		return fail
	}
	f.wire = append(append(f.wire, f.rest...), frames...)
	f.rest = nil
	return nil
}

func (f *fakeWriter) TryWrite(frames []outbox.Frame) (ok, more bool) {
	f.enter("try")
	defer f.busy.Add(-1)
	f.mu.Lock()
	during, slow := f.during, f.slow
	f.mu.Unlock()
	if during != nil {
		during()
	}
	if slow {
		runtime.Gosched()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.rest) > 0 {
		return false, false
	}
	mode := "all"
	if f.mode != nil {
		mode = f.mode()
	}
	k := len(frames)
	switch mode {
	case "none":
		return false, false
	case "part":
		k = len(frames) / 2 // a whole frame left, at least: the rest is never empty
	}
	f.wire = append(f.wire, frames[:k]...)
	f.rest = append(f.rest, frames[k:]...)
	return true, k < len(frames)
}

// set changes the writer's settings under its lock.
func (f *fakeWriter) set(change func(f *fakeWriter)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

// snapshot returns the calls so far and the Data of the frames written.
func (f *fakeWriter) snapshot() (calls, wire []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fr := range f.wire {
		wire = append(wire, string(fr.Data))
	}
	return slices.Clone(f.calls), wire
}

// waitWire waits, polling, until n frames were written and returns the
// calls and the wire. For tests outside a synctest bubble.
func (f *fakeWriter) waitWire(t *testing.T, n int, why string) (calls, wire []string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, wire := f.snapshot()
		return len(wire) >= n
	}, patience, time.Millisecond, "%d frames written: %s", n, why)
	return f.snapshot()
}

// running runs q's writer goroutine until the test ends; stop stops it and
// returns what Run returned.
func running(t *testing.T, q *outbox.Queue) (stop func() error) {
	t.Helper()
	stopCh := make(chan struct{})
	res := make(chan error, 1)
	go func() { res <- q.Run(stopCh) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			close(stopCh)
			err = <-res
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// frame is a frame with Data s.
func frame(s string) outbox.Frame { return outbox.Frame{Data: []byte(s)} }

// numbered is frame i of sender g, padded to about size bytes.
func numbered(g, i, size int) outbox.Frame {
	head := fmt.Sprintf(`{"g":%d,"i":%d,"pad":"`, g, i)
	pad := strings.Repeat("p", max(size-len(head)-2, 0))
	return outbox.Frame{Data: []byte(head + pad + `"}`)}
}
