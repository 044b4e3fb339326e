package integration

// Streamable HTTP against real clients and alongside the other transports:
// the TypeScript SDK's StreamableHTTPClientTransport on server-everything
// (node/everything-http.mjs), and a Streamable HTTP, a WebSocket and a
// Unix-socket session of the demo server sending the same ids at once.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// httpTarget is a script target on the daemon's Streamable HTTP endpoint.
// With header set the token goes in requestInit's Authorization header,
// else (when token is not empty) on the URL as ?token=.
func httpTarget(d *daemon, server, token string, header bool) map[string]any {
	url := "http://" + rwWebAddr(d) + "/servers/" + server
	t := map[string]any{"kind": "http", "url": url}
	switch {
	case token == "":
	case header:
		t["headers"] = map[string]string{"Authorization": "Bearer " + token}
	default:
		t["url"] = url + "?token=" + token
	}
	return t
}

// TestRealWorldStreamableHTTP: the TypeScript SDK's
// StreamableHTTPClientTransport on server-everything through mcpmux: the
// tools, an echo, a long operation's progress on its POST's stream, and a
// sampling request the server sends during a tool call, carried by that
// call's POST stream and answered by the client. A second client passes the
// token on the URL; clients without it, or with a wrong one, are refused.
func TestRealWorldStreamableHTTP(t *testing.T) {
	t.Parallel()
	rw := needRealWorld(t)
	d := startDaemon(t, rw.server("everything", rwEverything, []string{"stdio"}, rwFast, rwURLElicitation), rwListen)

	// streamMsg is one message the wrapped fetch read from a response
	// stream: which request's stream (the method and id of the POSTed
	// request, or GET), and the message.
	type streamMsg struct {
		Stream   string          `json:"stream"`
		StreamID json.RawMessage `json:"streamId"`
		Method   string          `json:"method"`
		ID       json.RawMessage `json:"id"`
		Kind     string          `json:"kind"` // request, notification, response
	}
	type post struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
		Kind   string          `json:"kind"`
		Status int             `json:"status"`
	}
	var r struct {
		Init      rwInit   `json:"init"`
		SessionID string   `json:"sessionId"`
		Tools     []string `json:"tools"`
		Echo      struct {
			Text       string          `json:"text"`
			RequestID  json.RawMessage `json:"requestId"`
			ResponseID json.RawMessage `json:"responseId"`
		} `json:"echo"`
		Long struct {
			Text      string          `json:"text"`
			RequestID json.RawMessage `json:"requestId"`
			Token     json.RawMessage `json:"token"`
			Progress  []rwProgress    `json:"progress"`
			Callbacks int             `json:"callbacks"`
		} `json:"long"`
		Sampling struct {
			Text      string          `json:"text"`
			IsError   bool            `json:"isError"`
			RequestID json.RawMessage `json:"requestId"`
			Requests  []struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Prompt string          `json:"prompt"`
			} `json:"requests"`
			Handled int `json:"handled"`
		} `json:"sampling"`
		Streams []streamMsg `json:"streams"`
		Posts   []post      `json:"posts"`
		Query   struct {
			Tools []string `json:"tools"`
			Echo  string   `json:"echo"`
		} `json:"query"`
		Refused []struct {
			URL       string `json:"url"`
			Connected bool   `json:"connected"`
			Error     string `json:"error"`
		} `json:"refused"`
	}
	const steps = 4
	rw.runScript(t, "everything-http.mjs", map[string]any{
		"target": httpTarget(d, "everything", rwToken, true),
		"query":  httpTarget(d, "everything", rwToken, false),
		"refused": []any{
			httpTarget(d, "everything", "", false),
			httpTarget(d, "everything", "not-the-token", true),
		},
		"steps": steps,
	}, &r, func(string) {
		_, _, clients := rwServerStatus(t, d, "everything")
		assert.Equal(t, "http", clients["http-header"], "the SDK client is an HTTP session: %v", clients)
	})

	// The handshake.
	assert.Equal(t, "mcp-servers/everything", r.Init.ServerName)
	assert.NotEmpty(t, r.Init.ProtocolVersion)
	assert.JSONEq(t, "0", string(r.Init.RequestID))
	assert.JSONEq(t, "0", string(r.Init.ResponseID))
	assert.NotEmpty(t, r.SessionID, "the transport got an Mcp-Session-Id")

	// Tools and echo.
	assert.Subset(t, r.Tools, everythingTools)
	assert.Equal(t, "Echo: hello over streamable http", r.Echo.Text)
	assert.JSONEq(t, string(r.Echo.RequestID), string(r.Echo.ResponseID))

	// streamOf lists the messages of the POST stream of request id.
	streamOf := func(method string, id json.RawMessage) []streamMsg {
		var out []streamMsg
		for _, m := range r.Streams {
			if m.Stream == method && string(m.StreamID) == string(id) {
				out = append(out, m)
			}
		}
		return out
	}

	// Progress: every notification on the wire, and on the long call's own
	// POST stream, before its response.
	assert.Equal(t, "Long running operation completed. Duration: 1 seconds, Steps: 4.", r.Long.Text)
	checkProgress(t, "http", r.Long.Progress, r.Long.Token, steps)
	if r.Long.Callbacks != steps {
		t.Logf("the SDK's onprogress ran %d times for %d notifications on the wire", r.Long.Callbacks, steps)
	}
	var kinds []string
	for _, m := range streamOf("tools/call", r.Long.RequestID) {
		kinds = append(kinds, m.Kind+" "+m.Method)
	}
	want := make([]string, 0, steps+1)
	for range steps {
		want = append(want, "notification notifications/progress")
	}
	want = append(want, "response ")
	assert.Equal(t, want, kinds, "the long call's POST stream: its progress, then its response")

	// Sampling: the request came on the POST stream of the tool call that
	// caused it, not on the GET stream; the client answered it (one POST,
	// 202), and the answer is in the tool's result.
	s := r.Sampling
	assert.False(t, s.IsError, "trigger-sampling-request: %s", s.Text)
	require.Len(t, s.Requests, 1, "sampling requests the client received: %+v", s.Requests)
	assert.Equal(t, "sampling/createMessage", s.Requests[0].Method)
	assert.Equal(t, "Resource trigger-sampling-request context: over streamable http", s.Requests[0].Prompt)
	assert.Equal(t, 1, s.Handled, "the client's sampling handler ran once")
	assert.Contains(t, s.Text, `"text": "sampled over streamable http"`)
	assert.Contains(t, s.Text, `"model": "model-over-http"`)
	var carried []streamMsg
	for _, m := range r.Streams {
		if m.Method == "sampling/createMessage" {
			carried = append(carried, m)
		}
	}
	if assert.Len(t, carried, 1, "sampling requests on any response stream: %+v", r.Streams) {
		assert.Equal(t, "tools/call", carried[0].Stream, "the stream that carried the sampling request")
		assert.JSONEq(t, string(s.RequestID), string(carried[0].StreamID), "the sampling request came on the stream of the call that caused it")
		assert.JSONEq(t, string(s.Requests[0].ID), string(carried[0].ID))
	}
	kinds = nil
	for _, m := range streamOf("tools/call", s.RequestID) {
		kinds = append(kinds, m.Kind+" "+m.Method)
	}
	assert.Equal(t, []string{"request sampling/createMessage", "response "}, kinds, "the sampling call's POST stream")
	var answered bool
	for _, p := range r.Posts {
		if p.Kind == "response" && len(s.Requests) > 0 && string(p.ID) == string(s.Requests[0].ID) {
			answered = true
			assert.Equal(t, http.StatusAccepted, p.Status, "the POST of the client's sampling answer")
		}
	}
	assert.True(t, answered, "the client POSTed its sampling answer: %+v", r.Posts)
	for _, m := range r.Streams {
		if m.Stream == "GET" {
			assert.NotEqual(t, "request", m.Kind, "a server request on the GET stream: %+v", m)
		}
	}

	// The token on the URL.
	assert.Subset(t, r.Query.Tools, everythingTools)
	assert.Equal(t, "Echo: token on the URL", r.Query.Echo)

	// Refused without the token and with a wrong one.
	require.Len(t, r.Refused, 2)
	for _, f := range r.Refused {
		assert.False(t, f.Connected, "the SDK client connected to %s", f.URL)
		assert.Contains(t, f.Error, "401", f.URL)
	}
	assert.NotContains(t, d.log(), rwToken, "the token never reaches the log")
	oneProcess(t, d, "everything")
}

