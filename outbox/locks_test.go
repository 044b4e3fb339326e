package outbox_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestLockOrder holds the package doc to its word: the one nesting is a
// Queue's lock, then its Budget's; eviction (a callback) runs under
// neither, and nothing blocks or writes under a lock.
func TestLockOrder(t *testing.T) {
	problems, n, err := testutil.LockProblems(".", testutil.LockRules{
		Order: [][2]string{{"outbox.Queue", "outbox.Budget"}},
	})
	require.NoError(t, err)
	assert.Greater(t, n, 5, "the check found the package's locks")
	assert.Empty(t, problems, "what breaks the rule:\n%s", strings.Join(problems, "\n"))
}
