package streamable_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/streamable"
)

// httpServer is a Handler serving one server, "demo", a hubEndpoint, on a
// loopback HTTP server.
type httpServer struct {
	base string // http://ADDR/servers/demo
	hub  *hubEndpoint
	hc   *http.Client
	h    *streamable.Handler
}

func startHTTP(t *testing.T, idle time.Duration) *httpServer {
	t.Helper()
	return startHTTPConfig(t, streamable.Config{SessionIdle: idle})
}

func startHTTPConfig(t *testing.T, cfg streamable.Config) *httpServer {
	t.Helper()
	hs := &httpServer{hub: &hubEndpoint{gate: make(chan struct{}), ended: make(chan struct{}, 16)}}
	h := streamable.New(cfg)
	hs.h = h
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		h.Serve(rw, r, "demo", hs.hub)
	}))
	tr := &http.Transport{}
	hs.hc = &http.Client{Transport: tr}
	hs.base = srv.URL + "/servers/demo"
	t.Cleanup(func() {
		closed := make(chan struct{})
		go func() { // waited for below
			h.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Error("Close did not return")
		}
		srv.Close()
		tr.CloseIdleConnections()
	})
	return hs
}

// do sends one request with both Accept types and the given extra headers
// ("Key: value"; "Key: " removes one).
func (hs *httpServer) do(t *testing.T, method, body string, headers ...string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, hs.base, rd)
	require.NoError(t, err)
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
	resp, err := hs.hc.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// initialize opens a session and returns its id.
func (hs *httpServer) initialize(t *testing.T) string {
	t.Helper()
	resp := hs.do(t, "POST", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	id := resp.Header.Get("Mcp-Session-Id")
	require.NotEmpty(t, id)
	evs := readEvents(t, resp, -1)
	require.Len(t, evs, 1)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18"}}`, evs[0].data)
	return id
}

type sse struct{ id, data string }

// readEvents reads SSE events from resp: n of them, or all of them until
// the stream ends when n < 0.
func readEvents(t *testing.T, resp *http.Response, n int) []sse {
	t.Helper()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	br := bufio.NewReader(resp.Body)
	var out []sse
	var cur sse
	for n < 0 || len(out) < n {
		line, err := br.ReadString('\n')
		if err == io.EOF && n < 0 {
			return out
		}
		require.NoError(t, err, "reading the stream after %d events", len(out))
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if cur.data != "" {
				out = append(out, cur)
			}
			cur = sse{}
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			cur.data += strings.TrimPrefix(line, "data: ")
		}
	}
	return out
}

// rpcError reads a refusal's body: a JSON-RPC error response.
func rpcError(t *testing.T, resp *http.Response) (code int, reason, server string) {
	t.Helper()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), "a refusal's body is JSON-RPC")
	var body struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code int `json:"code"`
			Data struct {
				Reason string `json:"reason"`
				Server string `json:"server"`
			} `json:"data"`
		} `json:"error"`
	}
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &body), "body %s", b)
	assert.Equal(t, "2.0", body.JSONRPC, "body %s", b)
	return body.Error.Code, body.Error.Data.Reason, body.Error.Data.Server
}

