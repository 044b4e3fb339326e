package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The kinds of request that ask are kept one a line; the empty file an
// older mcpmux left says only that the server asks.
func TestMemoryKeepsAskingKinds(t *testing.T) {
	m := memoryDir{dir: filepath.Join(t.TempDir(), "servers", "k")}
	kinds, all := m.Asks()
	assert.Empty(t, kinds)
	assert.False(t, all, "nothing known")

	require.NoError(t, os.MkdirAll(m.dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(m.dir, sendsRequestsFile), nil, 0o600))
	kinds, all = m.Asks()
	assert.Empty(t, kinds)
	assert.True(t, all, "an older record: every interactive request takes turns")

	require.NoError(t, m.RememberAsks("tools/call ask"))
	require.NoError(t, m.RememberAsks("prompts/get a\nprompt"))
	require.NoError(t, m.RememberAsks("tools/call ask"))
	kinds, all = m.Asks()
	assert.Equal(t, []string{"tools/call ask", "prompts/get a\nprompt"}, kinds)
	assert.False(t, all)
}
