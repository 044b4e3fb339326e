package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// httpClient speaks Streamable HTTP to one server of a daemon. It keeps no
// idle connections, so that nothing of it outlives the test.
type httpClient struct {
	url string
	hc  *http.Client
}

func newHTTPClient(tb testing.TB, d *daemon, name string) *httpClient {
	tb.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	tb.Cleanup(tr.CloseIdleConnections)
	return &httpClient{url: "http://" + d.webAddr() + "/servers/" + name, hc: &http.Client{Transport: tr}}
}

// do sends a request with the token and both Accept types, plus headers
// given as "Key: value" ("Key: " removes one). The response body is closed
// at cleanup; the request ends after ioTimeout.
func (c *httpClient) do(tb testing.TB, method, body string, headers ...string) *http.Response {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url, rd)
	require.NoError(tb, err)
	req.Header.Set("Authorization", "Bearer "+wsToken)
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		if v == "" {
			req.Header.Del(k)
		} else {
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

// event is one SSE event: its id and its message.
type event struct {
	id  string
	msg *jsonrpc.Message
}

// events reads SSE events: n of them, or until the stream ends if n < 0.
func events(tb testing.TB, resp *http.Response, n int) []event {
	tb.Helper()
	require.Equal(tb, http.StatusOK, resp.StatusCode)
	require.Equal(tb, "text/event-stream", resp.Header.Get("Content-Type"))
	br := bufio.NewReader(resp.Body)
	var out []event
	var id, data string
	for n < 0 || len(out) < n {
		line, err := br.ReadString('\n')
		if err == io.EOF && n < 0 {
			return out
		}
		require.NoError(tb, err, "the stream after %d events", len(out))
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "" && data != "":
			m, err := jsonrpc.Parse([]byte(data))
			require.NoError(tb, err, "event %q", data)
			out = append(out, event{id, m})
			id, data = "", ""
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		}
	}
	return out
}

// initialize opens a session (protocol 2025-06-18, declaring nothing) and
// returns its id.
func (c *httpClient) initialize(tb testing.TB) string {
	tb.Helper()
	resp := c.do(tb, "POST", string(request("0", "initialize", map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "http", "version": "1"},
	})))
	sid := resp.Header.Get("Mcp-Session-Id")
	require.NotEmpty(tb, sid, "initialize issues Mcp-Session-Id")
	for _, b := range []byte(sid) {
		require.True(tb, b >= 0x21 && b <= 0x7e, "session id %q is visible ASCII", sid)
	}
	evs := events(tb, resp, -1)
	require.Len(tb, evs, 1)
	require.Equal(tb, jsonrpc.KindResult, evs[0].msg.Kind, "%s", evs[0].msg.Frame)
	resp = c.do(tb, "POST", string(notification("notifications/initialized", nil)), "Mcp-Session-Id: "+sid, "MCP-Protocol-Version: 2025-06-18")
	require.Equal(tb, http.StatusAccepted, resp.StatusCode)
	return sid
}

// call sends one request on session sid and returns the messages of its
// stream, the response last.
func (c *httpClient) call(tb testing.TB, sid string, frame []byte) []event {
	tb.Helper()
	evs := events(tb, c.do(tb, "POST", string(frame), "Mcp-Session-Id: "+sid, "MCP-Protocol-Version: 2025-06-18"), -1)
	require.NotEmpty(tb, evs)
	return evs
}

