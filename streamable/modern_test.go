package streamable_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/streamable"
)

// modernEndpoint is a fake server for the 2026-07-28 binding: each session
// it serves reads one request and answers it by its method, as a hub would
// (the answer Last under the request's tag). Methods: "tools/list" lists a
// tool "weather" whose "region" parameter is marked x-mcp-header Region;
// "needs-sampling" fails with -32021; "progress" sends a progress
// notification, then answers; "slow" answers nothing and waits for the
// session to end, which it reports on ended, and so does
// "subscriptions/listen" after its acknowledgement; anything else echoes
// its params. Every session's peer is recorded.
type modernEndpoint struct {
	ended chan time.Time // when a slow request's session ended

	mu    sync.Mutex
	peers []session.Peer
	calls map[string]int // requests by method
}

func newModernEndpoint() *modernEndpoint {
	return &modernEndpoint{ended: make(chan time.Time, 4), calls: map[string]int{}}
}

func (e *modernEndpoint) Full() bool           { return false }
func (e *modernEndpoint) MaxMessageBytes() int { return 1 << 12 }

func (e *modernEndpoint) called(method string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls[method]
}

func (e *modernEndpoint) Serve(ctx context.Context, t session.Transport, peer session.Peer) error {
	defer t.Close()
	stop := context.AfterFunc(ctx, func() { t.Close() })
	defer stop()
	frame, tag, err := t.ReadFrame()
	if err != nil {
		return err
	}
	m, err := jsonrpc.Parse(frame)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.peers = append(e.peers, peer)
	e.calls[m.Method]++
	e.mu.Unlock()
	answer := func(body []byte) { t.WriteFrames([]outbox.Frame{{Data: body, Tag: tag, Last: true}}) }
	switch m.Method {
	case "tools/list":
		answer(jsonrpc.Response(m.ID, json.RawMessage(`{"tools":[{"name":"weather","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"days":{"type":"integer"}}}}]}`)))
	case "needs-sampling":
		answer([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32021,"message":"sampling is required","data":{"requiredCapabilities":{"sampling":{}}}}}`))
	case "progress":
		n, _ := jsonrpc.Notification("notifications/progress", map[string]any{"progressToken": "p", "progress": 1})
		t.WriteFrames([]outbox.Frame{{Data: n, Tag: tag}})
		answer(jsonrpc.Response(m.ID, json.RawMessage(`"done"`)))
	case "subscriptions/listen":
		n, _ := jsonrpc.Notification("notifications/subscriptions/acknowledged", map[string]any{"notifications": map[string]any{}})
		t.WriteFrames([]outbox.Frame{{Data: n, Tag: tag}})
		_, _, err := t.ReadFrame() // returns once the transport is closed
		e.ended <- time.Now()
		return err
	case "slow":
		_, _, err := t.ReadFrame() // returns once the transport is closed
		e.ended <- time.Now()
		return err
	default:
		answer(jsonrpc.Response(m.ID, m.Params))
	}
	_, _, err = t.ReadFrame()
	return err
}

// modernServer is a Handler serving "demo" on a modernEndpoint.
type modernServer struct {
	url string
	ep  *modernEndpoint
	hc  *http.Client
}

func startModern(t *testing.T) *modernServer {
	t.Helper()
	return startModernConfig(t, streamable.Config{})
}

// startModernConfig is startModern with the Handler's configuration.
func startModernConfig(t *testing.T, cfg streamable.Config) *modernServer {
	t.Helper()
	ms := &modernServer{ep: newModernEndpoint()}
	h := streamable.New(cfg)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		h.Serve(rw, r, "demo", ms.ep)
	}))
	tr := &http.Transport{}
	ms.hc = &http.Client{Transport: tr}
	ms.url = srv.URL + "/servers/demo"
	t.Cleanup(func() {
		h.Close()
		srv.Close()
		tr.CloseIdleConnections()
	})
	return ms
}

// envelope is a 2026-07-28 request's _meta.
const envelope = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t"},"io.modelcontextprotocol/clientCapabilities":{}}`

// modernRequest is a request with the envelope; params are the members
// before it ("" none).
func modernRequest(id, method, params string) string {
	if params != "" {
		params += ","
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{` + params + envelope + `}}`
}

// post sends body with the headers of the 2026-07-28 binding for method
// (MCP-Protocol-Version, Mcp-Method), then headers ("Key: value"; "Key: "
// removes one).
func (ms *modernServer) post(t *testing.T, ctx context.Context, method, body string, headers ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", ms.url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := ms.hc.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// jsonBody reads a whole application/json response.
func jsonBody(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, json.Unmarshal(b, &v), "body %s", b)
	return v
}

// TestModernAnswers: a request without a session is served on a session of
// its own, answered as JSON, or as SSE when something comes before the
// answer; an error the server gives first sets the status.
func TestModernAnswers(t *testing.T) {
	ms := startModern(t)
	ctx := t.Context()

	resp := ms.post(t, ctx, "server/discover", modernRequest("1", "server/discover", ""))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("Mcp-Session-Id"), "no HTTP session")
	body := jsonBody(t, resp)
	assert.Equal(t, float64(1), body["id"])
	assert.Contains(t, body, "result")

	resp = ms.post(t, ctx, "progress", modernRequest(`"p"`, "progress", ""))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	evs := readEvents(t, resp, -1)
	require.Len(t, evs, 2, "the progress, then the answer")
	assert.Contains(t, evs[0].data, "notifications/progress")
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":"p","result":"done"}`, evs[1].data)
	assert.Empty(t, evs[1].id, "no event ids: no resumption on this binding")

	// A client that takes JSON only gets the answer alone.
	resp = ms.post(t, ctx, "progress", modernRequest(`"q"`, "progress", ""), "Accept: application/json")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "q", jsonBody(t, resp)["id"])

	resp = ms.post(t, ctx, "needs-sampling", modernRequest("2", "needs-sampling", ""))
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "a missing client capability is a 400")
	body = jsonBody(t, resp)
	assert.Equal(t, float64(-32021), body["error"].(map[string]any)["code"])

	ms.ep.mu.Lock()
	defer ms.ep.mu.Unlock()
	require.Len(t, ms.ep.peers, 4, "a session per request")
	for _, p := range ms.ep.peers {
		assert.True(t, p.OneRequest, "%+v", p)
	}
}

