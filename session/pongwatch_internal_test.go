package session

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestPongWatch: the keepalive drops a client only for a ping it sent that
// stayed unanswered for the timeout of time it could see while reading; a
// long gap between ticks (the daemon paused, the clock jumped) counts for
// two ticks at most.
func TestPongWatch(t *testing.T) {
	const timeout, step = 60 * time.Second, 15 * time.Second
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type tick struct {
		at      time.Duration
		seen    uint64
		reading bool
		drop    bool
	}
	tests := []struct {
		name  string
		ping  bool // a ping was sent before the first tick
		ticks []tick
	}{
		{"silence with no ping sent", false, []tick{
			{15 * time.Second, 0, true, false}, {120 * time.Second, 0, true, false}, {600 * time.Second, 0, true, false},
		}},
		{"a ping unanswered while reading", true, []tick{
			{15 * time.Second, 0, true, false}, {30 * time.Second, 0, true, false}, {45 * time.Second, 0, true, false},
			{60 * time.Second, 0, true, false}, {75 * time.Second, 0, true, true},
		}},
		{"a ping answered", true, []tick{
			{15 * time.Second, 0, true, false}, {30 * time.Second, 1, true, false}, {90 * time.Second, 1, true, false}, {150 * time.Second, 1, true, false},
		}},
		{"not reading: no pong expected", true, []tick{
			{15 * time.Second, 0, false, false}, {90 * time.Second, 0, false, false}, {300 * time.Second, 0, false, false},
		}},
		{"a pause of 70 s, the pong read after it", true, []tick{
			{15 * time.Second, 0, true, false}, {85 * time.Second, 0, true, false}, {86 * time.Second, 1, true, false},
		}},
		{"a pause of an hour, still unanswered after", true, []tick{
			{15 * time.Second, 0, true, false}, {time.Hour, 0, true, false},
			{time.Hour + 15*time.Second, 0, true, false}, {time.Hour + 30*time.Second, 0, true, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newPongWatch(timeout, step, t0)
			if tt.ping {
				w.sent(0)
			}
			for i, tk := range tt.ticks {
				assert.Equal(t, tk.drop, w.tick(at(tk.at), tk.seen, tk.reading), "tick %d at %v", i, tk.at)
			}
		})
	}
}
