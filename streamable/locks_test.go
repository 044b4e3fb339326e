package streamable_test

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestLocks holds the package doc's "Locks" to its word: the nestings it
// names, in its order, and no other; nothing blocks or writes under a lock
// but what it names.
func TestLocks(t *testing.T) {
	const memo = "named in the package doc: a session's memo writes its record to the Store under its lock"
	testutil.CheckLocks(t, ".", testutil.LockRules{
		Order: [][2]string{
			{"streamable.Handler", "streamable.transport"},
			{"streamable.transport", "streamable.stream"},
		},
		Allowed: map[string]string{
			"(github.com/mcpmux/mcpmux/streamable.Store).Save":  memo,
			"(github.com/mcpmux/mcpmux/streamable.Store).Touch": memo,
		},
	}, 21)
}
