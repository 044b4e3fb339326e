package streamable

import "sync/atomic"

// Defaults of the bounds on what the streams keep for resumption.
const (
	DefaultReplaySessionBytes = 4 << 20  // per HTTP session
	DefaultReplayBytes        = 64 << 20 // all HTTP sessions together
)

// replayBudget counts the bytes that one session's streams keep, and
// those that every session of the Handler keeps: past either bound, the
// events already delivered are dropped (stream.trimLocked). Events not yet
// delivered are counted but always kept, within the stream's own bounds.
type replayBudget struct {
	session    atomic.Int64
	daemon     *atomic.Int64
	sessionMax int64
	daemonMax  int64
}

// add counts n more bytes kept (fewer when n < 0); a nil budget counts
// nothing.
func (b *replayBudget) add(n int) {
	if b == nil || n == 0 {
		return
	}
	b.session.Add(int64(n))
	b.daemon.Add(int64(n))
}

// over reports whether the session or the daemon keeps more than its
// bound.
func (b *replayBudget) over() bool {
	if b == nil {
		return false
	}
	return b.session.Load() > b.sessionMax || b.daemon.Load() > b.daemonMax
}

// fits reports whether n more bytes keep the session and the daemon within
// their bounds.
func (b *replayBudget) fits(n int) bool {
	if b == nil {
		return true
	}
	return b.session.Load()+int64(n) <= b.sessionMax && b.daemon.Load()+int64(n) <= b.daemonMax
}