// TestModernRefusals: the binding's checks of headers and envelope, each a
// JSON-RPC error body under its status; GET and DELETE without a session
// are 405.
func TestModernRefusals(t *testing.T) {
	ms := startModern(t)
	echo := modernRequest("1", "echo", "")
	call := func(name string) string { return modernRequest("1", "tools/call", `"name":"`+name+`","arguments":{}`) }
	tests := []struct {
		name    string
		method  string // Mcp-Method
		body    string
		headers []string
		status  int
		code    int
	}{
		{"no MCP-Protocol-Version", "echo", echo, []string{"MCP-Protocol-Version: "}, 400, -32020},
		{"no clientCapabilities", "echo", `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, nil, 400, -32602},
		{"no envelope", "echo", `{"jsonrpc":"2.0","id":1,"method":"echo"}`, nil, 400, -32602},
		{"header and envelope differ", "echo", echo, []string{"MCP-Protocol-Version: 2025-11-25"}, 400, -32020},
		{"unsupported version", "echo", strings.ReplaceAll(echo, "2026-07-28", "2099-01-01"), []string{"MCP-Protocol-Version: 2099-01-01"}, 400, -32022},
		{"no Mcp-Method", "", echo, []string{"Mcp-Method: "}, 400, -32020},
		{"Mcp-Method differs", "ECHO", echo, nil, 400, -32020},
		{"no Mcp-Name", "tools/call", call("echo"), nil, 400, -32020},
		{"Mcp-Name contradicts", "tools/call", call("echo"), []string{"Mcp-Name: other"}, 400, -32020},
		{"Mcp-Name bad Base64", "tools/call", call("echo"), []string{"Mcp-Name: =?base64?***?="}, 400, -32020},
		{"a batch", "echo", "[" + echo + "]", nil, 400, -32600},
		{"initialize", "initialize", modernRequest("1", "initialize", ""), nil, 404, -32601},
		{"neither JSON nor SSE", "echo", echo, []string{"Accept: text/plain"}, 406, -32600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := ms.post(t, t.Context(), tt.method, tt.body, tt.headers...)
			assert.Equal(t, tt.status, resp.StatusCode)
			code, _, server := rpcError(t, resp)
			assert.Equal(t, tt.code, code)
			assert.Equal(t, "demo", server)
		})
	}
	assert.Zero(t, ms.ep.called("echo")+ms.ep.called("tools/call"), "no refused request reached the server")

	// The name in Base64 is the name.
	resp := ms.post(t, t.Context(), "tools/call", call("echo"), "Mcp-Name: =?base64?ZWNobw==?=")
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	for _, method := range []string{"GET", "DELETE"} {
		req, err := http.NewRequestWithContext(t.Context(), method, ms.url, nil)
		require.NoError(t, err)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := ms.hc.Do(req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, method)
		assert.Equal(t, "POST", resp.Header.Get("Allow"))
		_, reason, _ := rpcError(t, resp)
		assert.Equal(t, "no_session", reason)
		resp.Body.Close()
	}
}

// TestModernParamHeaders: a tools/call's Mcp-Param headers are checked
// against its arguments for the parameters the tool marks, from the tool
// definitions mcpmux asked the server for once.
func TestModernParamHeaders(t *testing.T) {
	ms := startModern(t)
	call := func(args string) string {
		return modernRequest("1", "tools/call", `"name":"weather","arguments":`+args)
	}
	tests := []struct {
		name    string
		args    string
		headers []string
		status  int
	}{
		{"matches", `{"region":"us-west1","days":3}`, []string{"Mcp-Param-Region: us-west1"}, 200},
		{"header name in any case", `{"region":"us-west1"}`, []string{"MCP-PARAM-REGION: us-west1"}, 200},
		{"Base64", `{"region":" padded "}`, []string{"Mcp-Param-Region: =?base64?IHBhZGRlZCA=?="}, 200},
		{"contradicts", `{"region":"us-west1"}`, []string{"Mcp-Param-Region: eu-north1"}, 400},
		{"missing", `{"region":"us-west1"}`, nil, 400},
		{"for an absent parameter", `{"days":3}`, []string{"Mcp-Param-Region: us-west1"}, 400},
		{"absent both", `{"days":3}`, nil, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := ms.post(t, t.Context(), "tools/call", call(tt.args), append([]string{"Mcp-Name: weather"}, tt.headers...)...)
			assert.Equal(t, tt.status, resp.StatusCode)
			if tt.status != 200 {
				code, reason, _ := rpcError(t, resp)
				assert.Equal(t, -32020, code)
				assert.Equal(t, "header_mismatch", reason)
			}
		})
	}
	assert.Equal(t, 1, ms.ep.called("tools/list"), "the tool definitions were asked for once")
}

// TestModernCancel: a client that closes its POST before the answer ends
// the request's session at once (the router cancels what it left in flight
// at the server).
func TestModernCancel(t *testing.T) {
	ms := startModern(t)
	ctx, cancel := context.WithCancel(t.Context())
	resp := ms.post(t, ctx, "slow", modernRequest("1", "slow", ""))
	require.Equal(t, http.StatusOK, resp.StatusCode, "the status goes out when the hold timer runs out")
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	closed := time.Now()
	cancel()
	select {
	case at := <-ms.ep.ended:
		assert.Less(t, at.Sub(closed), time.Second, "the session ended within a second of the client leaving")
	case <-time.After(5 * time.Second):
		t.Fatal("the request's session did not end when the client closed its POST")
	}
}

// TestModernListen: a subscriptions/listen is an SSE response that stays
// open, its acknowledgement first; closing it ends the listen's session.
func TestModernListen(t *testing.T) {
	ms := startModern(t)
	ctx, cancel := context.WithCancel(t.Context())
	resp := ms.post(t, ctx, "subscriptions/listen", modernRequest(`"L"`, "subscriptions/listen", `"notifications":{}`))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	evs := readEvents(t, resp, 1)
	assert.Contains(t, evs[0].data, "notifications/subscriptions/acknowledged")
	select {
	case <-ms.ep.ended:
		t.Fatal("the listen ended while its client was there")
	default:
	}
	closed := time.Now()
	cancel()
	select {
	case at := <-ms.ep.ended:
		assert.Less(t, at.Sub(closed), time.Second)
	case <-time.After(5 * time.Second):
		t.Fatal("the listen's session did not end when the client closed it")
	}
}

// TestModernListensBounded: a client (its peer and the name it gives
// itself) holds at most its bound of listens, a newer one ending its
// oldest; the listens of every client together are bounded, one more
// refused 503 too_many_streams; and short requests are served throughout.
func TestModernListensBounded(t *testing.T) {
	streams := streamable.NewStreams(6, 3)
	ms := startModernConfig(t, streamable.Config{Streams: streams})
	ms.ep.ended = make(chan time.Time, 64) // before any request
	listen := func(client string) *http.Response {
		t.Helper()
		body := strings.Replace(modernRequest(`"L"`, "subscriptions/listen", `"notifications":{}`), `"name":"t"`, `"name":"`+client+`"`, 1)
		resp := ms.post(t, t.Context(), "subscriptions/listen", body)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	var a []*http.Response
	for range 5 {
		resp := listen("a")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Contains(t, readEvents(t, resp, 1)[0].data, "acknowledged")
		a = append(a, resp)
	}
	for i, resp := range a[:2] {
		done := make(chan error, 1)
		go func() { // waited for below
			_, err := io.Copy(io.Discard, resp.Body)
			done <- err
		}()
		select {
		case err := <-done:
			assert.NoError(t, err, "listen %d ends cleanly", i)
		case <-time.After(5 * time.Second):
			t.Fatalf("listen %d was not ended by the client's newer ones", i)
		}
	}
	assert.Equal(t, 3, streams.Open(), "the client's three newest")

	for range 3 {
		resp := listen("b")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		readEvents(t, resp, 1)
	}
	assert.Equal(t, 6, streams.Open())
	resp := listen("c")
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	_, reason, _ := rpcError(t, resp)
	assert.Equal(t, "too_many_streams", reason)

	short := ms.post(t, t.Context(), "echo", modernRequest("1", "echo", `"x":1`))
	defer short.Body.Close()
	assert.Equal(t, http.StatusOK, short.StatusCode, "a short request has room")
}
