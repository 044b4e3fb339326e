package integration

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// TestSessionStateErrors covers the rows of DESIGN.md's error table that
// depend on a session's state rather than on a frame's shape, each on a
// fresh session, each followed by proof that the session goes on.
func TestSessionStateErrors(t *testing.T) {
	t.Parallel()
	d := startDaemon(t,
		demo("demo", nil)+
			demo("mute", []string{"--no-read"}, `start_timeout = "300ms"`, `first_start_timeout = "300ms"`, `stdin_grace = "100ms"`, `term_grace = "100ms"`), "")

	t.Run("requests before initialize", func(t *testing.T) {
		c := dial(t, d.socket("demo"))
		m, err := c.call("1", "ping", nil)
		require.NoError(t, err)
		assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":{}}`, string(m.Frame), "ping is answered before initialize")

		m, err = c.call(`"early"`, "tools/list", nil)
		require.NoError(t, err)
		assert.Equal(t, answer{jsonrpc.CodeInvalidRequest, jsonrpc.ReasonNotInitialized, `"early"`}, answerOf(t, "demo", m))

		_, err = c.initialize("2025-06-18")
		require.NoError(t, err)
		require.NoError(t, c.echo("2", "initialized now"))
	})

	t.Run("an id already in flight", func(t *testing.T) {
		c := open(t, d.socket("demo"))
		require.NoError(t, c.send(slowCall("1", 300, 0, ""), toolCall("1", "echo", map[string]string{"text": "dup"})))
		m, err := c.read()
		require.NoError(t, err)
		assert.Equal(t, answer{jsonrpc.CodeInvalidRequest, jsonrpc.ReasonDuplicateID, "1"}, answerOf(t, "demo", m))
		m, err = c.read()
		require.NoError(t, err)
		text, err := resultText(m)
		require.NoError(t, err, "the first request 1 still completes")
		assert.Equal(t, "waited 300 ms", text)
		require.NoError(t, c.echo("1", "free again"))
		assert.Zero(t, c.mustStats(t).DuplicateIDs, "the duplicate never reached the server")
	})

	t.Run("server/discover", func(t *testing.T) {
		// Answered in any session, from what the server said of itself.
		c := open(t, d.socket("demo"))
		m, err := c.call("1", "server/discover", map[string]any{})
		require.NoError(t, err)
		var res struct {
			SupportedVersions []string `json:"supportedVersions"`
			ResultType        string   `json:"resultType"`
		}
		require.NoError(t, json.Unmarshal(m.Result, &res), "%s", m.Frame)
		assert.Equal(t, "complete", res.ResultType)
		assert.Contains(t, res.SupportedVersions, "2026-07-28")
		require.NoError(t, c.echo("2", "goes on"))
	})

	t.Run("initialize again", func(t *testing.T) {
		// Answered again from the cache (clients such as FastMCP send one on
		// every re-entry); the server never sees a second one.
		c := open(t, d.socket("demo"))
		for i, v := range []string{"2025-03-26", "2025-11-25", "2025-06-18"} {
			m, err := c.call(strconv.Itoa(10+i), "initialize", map[string]any{"protocolVersion": v, "capabilities": map[string]any{}})
			require.NoError(t, err)
			assert.Contains(t, string(m.Result), `"protocolVersion":"`+v+`"`)
		}
		require.NoError(t, c.echo("20", "goes on"))
		assert.Equal(t, 1, c.mustStats(t).Initialize, "the server saw mcpmux's one initialize")
	})

	t.Run("a server that never gets ready", func(t *testing.T) {
		c := dial(t, d.socket("mute"))
		start := time.Now()
		m, err := c.call("1", "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}})
		require.NoError(t, err)
		assert.Equal(t, answer{jsonrpc.CodeInternalError, jsonrpc.ReasonUpstreamUnavailable, "1"}, answerOf(t, "mute", m))
		assert.Less(t, time.Since(start), 5*time.Second, "start_timeout is 300ms")
		m, err = c.call("2", "ping", nil)
		require.NoError(t, err, "the session goes on")
		assert.Equal(t, jsonrpc.KindResult, m.Kind)
	})
}

// answerOf is the error response m, which must name server in its data,
// for comparison with a want.
func answerOf(tb testing.TB, server string, m *jsonrpc.Message) answer {
	tb.Helper()
	e, err := errorOf(m)
	require.NoError(tb, err)
	assert.Equal(tb, server, e.Data.Server, "data.server of %s", m.Frame)
	return answer{e.Code, e.Data.Reason, string(m.ID)}
}
