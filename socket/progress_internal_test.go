package socket

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestQuietWatch: a peer is dead only after quiet time the watch could
// see: a byte resets the count, and a pause of the daemon's own (a gap
// between ticks far over the step) counts for no more than two steps.
func TestQuietWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const step, limit = time.Second, 5 * time.Second
	w := quietWatch{max: limit, step: step, last: t0}
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

	assert.False(t, w.tick(at(1), 1*time.Second))
	assert.False(t, w.tick(at(2), 2*time.Second))
	assert.False(t, w.tick(at(3), 300*time.Millisecond), "a byte came")
	assert.False(t, w.tick(at(4), 1300*time.Millisecond))
	// The daemon was starved for a minute: it counts for two steps only.
	assert.False(t, w.tick(at(64), 61300*time.Millisecond), "a pause of ours is not the peer's silence")
	assert.False(t, w.tick(at(65), 62300*time.Millisecond))
	assert.True(t, w.tick(at(66), 63300*time.Millisecond), "quiet for more than the limit, counted")
}
