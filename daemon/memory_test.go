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

// TestStartKeyEnvAndCapabilities: a server started with another env or
// declared other upstream_capabilities may list other tools, so it is
// remembered apart; the same ones, in any order, give the same key, and a
// server with neither keeps the key its command alone gives (the key of
// earlier versions: 9515fc17c6bbdcd46600 is that of /bin/server -x).
func TestStartKeyEnvAndCapabilities(t *testing.T) {
	base := mux.Config{Upstream: upstream.Config{Command: "/bin/server", Args: []string{"-x"}}}
	assert.Equal(t, "9515fc17c6bbdcd46600", startKey(base))
	env := base
	env.Upstream.Env = map[string]string{"A": "1", "B": "2"}
	same := base
	same.Upstream.Env = map[string]string{"B": "2", "A": "1"}
	other := base
	other.Upstream.Env = map[string]string{"A": "1", "B": "3"}
	caps := base
	caps.UpstreamCapabilities = []byte(`{"elicitation":{"url":{}}}`)
	assert.Equal(t, startKey(env), startKey(same))
	assert.NotEqual(t, startKey(base), startKey(env))
	assert.NotEqual(t, startKey(env), startKey(other))
	assert.NotEqual(t, startKey(base), startKey(caps))
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

// A server's lists are kept beside its description, one file a list,
// written whole; a list too large, or a link, is done without.
func TestMemoryKeepsLists(t *testing.T) {
	m := memoryDir{dir: filepath.Join(t.TempDir(), "servers", "k")}
	era, res := m.List("tools/list")
	assert.Empty(t, era)
	assert.Nil(t, res, "nothing known")

	require.NoError(t, m.RememberList("tools/list", "legacy", []byte(`{"tools":[{"name":"a"}]}`)))
	require.NoError(t, m.RememberList("resources/templates/list", "legacy", []byte(`{"resourceTemplates":[]}`)))
	era, res = m.List("tools/list")
	assert.Equal(t, "legacy", era)
	assert.JSONEq(t, `{"tools":[{"name":"a"}]}`, string(res))
	_, res = m.List("resources/templates/list")
	assert.JSONEq(t, `{"resourceTemplates":[]}`, string(res))
	_, res = m.List("prompts/list")
	assert.Nil(t, res)
	for _, f := range []string{"tools-list.json", "resources-templates-list.json"} {
		fi, err := os.Stat(filepath.Join(m.dir, f))
		require.NoError(t, err, f)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}

	big := []byte(`{"tools":"` + string(make([]byte, maxDescription)) + `"}`)
	assert.Error(t, m.RememberList("tools/list", "legacy", big), "no larger than a message")
	_, res = m.List("tools/list")
	assert.JSONEq(t, `{"tools":[{"name":"a"}]}`, string(res), "the old one stays")

	victim := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(victim, []byte(`{"era":"legacy","result":{"tools":[]}}`), 0o600))
	require.NoError(t, os.Remove(filepath.Join(m.dir, "tools-list.json")))
	require.NoError(t, os.Symlink(victim, filepath.Join(m.dir, "tools-list.json")))
	_, res = m.List("tools/list")
	assert.Nil(t, res, "a link says nothing")
}
