package outbox_test

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestLockOrder holds the package doc to its word: the one nesting is a
// Queue's lock, then its Budget's; eviction (a callback) runs under
// neither, and nothing blocks or writes under a lock.
func TestLockOrder(t *testing.T) {
	testutil.CheckLocks(t, ".", testutil.LockRules{
		Order: [][2]string{{"outbox.Queue", "outbox.Budget"}, {"outbox.Queue", "outbox.served"}},
	}, 6)
}
