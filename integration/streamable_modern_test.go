package integration

// The 2026-07-28 binding of Streamable HTTP on the built binary: requests
// without a session, on the same URL as the 2025 sessions, to the demo
// server (a legacy server, so every modern request crosses mcpmux's
// bridge).

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// modernMeta is the envelope of the tests' 2026-07-28 requests.
var modernMeta = map[string]any{
	"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
	"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "modern-http", "version": "1"},
	"io.modelcontextprotocol/clientCapabilities": map[string]any{},
}

// modernPOST sends one 2026-07-28 request: params get the envelope, the
// headers say the revision, the method and (for a tool call) the name,
// then extra headers ("Key: value"; "Key: " removes one).
func (c *httpClient) modernPOST(tb testing.TB, ctx context.Context, id, method string, params map[string]any, extra ...string) *http.Response {
	tb.Helper()
	p := map[string]any{"_meta": modernMeta}
	for k, v := range params {
		p[k] = v
	}
	headers := []string{"MCP-Protocol-Version: 2026-07-28", "Mcp-Method: " + method}
	if name, ok := params["name"].(string); ok {
		headers = append(headers, "Mcp-Name: "+name)
	}
	return c.doCtx(tb, ctx, "POST", string(request(id, method, p)), append(headers, extra...)...)
}

// doCtx is do under ctx (also bounded by ioTimeout); "Host: NAME" sets the
// request's Host.
func (c *httpClient) doCtx(tb testing.TB, ctx context.Context, method, body string, headers ...string) *http.Response {
	tb.Helper()
	ctx, cancel := context.WithTimeout(ctx, ioTimeout)
	req, err := http.NewRequestWithContext(ctx, method, c.url, strings.NewReader(body))
	require.NoError(tb, err)
	req.Header.Set("Authorization", "Bearer "+wsToken)
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		switch {
		case k == "Host":
			req.Host = v // Go sends req.Host, never a Host header
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		cancel()
	}
	require.NoError(tb, err, "%s %s", method, body)
	tb.Cleanup(func() {
		resp.Body.Close()
		cancel()
	})
	return resp
}

// jsonAnswer reads a whole application/json answer.
func jsonAnswer(tb testing.TB, resp *http.Response) *jsonrpc.Message {
	tb.Helper()
	require.Equal(tb, "application/json", resp.Header.Get("Content-Type"))
	b, err := io.ReadAll(resp.Body)
	require.NoError(tb, err)
	m, err := jsonrpc.Parse(b)
	require.NoError(tb, err, "%s", b)
	return m
}

// TestStreamableModern: a sessionless server/discover is answered 200 with
// the server's discover result; a tool call whose Mcp-Name contradicts its
// body is a 400 with a JSON-RPC error body, and never reaches the server;
// a call answered on the same URL as a 2025 session, which goes on; the
// listener's Host, Origin and token checks refuse as on the 2025 binding;
// and a POST closed in the middle of a call has it cancelled at the server
// within a second.
func TestStreamableModern(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), wsListen)
	c := newHTTPClient(t, d, "demo")
	legacy := c.initialize(t)
	ctx := t.Context()

	resp := c.modernPOST(t, ctx, "1", "server/discover", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("Mcp-Session-Id"), "no HTTP session")
	m := jsonAnswer(t, resp)
	var disc struct {
		SupportedVersions []string        `json:"supportedVersions"`
		Capabilities      json.RawMessage `json:"capabilities"`
		ResultType        string          `json:"resultType"`
	}
	require.NoError(t, json.Unmarshal(m.Result, &disc), "%s", m.Frame)
	assert.Contains(t, disc.SupportedVersions, "2026-07-28")
	assert.Contains(t, string(disc.Capabilities), `"tools"`)
	assert.Equal(t, "complete", disc.ResultType)

	before := modernStats(t, c, ctx).Requests
	resp = c.modernPOST(t, ctx, "2", "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}}, "Mcp-Name: add")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	m = jsonAnswer(t, resp)
	require.Equal(t, jsonrpc.KindError, m.Kind)
	var e struct {
		Code int `json:"code"`
		Data struct {
			Reason string `json:"reason"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(m.Error, &e))
	assert.Equal(t, -32020, e.Code)
	assert.Equal(t, "header_mismatch", e.Data.Reason)
	assert.Equal(t, `2`, string(m.ID))
	assert.Equal(t, before+1, modernStats(t, c, ctx).Requests, "only the stats call reached the server")

	resp = c.modernPOST(t, ctx, "3", "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	text, err := resultText(jsonAnswer(t, resp))
	require.NoError(t, err)
	assert.Equal(t, "hi", text)
	evs := c.call(t, legacy, toolCall("4", "echo", map[string]any{"text": "legacy"}))
	text, err = resultText(evs[len(evs)-1].msg)
	require.NoError(t, err)
	assert.Equal(t, "legacy", text, "the 2025 session on the same URL goes on")

	// The listener's checks are the same on this binding.
	for _, tt := range []struct {
		header string
		status int
		reason string
	}{
		{"Origin: https://evil.example", http.StatusForbidden, "forbidden"},
		{"Host: evil.example", http.StatusForbidden, "forbidden"},
		{"Authorization: ", http.StatusUnauthorized, "unauthorized"},
	} {
		resp := c.modernPOST(t, ctx, "6", "server/discover", nil, tt.header)
		assert.Equal(t, tt.status, resp.StatusCode, tt.header)
		m := jsonAnswer(t, resp)
		assert.Contains(t, string(m.Error), `"reason":"`+tt.reason+`"`, tt.header)
	}

	cancelled := len(modernStats(t, c, ctx).Cancelled)
	callCtx, hangUp := context.WithCancel(ctx)
	resp = c.modernPOST(t, callCtx, "5", "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"ms": 600000}})
	require.Equal(t, http.StatusOK, resp.StatusCode, "the status went out when the hold timer ran out")
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	closed := time.Now()
	hangUp()
	testutil.Eventually(t, 5*time.Second, "the server hears the call cancelled", func() (bool, error) {
		st := modernStats(t, c, ctx)
		return len(st.Cancelled) > cancelled, nil
	})
	took := time.Since(closed)
	t.Logf("the server heard the cancellation %v after the client closed its POST", took.Round(time.Millisecond))
	assert.Less(t, took, time.Second)
}

// modernStats asks the demo server for its stats with a 2026-07-28 request.
func modernStats(t *testing.T, c *httpClient, ctx context.Context) demoStats {
	t.Helper()
	resp := c.modernPOST(t, ctx, `"stats"`, "tools/call", map[string]any{"name": "stats", "arguments": map[string]any{}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	text, err := resultText(jsonAnswer(t, resp))
	require.NoError(t, err)
	var st demoStats
	require.NoError(t, json.Unmarshal([]byte(text), &st), "%s", text)
	return st
}
