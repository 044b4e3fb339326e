package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// TestToolViewsAtTheServer: a server's deny_tools applies to every session
// of it. A direct session's tools/list lacks the hidden tools and a call
// to one is refused -32602 unknown_tool, and the demo server's own count
// of requests shows it never saw the call; the same for a 2026-07-28
// request, and through the endpoint all (`mcpmux connect` with no name,
// prefixed names); after notifications/tools/list_changed the lists asked
// again are still filtered; and after a restart, the list answered from
// the state folder while the server starts is filtered too.
func TestToolViewsAtTheServer(t *testing.T) {
	t.Parallel()
	state := filepath.Join(testutil.ShortDir(t), "state")
	cfg := writeConfig(t, demo("demo", []string{"--start-delay", "2s"}, `deny_tools = ["crash", "j*"]`), "")
	cfg.env = []string{"XDG_STATE_HOME=" + state}
	d := serveConfig(t, cfg)

	c := open(t, d.socket("demo"))
	names := listedTools(t, c, `"l1"`)
	assert.Contains(t, names, "echo")
	assert.Contains(t, names, "stats")
	for _, hidden := range []string{"crash", "junk"} {
		assert.NotContains(t, names, hidden, "hidden by the server's view")
	}

	modern := dial(t, d.socket("demo"))
	m, err := modern.call(`"m1"`, "tools/list", map[string]any{"_meta": modernMeta})
	require.NoError(t, err)
	require.Equal(t, jsonrpc.KindResult, m.Kind, "2026-07-28 tools/list: %s", m.Frame)
	assert.NotContains(t, string(m.Result), `"crash"`, "2026-07-28 list")
	assert.Contains(t, string(m.Result), `"echo"`, "2026-07-28 list")

	b := startBridge(t, nil, "--config", d.path)
	b.send(request(`"init"`, "initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "integration", "version": "1"},
	}))
	m, _ = b.await(`"init"`)
	require.Equal(t, jsonrpc.KindResult, m.Kind, "initialize through the endpoint: %s", m.Frame)
	b.send(notification("notifications/initialized", nil))
	endpointTools := func(id string) []string {
		t.Helper()
		b.send(request(id, "tools/list", nil))
		m, _ := b.await(id)
		return toolNames(t, m)
	}
	names = endpointTools(`"e1"`)
	assert.Contains(t, names, "demo__echo")
	assert.NotContains(t, names, "demo__crash", "through the endpoint")
	assert.NotContains(t, names, "demo__junk", "through the endpoint")

	// A call to a hidden tool, directly in each era and through the
	// endpoint, is refused: the server receives nothing between two stats
	// calls.
	refused := func(what string, m *jsonrpc.Message, tool string) {
		t.Helper()
		e, err := errorOf(m)
		require.NoError(t, err, what)
		assert.Equal(t, jsonrpc.CodeInvalidParams, e.Code, what)
		assert.Equal(t, jsonrpc.ReasonUnknownTool, e.Data.Reason, what)
		assert.Contains(t, e.Message, "unknown tool", what)
		assert.Contains(t, e.Message, tool, what)
	}
	before := c.mustStats(t)
	m, err = c.tool(`"hidden"`, "crash", nil)
	require.NoError(t, err)
	refused("direct call", m, "crash")
	m, err = modern.call(`"m2"`, "tools/call", map[string]any{"name": "junk", "_meta": modernMeta})
	require.NoError(t, err)
	refused("2026-07-28 call", m, "junk")
	b.send(toolCall(`"e2"`, "demo__crash", nil))
	m, _ = b.await(`"e2"`)
	refused("call through the endpoint", m, "crash")
	after := c.mustStats(t)
	assert.Equal(t, before.PID, after.PID, "the server still runs (crash would have ended it)")
	assert.Equal(t, before.Requests+1, after.Requests, "the server received only the second stats call")

	// The server says its tools changed: every session hears it, and the
	// lists asked again are still filtered.
	m, err = c.tool(`"notify"`, "notify", map[string]any{"method": "notifications/tools/list_changed"})
	require.NoError(t, err)
	require.Equal(t, jsonrpc.KindResult, m.Kind, "notify: %s", m.Frame)
	for {
		if m := b.next(); m.Method == "notifications/tools/list_changed" {
			break
		}
	}
	names = endpointTools(`"e3"`)
	assert.Contains(t, names, "demo__echo")
	assert.NotContains(t, names, "demo__crash", "refreshed through the endpoint")
	names = listedTools(t, c, `"l2"`)
	assert.Contains(t, names, "echo")
	assert.NotContains(t, names, "crash", "refreshed")

	// The list is kept whole in the state folder; the next daemon answers
	// it from there while the server takes 2 s to start, filtered.
	testutil.Until(t, 10*time.Second, "the list kept in the state folder", func() bool {
		kept, _ := filepath.Glob(filepath.Join(state, "mcpmux", "servers", "*", "tools-list.json"))
		return len(kept) == 1
	})
	kept, _ := filepath.Glob(filepath.Join(state, "mcpmux", "servers", "*", "tools-list.json"))
	b.close()
	d.stop()
	d = serveConfig(t, cfg)
	began := time.Now()
	c = open(t, d.socket("demo"))
	names = listedTools(t, c, `"l3"`)
	took := time.Since(began)
	assert.Less(t, took, time.Second, "initialize and tools/list from the state folder, not from the starting server")
	assert.Contains(t, names, "echo")
	assert.NotContains(t, names, "crash", "from the state folder, through the view")
	assert.NotContains(t, names, "junk", "from the state folder, through the view")
	whole, err := os.ReadFile(kept[0])
	require.NoError(t, err)
	assert.Contains(t, string(whole), `"crash"`, "the state folder keeps the server's whole list")

	// A reload that changes the view applies it to the running server:
	// the session stays, hears that its tools changed, and lists anew.
	text, err := os.ReadFile(cfg.path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfg.path, bytes.Replace(text, []byte(`deny_tools = ["crash", "j*"]`), []byte(`deny_tools = ["j*"]`), 1), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	out, err := mcpmux(ctx, "reload", "--config", cfg.path).CombinedOutput()
	require.NoError(t, err, "mcpmux reload: %s", out)
	assert.Contains(t, string(out), "tool view changed: demo")
	require.NoError(t, c.send(request(`"l4"`, "tools/list", nil)))
	m, heard, err := c.await(`"l4"`)
	require.NoError(t, err)
	names = toolNames(t, m)
	assert.Contains(t, names, "crash", "shown after the reload")
	assert.NotContains(t, names, "junk", "still hidden after the reload")
	var told bool
	for _, n := range heard {
		told = told || n.Method == "notifications/tools/list_changed"
	}
	assert.True(t, told, "the session heard that its tools changed before its answer")
}

// listedTools lists a session's tools under id.
func listedTools(t *testing.T, c *client, id string) []string {
	t.Helper()
	m, err := c.call(id, "tools/list", nil)
	require.NoError(t, err)
	return toolNames(t, m)
}

// toolNames are the names of a tools/list answer.
func toolNames(t *testing.T, m *jsonrpc.Message) []string {
	t.Helper()
	require.Equal(t, jsonrpc.KindResult, m.Kind, "tools/list: %s", m.Frame)
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(m.Result, &list), "%s", m.Result)
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	return names
}