// sseEvents reads an SSE response to the end and returns its messages. It
// returns errors, for goroutines.
func sseEvents(resp *http.Response) ([]*jsonrpc.Message, error) {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		return nil, fmt.Errorf("Content-Type %q", ct)
	}
	br := bufio.NewReader(resp.Body)
	var out []*jsonrpc.Message
	var data string
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "" && data != "":
			m, err := jsonrpc.Parse([]byte(data))
			if err != nil {
				return out, fmt.Errorf("event %q: %w", data, err)
			}
			out = append(out, m)
			data = ""
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		}
	}
}

// postCall POSTs one request on HTTP session sid and returns the messages
// of its stream. It returns errors, for goroutines.
func (c *httpClient) postCall(sid string, frame []byte) ([]*jsonrpc.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", c.url, strings.NewReader(string(frame)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+wsToken)
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	return sseEvents(resp)
}

// httpPipeline is the HTTP session of TestHTTPWebSocketUnixCollidingIDs:
// one POST per request, all at once; each stream must hold exactly the
// answer to its own request, with its own payload.
func httpPipeline(c *httpClient, sid, session string, ids []string) error {
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for k, id := range ids {
		wg.Go(func() {
			payload := fmt.Sprintf("%s, id %s", session, id)
			msgs, err := c.postCall(sid, toolCall(id, "echo", map[string]string{"text": payload}))
			if err != nil {
				errs[k] = fmt.Errorf("id %s: %w", id, err)
				return
			}
			if len(msgs) != 1 {
				errs[k] = fmt.Errorf("id %s: %d messages on its stream, want its answer alone", id, len(msgs))
				return
			}
			m := msgs[0]
			text, err := resultText(m)
			switch {
			case err != nil:
				errs[k] = fmt.Errorf("id %s: %w", id, err)
			case string(m.ID) != id:
				errs[k] = fmt.Errorf("the stream of id %s carried an answer under id %s: %s", id, m.ID, m.Frame)
			case text != payload:
				errs[k] = fmt.Errorf("id %s answered with %q, want %q", id, text, payload)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// TestHTTPWebSocketUnixCollidingIDs: a Streamable HTTP session, a WebSocket
// session and a Unix-socket session on the same demo server send echo
// calls under the same ids (1..20 and "1".."20") at once, each with its own
// payloads: every answer reaches its own session, with its own payload;
// the server never saw two requests in flight under one id, and all three
// sessions reached its one process.
func TestHTTPWebSocketUnixCollidingIDs(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), wsListen)
	hc := newHTTPClient(t, d, "demo")
	sid := hc.initialize(t)
	ws := wsClient(t, d, "demo")
	_, err := ws.initialize("2025-06-18")
	require.NoError(t, err)
	unix := open(t, d.socket("demo"))

	var ids []string
	for n := 1; n <= 20; n++ {
		ids = append(ids, strconv.Itoa(n), strconv.Quote(strconv.Itoa(n)))
	}

	const rounds = 3
	start := time.Now()
	for round := range rounds {
		errs := make([]error, 3)
		var wg sync.WaitGroup
		go1 := make(chan struct{})
		wg.Go(func() { <-go1; errs[0] = httpPipeline(hc, sid, fmt.Sprintf("http round %d", round), ids) })
		wg.Go(func() { <-go1; errs[1] = pipelineClient(ws, fmt.Sprintf("websocket round %d", round), ids) })
		wg.Go(func() { <-go1; errs[2] = pipelineClient(unix, fmt.Sprintf("unix round %d", round), ids) })
		close(go1)
		wg.Wait()
		require.NoError(t, errs[0], "the Streamable HTTP session, round %d", round)
		require.NoError(t, errs[1], "the WebSocket session, round %d", round)
		require.NoError(t, errs[2], "the Unix-socket session, round %d", round)
	}
	t.Logf("%d rounds of %d requests on each of 3 transports in %v", rounds, len(ids), time.Since(start).Round(time.Millisecond))

	// One process, and it never had two requests under one id in flight.
	msgs, err := hc.postCall(sid, request(`"stats"`, "tools/call", toolParams("stats", nil)))
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	var httpStats demoStats
	require.NoError(t, decodeStructured(msgs[0], &httpStats))
	wsStats, unixStats := ws.mustStats(t), unix.mustStats(t)
	assert.NotZero(t, httpStats.PID)
	assert.Equal(t, httpStats.PID, wsStats.PID, "the HTTP and WebSocket sessions reached one process")
	assert.Equal(t, httpStats.PID, unixStats.PID, "the HTTP and Unix-socket sessions reached one process")
	assert.Zero(t, unixStats.DuplicateIDs, "the server saw an id twice in flight")
	assert.GreaterOrEqual(t, unixStats.Requests, 3*rounds*len(ids), "requests the server saw")
}
