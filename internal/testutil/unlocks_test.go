package testutil_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestEveryUnlockIsDeferred holds the whole module to the house rule that
// every lock is released by defer (STYLE rule 10), so that a panic
// recovered at the session boundary never leaves a lock held.
func TestEveryUnlockIsDeferred(t *testing.T) {
	root := testutil.ModuleRoot(t)
	problems, n, err := testutil.UndeferredUnlocks(root)
	require.NoError(t, err)
	assert.Greater(t, n, 100, "the check found the module's unlocks")
	assert.Empty(t, problems, "unlocks that are not deferred")
}

func TestUndeferredUnlocks(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"go.mod": "module m\n",
		"a/a.go": `package a

import "sync"

var mu sync.RWMutex

func good() { mu.Lock(); defer mu.Unlock() }
func bad() { mu.RLock(); mu.RUnlock() }
`,
		"a/a_test.go":   "package a\nfunc t() { mu.Lock(); mu.Unlock() }\n",
		"nested/go.mod": "module nested\n",
		"nested/n.go":   "package nested\nimport \"sync\"\nfunc n(mu *sync.Mutex) { mu.Unlock() }\n",
	}
	for name, text := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	}
	problems, n, err := testutil.UndeferredUnlocks(root)
	require.NoError(t, err)
	assert.Equal(t, []string{"a/a.go:8: mu.RUnlock() is not deferred"}, problems)
	assert.Equal(t, 2, n, "unlocks found")
}
