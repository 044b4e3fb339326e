package outbox

import (
	"sync"
	"sync/atomic"
)

// Budget bounds the bytes queued in many queues together (every session of
// a daemon, whatever its transport), on top of each queue's own Max: when
// their sum passes the budget, the queue that holds the most is evicted
// first, then the next, until the rest fit. Each queue takes part through
// a Share (Config.Share); its bytes count from the moment they are queued
// until they are written, dropped, or the queue is closed, which also
// leaves the budget.
//
// Queues update their share with atomics under their own lock; the check
// runs after a frame is queued, outside that lock, and only when the sum
// is over the budget does it take the budget's lock to find the largest.
type Budget struct {
	max   int64
	total atomic.Int64

	mu     sync.Mutex
	shares map[*Share]struct{}
}

// NewBudget returns a budget of max bytes; max must be positive.
func NewBudget(max int) *Budget {
	if max <= 0 {
		panic("outbox: a budget must be positive")
	}
	return &Budget{max: int64(max), shares: make(map[*Share]struct{})}
}

// Max is the budget's bound.
func (b *Budget) Max() int { return int(b.max) }

// Queued is the bytes queued in every share together.
func (b *Budget) Queued() int { return int(b.total.Load()) }

// Join returns a share for one queue. evict is called, once, when the
// share is chosen for eviction (it holds the most while the budget is
// passed); it must not block, and should end the queue's owner, which
// closes the queue.
func (b *Budget) Join(evict func(queued int)) *Share {
	s := &Share{b: b, evict: evict}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.shares[s] = struct{}{}
	return s
}

// Share is one queue's part of a Budget. Its bytes change only under the
// queue's lock.
type Share struct {
	b     *Budget
	bytes atomic.Int64
	evict func(queued int)
	left  bool // the queue closed; under the queue's lock

	chosen bool // picked for eviction; under b.mu
}

// Queued is what this share holds.
func (s *Share) Queued() int { return int(s.bytes.Load()) }

// add counts n bytes in (or out, negative). The queue's lock is held.
func (s *Share) add(n int) {
	if s == nil || s.left || n == 0 {
		return
	}
	s.bytes.Add(int64(n))
	s.b.total.Add(int64(n))
}

// leave takes what the share holds off the budget, for good. The queue's
// lock is held.
func (s *Share) leave() {
	if s == nil || s.left {
		return
	}
	s.b.total.Add(-s.bytes.Swap(0))
	s.left = true
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	delete(s.b.shares, s)
}

// enforce evicts the largest shares while the budget is passed. Shares
// already chosen, whose queues have yet to close, count as gone, so one
// spell over the budget evicts no more than it must. No queue lock is held.
func (b *Budget) enforce() {
	if b.total.Load() <= b.max {
		return
	}
	for _, s := range b.choose() {
		s.evict(s.Queued())
	}
}

// choose marks and returns the shares to evict: the largest first, until
// what the others hold fits.
func (b *Budget) choose() []*Share {
	b.mu.Lock()
	defer b.mu.Unlock()
	over := b.total.Load() - b.max
	for s := range b.shares {
		if s.chosen {
			over -= s.bytes.Load()
		}
	}
	var out []*Share
	for over > 0 {
		var top *Share
		for s := range b.shares {
			if !s.chosen && s.bytes.Load() > 0 && (top == nil || s.bytes.Load() > top.bytes.Load()) {
				top = s
			}
		}
		if top == nil {
			break
		}
		top.chosen = true
		over -= top.bytes.Load()
		out = append(out, top)
	}
	return out
}