func TestStreamableSession(t *testing.T) {
	hs := startHTTP(t, 0)
	sid := hs.initialize(t)
	hdr := "Mcp-Session-Id: " + sid

	resp := hs.do(t, "POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr)
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)

	resp = hs.do(t, "POST", `{"jsonrpc":"2.0","id":"e",
		"method":"echo","params":{"text":"hi"}}`, hdr, "MCP-Protocol-Version: 2025-06-18")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	evs := readEvents(t, resp, -1)
	require.Len(t, evs, 1)
	assert.Equal(t, `{"jsonrpc":"2.0","id":"e","result":{"text":"hi"}}`, evs[0].data)

	// Progress comes on the POST's stream, before its response.
	resp = hs.do(t, "POST", `{"jsonrpc":"2.0","id":7,"method":"progress","params":{"_meta":{"progressToken":"tok"}}}`, hdr)
	evs = readEvents(t, resp, -1)
	require.Len(t, evs, 2)
	assert.JSONEq(t, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok","progress":1}}`, evs[0].data)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":7,"result":"done"}`, evs[1].data)

	// The server's request that a call caused goes on that call's stream.
	resp = hs.do(t, "POST", `{"jsonrpc":"2.0","id":"a","method":"ask"}`, hdr)
	evs = readEvents(t, resp, -1)
	require.Len(t, evs, 2)
	assert.Contains(t, evs[0].data, `"sampling/createMessage"`)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":"a","result":{}}`, evs[1].data)

	// DELETE ends it; afterwards the id is unknown.
	resp = hs.do(t, "DELETE", "", hdr)
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	<-hs.hub.ended
	resp = hs.do(t, "POST", `{"jsonrpc":"2.0","id":8,"method":"echo"}`, hdr)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	_, reason, _ := rpcError(t, resp)
	assert.Equal(t, "no_session", reason)
}

// TestStreamableRefusals: every refusal has its status and a JSON-RPC
// error body naming its reason and the server.
func TestStreamableRefusals(t *testing.T) {
	hs := startHTTP(t, 0)
	sid := hs.initialize(t)
	echo := `{"jsonrpc":"2.0","id":1,"method":"echo"}`
	tests := []struct {
		name    string
		method  string
		body    string
		headers []string
		want    int
		reason  string
	}{
		{"no session id", "POST", echo, nil, http.StatusBadRequest, "no_session"},
		{"unknown session id", "POST", echo, []string{"Mcp-Session-Id: nope"}, http.StatusNotFound, "no_session"},
		{"Accept without event-stream", "POST", echo, []string{"Mcp-Session-Id: " + sid, "Accept: application/json"}, http.StatusNotAcceptable, "invalid_request"},
		{"no Accept", "POST", echo, []string{"Mcp-Session-Id: " + sid, "Accept: "}, http.StatusNotAcceptable, "invalid_request"},
		{"unsupported protocol version", "POST", echo, []string{"Mcp-Session-Id: " + sid, "MCP-Protocol-Version: 1999-01-01"}, http.StatusBadRequest, "unsupported_version"},
		{"wrong Content-Type", "POST", echo, []string{"Mcp-Session-Id: " + sid, "Content-Type: text/plain"}, http.StatusUnsupportedMediaType, "invalid_request"},
		{"not JSON", "POST", `{"jsonrpc"`, []string{"Mcp-Session-Id: " + sid}, http.StatusBadRequest, "parse_error"},
		{"not JSON-RPC", "POST", `{"jsonrpc":"1.0","id":1,"method":"echo"}`, []string{"Mcp-Session-Id: " + sid}, http.StatusBadRequest, "invalid_request"},
		{"too large", "POST", `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"x":"` + strings.Repeat("x", 2<<10) + `"}}`, []string{"Mcp-Session-Id: " + sid}, http.StatusRequestEntityTooLarge, "message_too_large"},
		{"GET without session", "GET", "", []string{"Accept: text/event-stream"}, http.StatusMethodNotAllowed, "no_session"},
		{"DELETE without session", "DELETE", "", nil, http.StatusMethodNotAllowed, "no_session"},
		{"GET without event-stream", "GET", "", []string{"Mcp-Session-Id: " + sid, "Accept: application/json"}, http.StatusNotAcceptable, "invalid_request"},
		{"GET with a foreign Last-Event-ID", "GET", "", []string{"Mcp-Session-Id: " + sid, "Accept: text/event-stream", "Last-Event-ID: x"}, http.StatusBadRequest, "invalid_request"},
		{"DELETE unknown", "DELETE", "", []string{"Mcp-Session-Id: nope"}, http.StatusNotFound, "no_session"},
		{"PUT", "PUT", echo, []string{"Mcp-Session-Id: " + sid}, http.StatusMethodNotAllowed, "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := hs.do(t, tt.method, tt.body, tt.headers...)
			assert.Equal(t, tt.want, resp.StatusCode)
			code, reason, server := rpcError(t, resp)
			assert.Equal(t, tt.reason, reason)
			assert.Equal(t, "demo", server)
			assert.Less(t, code, 0, "a JSON-RPC error code")
		})
	}
}

