package socket_test

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestLocks holds the package doc's "Locks" to its word: its one nesting,
// in its order, and nothing that blocks or writes under a lock.
func TestLocks(t *testing.T) {
	testutil.CheckLocks(t, ".", testutil.LockRules{
		Order: [][2]string{{"socket.umaskMu", "syscall.ForkLock"}},
	}, 3)
}