// TestStreamableHTTP drives the demo server over Streamable HTTP: sessions,
// answers, progress, colliding ids, the GET stream and its resumption,
// DELETE, and the refusals.
func TestStreamableHTTP(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), wsListen+"\nhttp_origins = [\"https://app.example\"]")
	c := newHTTPClient(t, d, "demo")
	a := c.initialize(t)

	evs := c.call(t, a, toolCall("1", "echo", map[string]any{"text": "hello"}))
	require.Len(t, evs, 1)
	text, err := resultText(evs[0].msg)
	require.NoError(t, err)
	assert.Equal(t, "hello", text)

	// Progress comes on the POST's stream, with the client's own token,
	// before the response.
	slow := request(`"s"`, "tools/call", json.RawMessage(`{"name":"slow","arguments":{"ms":200,"steps":2},"_meta":{"progressToken":"tok"}}`))
	evs = c.call(t, a, slow)
	require.Len(t, evs, 3, "two progress notifications, then the response")
	for _, ev := range evs[:2] {
		tok, ok := progressToken(ev.msg)
		require.True(t, ok, "%s", ev.msg.Frame)
		assert.Equal(t, `"tok"`, tok)
	}
	assert.Equal(t, `"s"`, string(evs[2].msg.ID))
	assert.Equal(t, jsonrpc.KindResult, evs[2].msg.Kind)

	// Two sessions, the same ids at once: each its own answers.
	b := c.initialize(t)
	var wg sync.WaitGroup
	resps := map[string]*http.Response{}
	for _, sid := range []string{a, b} {
		resps[sid] = c.do(t, "POST", string(toolCall("7", "echo", map[string]any{"text": "from " + sid})), "Mcp-Session-Id: "+sid)
	}
	texts := map[string]string{}
	var mu sync.Mutex
	for sid, resp := range resps {
		wg.Go(func() {
			body, _ := io.ReadAll(resp.Body)
			mu.Lock()
			texts[sid] = string(body)
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, sid := range []string{a, b} {
		assert.Contains(t, texts[sid], `"id":7`)
		assert.Contains(t, texts[sid], "from "+sid)
	}

	// The GET stream of a gets the list_changed that b's call makes the
	// server send.
	old := c.do(t, "GET", "", "Mcp-Session-Id: "+a, "Accept: text/event-stream")
	require.Equal(t, http.StatusOK, old.StatusCode)
	get := c.do(t, "GET", "", "Mcp-Session-Id: "+a, "Accept: text/event-stream")
	require.Equal(t, http.StatusOK, get.StatusCode, "a second GET stream replaces the first")
	assert.True(t, endsWithin(old, 10*time.Second), "the first GET stream ends")
	notify := func() {
		c.call(t, b, toolCall(`"n"`, "notify", map[string]any{"method": "notifications/tools/list_changed"}))
	}
	notify()
	first := events(t, get, 1)[0]
	assert.Equal(t, "notifications/tools/list_changed", first.msg.Method)

	// a drops its GET stream; what comes meanwhile is replayed after the
	// last event it saw.
	get.Body.Close()
	notify()
	notify()
	var again *http.Response
	testutil.Eventually(t, ioTimeout, "the GET stream can be opened again", func() (bool, error) {
		again = c.do(t, "GET", "", "Mcp-Session-Id: "+a, "Accept: text/event-stream", "Last-Event-ID: "+first.id)
		return again.StatusCode == http.StatusOK, nil
	})
	missed := events(t, again, 2)
	for _, ev := range missed {
		assert.Equal(t, "notifications/tools/list_changed", ev.msg.Method)
		assert.NotEqual(t, first.id, ev.id)
	}
	assert.NotEqual(t, missed[0].id, missed[1].id)

	// Refusals.
	echo := string(toolCall("9", "echo", map[string]any{"text": "x"}))
	tests := []struct {
		name    string
		method  string
		headers []string
		want    int
	}{
		{"no session id", "POST", nil, http.StatusBadRequest},
		{"unknown session id", "POST", []string{"Mcp-Session-Id: nope"}, http.StatusNotFound},
		{"wrong Accept", "POST", []string{"Mcp-Session-Id: " + a, "Accept: application/json"}, http.StatusNotAcceptable},
		{"unsupported MCP-Protocol-Version", "POST", []string{"Mcp-Session-Id: " + a, "MCP-Protocol-Version: 2030-01-01"}, http.StatusBadRequest},
		{"foreign Origin", "POST", []string{"Mcp-Session-Id: " + a, "Origin: https://evil.example"}, http.StatusForbidden},
		{"no token", "POST", []string{"Mcp-Session-Id: " + a, "Authorization: "}, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, c.do(t, tt.method, echo, tt.headers...).StatusCode, tt.name)
	}

	// DELETE ends the session; its id is unknown afterwards, and the
	// other session goes on.
	assert.Equal(t, http.StatusNoContent, c.do(t, "DELETE", "", "Mcp-Session-Id: "+a).StatusCode)
	assert.Equal(t, http.StatusNotFound, c.do(t, "POST", echo, "Mcp-Session-Id: "+a).StatusCode)
	evs = c.call(t, b, toolCall("10", "echo", map[string]any{"text": "still here"}))
	text, err = resultText(evs[len(evs)-1].msg)
	require.NoError(t, err)
	assert.Equal(t, "still here", text)
	assert.NotContains(t, d.log(), wsToken, "the token never reaches the log")
}

// TestStreamableIdleExpiry: an HTTP session without requests for
// http_session_idle ends.
func TestStreamableIdleExpiry(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), wsListen+"\nhttp_session_idle = \"300ms\"")
	c := newHTTPClient(t, d, "demo")
	sid := c.initialize(t)
	echo := string(toolCall("1", "echo", map[string]any{"text": "x"}))
	// Only the log can tell without a request, which would keep it alive.
	testutil.Eventually(t, ioTimeout, "the idle session ends", func() (bool, error) {
		return strings.Contains(d.log(), "HTTP session expired"), nil
	})
	assert.Equal(t, http.StatusNotFound, c.do(t, "POST", echo, "Mcp-Session-Id: "+sid).StatusCode)
}