// TestStreamableGETStream: the GET stream carries what belongs to no POST,
// one GET stream per session (a second replaces the first, which ends),
// and a client resumes it with Last-Event-ID.
func TestStreamableGETStream(t *testing.T) {
	hs := startHTTP(t, 0)
	sid := hs.initialize(t)
	hdr := "Mcp-Session-Id: " + sid
	first := hs.do(t, "GET", "", hdr, "Accept: text/event-stream")
	require.Equal(t, http.StatusOK, first.StatusCode)
	get := hs.do(t, "GET", "", hdr, "Accept: text/event-stream")
	require.Equal(t, http.StatusOK, get.StatusCode, "a second GET replaces the first")
	ended := make(chan []sse, 1)
	go func() { ended <- readEventsNoFail(first) }() // ends with the stream, or with the test's cleanup
	select {
	case rest := <-ended:
		assert.Empty(t, rest, "the replaced stream ends, with nothing on it")
	case <-time.After(10 * time.Second):
		t.Fatal("the replaced GET stream did not end")
	}

	resp := hs.do(t, "POST", `{"jsonrpc":"2.0","id":"n","method":"notify"}`, hdr)
	evs := readEvents(t, resp, -1)
	require.Len(t, evs, 1, "the list change is not the POST's")
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":"n","result":{}}`, evs[0].data)
	resp = hs.do(t, "POST", `{"jsonrpc":"2.0","id":"n","method":"notify"}`, hdr)
	readEvents(t, resp, -1)
	got := readEvents(t, get, 2)
	for _, ev := range got {
		assert.JSONEq(t, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, ev.data)
	}

	// The client drops the GET stream; what comes meanwhile is replayed
	// after the last event it saw.
	get.Body.Close()
	for range 2 {
		resp := hs.do(t, "POST", `{"jsonrpc":"2.0","id":"n","method":"notify"}`, hdr)
		readEvents(t, resp, -1)
	}
	var again *http.Response
	testutil.Until(t, 10*time.Second, "the old connection lets go", func() bool {
		again = hs.do(t, "GET", "", hdr, "Accept: text/event-stream", "Last-Event-ID: "+got[0].id)
		return again.StatusCode == http.StatusOK
	})
	replay := readEvents(t, again, 3)
	assert.Equal(t, got[1].id, replay[0].id, "first the event after Last-Event-ID")
	for _, ev := range replay {
		assert.JSONEq(t, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, ev.data)
	}
}

// TestStreamableServerRequestOnItsPOST: with two POSTs waiting, the
// server's request goes on the stream of the call that caused it (the tag
// says which), not on the other POST's, nor on the GET stream.
func TestStreamableServerRequestOnItsPOST(t *testing.T) {
	hs := startHTTP(t, 0)
	sid := hs.initialize(t)
	hdr := "Mcp-Session-Id: " + sid
	get := hs.do(t, "GET", "", hdr, "Accept: text/event-stream")
	require.Equal(t, http.StatusOK, get.StatusCode)

	gate := hs.do(t, "POST", `{"jsonrpc":"2.0","id":"g","method":"gate","params":{"_meta":{"progressToken":"g"}}}`, hdr)
	readEvents(t, gate, 1)
	ask := hs.do(t, "POST", `{"jsonrpc":"2.0","id":"a","method":"ask"}`, hdr)
	evs := readEvents(t, ask, -1)
	require.Len(t, evs, 2)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}`, evs[0].data)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":"a","result":{}}`, evs[1].data)

	hs.hub.gate <- struct{}{}
	evs = readEvents(t, gate, -1)
	require.Len(t, evs, 2, "the gate's stream: its progress and its answer only")
	assert.JSONEq(t, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"g","progress":2}}`, evs[0].data)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":"g","result":"opened"}`, evs[1].data)

	// The GET stream's next event is the list change, nothing before it.
	readEvents(t, hs.do(t, "POST", `{"jsonrpc":"2.0","id":"n","method":"notify"}`, hdr), -1)
	got := readEvents(t, get, 1)
	assert.JSONEq(t, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, got[0].data)
}

