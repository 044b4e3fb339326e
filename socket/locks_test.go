package socket_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestLocks holds the package doc's "Locks" to its word: its one nesting,
// in its order, and nothing that blocks or writes under a lock.
func TestLocks(t *testing.T) {
	problems, n, err := testutil.LockProblems(".", testutil.LockRules{
		Order: [][2]string{{"socket.umaskMu", "syscall.ForkLock"}},
	})
	require.NoError(t, err)
	assert.Greater(t, n, 2, "the check found the package's locks")
	assert.Empty(t, problems, "what breaks the rule:\n%s", strings.Join(problems, "\n"))
}
