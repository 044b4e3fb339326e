package integration

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestEndpointListsFromMemory: an endpoint of three lazy servers that each
// take 3 s to start. The first daemon starts them for its first session
// and keeps their lists in the state folder; the next daemon answers an
// endpoint session's initialize and tools/list from there, in under 100
// ms, with no server started; a call then starts only the server it names.
func TestEndpointListsFromMemory(t *testing.T) {
	t.Parallel()
	state := filepath.Join(testutil.ShortDir(t), "state")
	servers := ""
	for i, name := range []string{"a", "b", "c"} {
		// Started each its own way (the memory is kept per command line).
		servers += demo(name, []string{"--start-delay", "3s", "--max-line", fmt.Sprint(1<<20 + i)}, `start = "lazy"`)
	}
	cfg := writeConfig(t, servers+"[endpoints.trio]\nservers = [\"a\", \"b\", \"c\"]\n", "")
	cfg.env = []string{"XDG_STATE_HOME=" + state}
	cfg.servers = []string{"trio"} // probe the endpoint alone: a probe of a server's own socket would start it

	first := serveConfig(t, cfg)
	began := time.Now()
	c := dial(t, first.socket("trio"))
	_, err := c.initialize("2025-06-18")
	require.NoError(t, err)
	cold := trioTools(t, c, `"cold"`)
	coldTook := time.Since(began)
	c.close()
	testutil.Until(t, 20*time.Second, "each server's lists kept in the state folder", func() bool {
		kept, _ := filepath.Glob(filepath.Join(state, "mcpmux", "servers", "*", "tools-list.json"))
		return len(kept) == 3
	})
	first.stop()

	second := serveConfig(t, cfg)
	began = time.Now()
	c = dial(t, second.socket("trio"))
	defer c.close()
	_, err = c.initialize("2025-06-18")
	require.NoError(t, err)
	initTook := time.Since(began)
	began = time.Now()
	warm := trioTools(t, c, `"warm"`)
	listTook := time.Since(began)
	assert.Less(t, listTook, 100*time.Millisecond, "tools/list from memory")
	assert.ElementsMatch(t, cold, warm, "the same tools as the servers listed")
	st := status(t, cfg.path)
	for _, name := range []string{"a", "b", "c"} {
		state, pid := st.server(name)
		assert.Equal(t, "idle", state, "%s is not started by initialize and lists", name)
		assert.Zero(t, pid, name)
	}
	t.Logf("three servers taking 3 s to start, through one endpoint: initialize+tools/list %v cold; from the state folder initialize %v, tools/list %v, no server started",
		coldTook.Round(time.Millisecond), initTook.Round(time.Millisecond), listTook.Round(time.Millisecond))

	m, err := c.tool(`"call"`, "b__echo", map[string]string{"text": "hi"})
	require.NoError(t, err)
	text, err := resultText(m)
	require.NoError(t, err, "%s", m.Frame)
	assert.Equal(t, "hi", text)
	st = status(t, cfg.path)
	for name, want := range map[string]string{"a": "idle", "b": "ready", "c": "idle"} {
		state, _ := st.server(name)
		assert.Equal(t, want, state, "a call starts only the server it names: %s", name)
	}
}

// trioTools lists the endpoint's tools under id.
func trioTools(t *testing.T, c *client, id string) []string {
	t.Helper()
	m, err := c.call(id, "tools/list", nil)
	require.NoError(t, err)
	names := toolNames(t, m)
	for _, s := range []string{"a", "b", "c"} {
		require.Contains(t, names, s+"__echo", "%s", m.Frame)
	}
	return names
}
