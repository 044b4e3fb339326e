package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/upstream"
)

// TestStartKeyEra: the same command opened in another era is remembered
// apart (a server of both eras describes itself per era); "auto" keeps the
// key the command alone gives.
func TestStartKeyEra(t *testing.T) {
	base := mux.Config{Upstream: upstream.Config{Command: "/bin/server", Args: []string{"-x"}}}
	auto := base
	auto.Protocol = "auto"
	modern := base
	modern.Protocol = "modern"
	legacy := base
	legacy.Protocol = "legacy"
	assert.Equal(t, startKey(base), startKey(auto))
	assert.NotEqual(t, startKey(base), startKey(modern))
	assert.NotEqual(t, startKey(base), startKey(legacy))
	assert.NotEqual(t, startKey(modern), startKey(legacy))
}

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
