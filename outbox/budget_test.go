package outbox_test

import (
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/outbox"
)

// evictions records which shares a budget evicted, and with how much.
type evictions struct {
	mu  sync.Mutex
	got map[string]int
}

func (e *evictions) of(name string) func(int) {
	return func(queued int) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.got[name] = queued
	}
}

func (e *evictions) snapshot() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int{}
	for k, v := range e.got {
		out[k] = v
	}
	return out
}

// Three queues whose writers are stuck share a budget of 1000 bytes. While
// they hold less together nothing happens; the frame that takes the sum
// past it evicts the queue that holds the most (not the one that sent it),
// once, and only that one while its bytes are still queued; closing it
// gives its bytes back, and what is written leaves the budget too.
func TestBudgetEvictsTheLargestFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := outbox.NewBudget(1000)
		ev := &evictions{got: map[string]int{}}
		hold := make(chan struct{})
		queues := map[string]*outbox.Queue{}
		for _, name := range []string{"a", "big", "c"} {
			q := newQueue(&fakeWriter{hold: hold}, outbox.Config{Separator: 1, Share: b.Join(ev.of(name))})
			running(t, q)
			queues[name] = q
		}
		require.NoError(t, queues["a"].Send(numbered(0, 0, 99)))
		require.NoError(t, queues["big"].Send(numbered(0, 0, 599)))
		require.NoError(t, queues["c"].Send(numbered(0, 0, 199)))
		synctest.Wait()
		assert.Equal(t, 900, b.Queued())
		assert.Empty(t, ev.snapshot(), "within the budget")

		require.NoError(t, queues["c"].Send(numbered(0, 1, 199)), "c takes the sum to 1100")
		assert.Equal(t, map[string]int{"big": 600}, ev.snapshot(), "the largest goes, not the sender")
		require.NoError(t, queues["a"].Send(numbered(0, 1, 99)), "1200, but big's 600 are on their way out")
		assert.Equal(t, map[string]int{"big": 600}, ev.snapshot(), "no second eviction")

		queues["big"].Close()
		assert.Equal(t, 600, b.Queued(), "a closed queue leaves the budget")
		close(hold)
		synctest.Wait()
		assert.Equal(t, 0, b.Queued(), "written bytes leave it")
	})
}

// Several shares may have to go for the rest to fit.
func TestBudgetEvictsUntilTheRestFit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := outbox.NewBudget(1000)
		ev := &evictions{got: map[string]int{}}
		hold := make(chan struct{})
		defer close(hold)
		var qs []*outbox.Queue
		for i, name := range []string{"p", "q", "r"} {
			q := newQueue(&fakeWriter{hold: hold}, outbox.Config{Separator: 1, Share: b.Join(ev.of(name))})
			running(t, q)
			require.NoError(t, q.Send(numbered(0, 0, 299+100*i)))
			qs = append(qs, q)
		}
		assert.Equal(t, map[string]int{"r": 500}, ev.snapshot(), "300 + 400 + 500: the last, the largest")
		require.NoError(t, qs[0].Send(numbered(0, 1, 699)), "p: 1000, q: 400, r going")
		assert.Equal(t, map[string]int{"r": 500, "p": 1000}, ev.snapshot(), "the largest of those left")
	})
}
