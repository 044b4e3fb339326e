package mux

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestIdleSessionStack: an idle session keeps one goroutine, parked in its
// read, with the stack its deepest work grew. The handshake runs aside, so
// 300 sessions that initialized and answered a ping keep the 4 KiB a
// goroutine starts with here (more under the race detector, whose frames
// are larger), not the 8 KiB that initialize would grow each to.
func TestIdleSessionStack(t *testing.T) {
	h := newHarness(t, nil)
	h.session("2025-06-18") // the server started and described
	const n = 300
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()
	for range n {
		h.session("2025-06-18")
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.StackInuse) - int64(before.StackInuse)) / n
	t.Logf("%d idle sessions: %.2f goroutines and %d bytes of stack each", n, float64(runtime.NumGoroutine()-goroutines)/n, per)
	limit := int64(4<<10 + 512)
	if raceEnabled {
		limit = 8<<10 + 512
	}
	assert.LessOrEqual(t, per, limit, "stack bytes per idle session")
}
