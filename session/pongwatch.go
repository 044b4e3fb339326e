package session

import "time"

// pongWatch decides when a WebSocket client has left a ping unanswered for
// too long. It counts only time it could see: time on the monotonic clock,
// between ticks of its own, while the session was reading (control frames
// are read only along with messages). A pause of the daemon (stopped,
// swapped out, a suspended machine) or a jump of the wall clock is
// therefore never taken for the client's silence, and a client is dropped
// only for a ping that was actually sent. Only the keepalive goroutine
// uses it; signs of life are counted elsewhere and passed in.
type pongWatch struct {
	timeout time.Duration // unanswered time, while reading, that drops the client
	step    time.Duration // the keepalive's tick: no gap between two ticks counts for more than twice it

	last    time.Time     // the previous tick
	pending bool          // a ping was sent and no sign of life came since
	mark    uint64        // the count of signs of life before that ping was written
	waited  time.Duration // time counted against the ping since
}

func newPongWatch(timeout, step time.Duration, now time.Time) pongWatch {
	return pongWatch{timeout: timeout, step: step, last: now}
}

// sent records a ping written; seen is the count of signs of life read
// before it was written. The oldest unanswered ping is the one that
// counts.
func (p *pongWatch) sent(seen uint64) {
	if !p.pending {
		p.pending, p.mark, p.waited = true, seen, 0
	}
}

// tick is the keepalive's tick at now, with the count of signs of life so
// far and whether the session is reading. It reports whether the client
// must be dropped.
func (p *pongWatch) tick(now time.Time, seen uint64, reading bool) bool {
	gap := now.Sub(p.last)
	p.last = now
	if p.pending && seen != p.mark {
		p.pending = false // answered, or at least alive
	}
	if !p.pending || !reading {
		return false
	}
	p.waited += min(gap, 2*p.step)
	return p.waited > p.timeout
}