// TestStreamableCancelEndsStream: a request the client cancels gets no
// answer; the end marker the session sends in its place ends its stream.
func TestStreamableCancelEndsStream(t *testing.T) {
	hs := startHTTP(t, 0)
	sid := hs.initialize(t)
	hdr := "Mcp-Session-Id: " + sid
	gate := hs.do(t, "POST", `{"jsonrpc":"2.0","id":"g","method":"gate","params":{"_meta":{"progressToken":1}}}`, hdr)
	first := readEvents(t, gate, 1)
	assert.Contains(t, first[0].data, `"notifications/progress"`)

	resp := hs.do(t, "POST", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"g"}}`, hdr)
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	ended := make(chan []sse, 1)
	go func() { ended <- readEventsNoFail(gate) }() // ends with the stream, or with the test's cleanup
	select {
	case rest := <-ended:
		assert.Empty(t, rest, "nothing after the cancellation")
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled request's stream did not end")
	}

	// Resuming it gets nothing more, and ends at once.
	again := hs.do(t, "GET", "", hdr, "Accept: text/event-stream", "Last-Event-ID: "+first[0].id)
	require.Equal(t, http.StatusOK, again.StatusCode)
	assert.Empty(t, readEvents(t, again, -1))
}

// TestStreamableResumePOST: a client that lost its POST's stream gets the
// rest of it, response included, by GET with Last-Event-ID.
func TestStreamableResumePOST(t *testing.T) {
	hs := startHTTP(t, 0)
	sid := hs.initialize(t)
	hdr := "Mcp-Session-Id: " + sid
	post := hs.do(t, "POST", `{"jsonrpc":"2.0","id":1,"method":"gate","params":{"_meta":{"progressToken":5}}}`, hdr)
	first := readEvents(t, post, 1)
	post.Body.Close()
	hs.hub.gate <- struct{}{}
	var resumed *http.Response
	testutil.Until(t, 10*time.Second, "the stream can be resumed", func() bool {
		resumed = hs.do(t, "GET", "", hdr, "Accept: text/event-stream", "Last-Event-ID: "+first[0].id)
		return resumed.StatusCode == http.StatusOK
	})
	evs := readEvents(t, resumed, -1)
	require.Len(t, evs, 2)
	assert.JSONEq(t, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":5,"progress":2}}`, evs[0].data)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":"opened"}`, evs[1].data)
}

// TestStreamableCollidingIDs: two sessions may use the same ids; within one
// session the refusal of an id still waiting reaches the POST that sent
// it again.
func TestStreamableCollidingIDs(t *testing.T) {
	hs := startHTTP(t, 0)
	a, b := hs.initialize(t), hs.initialize(t)
	require.NotEqual(t, a, b)
	var wg sync.WaitGroup
	got := make([][]sse, 2)
	for i, sid := range []string{a, b} {
		resp := hs.do(t, "POST", fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"who":%q}}`, sid), "Mcp-Session-Id: "+sid)
		wg.Go(func() {
			got[i] = readEventsNoFail(resp)
		})
	}
	wg.Wait()
	for i, sid := range []string{a, b} {
		require.Len(t, got[i], 1)
		assert.JSONEq(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"result":{"who":%q}}`, sid), got[i][0].data)
	}

	gate := hs.do(t, "POST", `{"jsonrpc":"2.0","id":9,"method":"gate","params":{"_meta":{"progressToken":9}}}`, "Mcp-Session-Id: "+a)
	readEvents(t, gate, 1)
	dup := hs.do(t, "POST", `{"jsonrpc":"2.0","id":9,"method":"echo"}`, "Mcp-Session-Id: "+a)
	evs := readEvents(t, dup, -1)
	require.Len(t, evs, 1)
	assert.Contains(t, evs[0].data, `"duplicate_id"`)
	hs.hub.gate <- struct{}{}
	evs = readEvents(t, gate, -1)
	require.Len(t, evs, 2)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":9,"result":"opened"}`, evs[1].data, "the first request's answer, on its own stream")
}

// readEventsNoFail is readEvents for other goroutines: no require.
func readEventsNoFail(resp *http.Response) []sse {
	var out []sse
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, sse{data: d})
		}
	}
	return out
}

// TestStreamableIdleExpiry: a session without requests for its idle time
// ends, and its id is unknown afterwards.
func TestStreamableIdleExpiry(t *testing.T) {
	hs := startHTTP(t, 200*time.Millisecond)
	sid := hs.initialize(t)
	select {
	case <-hs.hub.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle session did not end")
	}
	resp := hs.do(t, "POST", `{"jsonrpc":"2.0","id":1,"method":"echo"}`, "Mcp-Session-Id: "+sid)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestStreamableClose: Close ends the sessions, and a new one is refused
// 503 afterwards.
func TestStreamableClose(t *testing.T) {
	hub := &hubEndpoint{gate: make(chan struct{}), ended: make(chan struct{}, 16)}
	h := streamable.New(streamable.Config{})
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		h.Serve(rw, r, "demo", hub)
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	post := func(ctx context.Context) *http.Response {
		req, err := http.NewRequestWithContext(ctx, "POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize"}`))
		require.NoError(t, err)
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := hc.Do(req)
		require.NoError(t, err)
		return resp
	}
	resp := post(t.Context())
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	h.Close()
	select {
	case <-hub.ended:
	default:
		t.Fatal("Close returned before the session ended")
	}
	resp = post(t.Context())
	defer resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	_, reason, _ := rpcError(t, resp)
	assert.Equal(t, "shutting_down", reason)
}

// TestStreamableBodyForms: a body is taken whole however it comes: of its
// declared length or chunked, on one line or pretty-printed over several
// (which reaches the session as one line), and up to the size limit.
func TestStreamableBodyForms(t *testing.T) {
	hs := startHTTP(t, 0)
	sid := hs.initialize(t)
	pad := strings.Repeat("p", 1<<10-80) // the body just under the 1 KiB limit
	tests := []struct {
		name, body string
		chunked    bool
	}{
		{"one line", `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"x":"` + pad + `"}}`, false},
		{"chunked", `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"x":"` + pad + `"}}`, true},
		{"pretty-printed", "{\r\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1,\n  \"method\": \"echo\",\n  \"params\": {\"x\": \"a b\"}\n}\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rd io.Reader = strings.NewReader(tt.body)
			if tt.chunked {
				rd = io.MultiReader(rd) // no length known: sent chunked
			}
			req, err := http.NewRequestWithContext(t.Context(), "POST", hs.base, rd)
			require.NoError(t, err)
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
			resp, err := hs.hc.Do(req)
			require.NoError(t, err)
			t.Cleanup(func() { resp.Body.Close() })
			require.Equal(t, http.StatusOK, resp.StatusCode)
			evs := readEvents(t, resp, -1)
			require.Len(t, evs, 1)
			var m struct {
				ID     int             `json:"id"`
				Result json.RawMessage `json:"result"`
			}
			require.NoError(t, json.Unmarshal([]byte(evs[0].data), &m))
			assert.Equal(t, 1, m.ID)
			var want, got any
			require.NoError(t, json.Unmarshal([]byte(tt.body), &want))
			require.NoError(t, json.Unmarshal(m.Result, &got))
			assert.Equal(t, want.(map[string]any)["params"], got, "the params came through whole")
		})
	}
	hs.hub.mu.Lock()
	defer hs.hub.mu.Unlock()
	assert.Zero(t, hs.hub.broken, "every frame reached the session as one line")
}
