package socket_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/socket"
)

// hubEndpoint is a fake server that answers like a hub, per session:
// initialize; "echo" returns its params; "progress" sends one progress
// notification with the request's token, then answers; "gate" sends one
// progress notification, waits for the test to release it, sends another
// and answers; "notify" sends a list_changed notification, then answers;
// "ask" sends a sampling request, then answers.
type hubEndpoint struct {
	gate   chan struct{}
	ended  chan struct{} // a value per session that ended
	mu     sync.Mutex
	frames []string // every frame read, in order
}

func (e *hubEndpoint) Full() bool           { return false }
func (e *hubEndpoint) MaxMessageBytes() int { return 1 << 10 }

func (e *hubEndpoint) Serve(ctx context.Context, t session.Transport, _ session.Peer) error {
	defer func() { e.ended <- struct{}{} }()
	defer t.Close()
	stop := context.AfterFunc(ctx, func() { t.Close() })
	defer stop()
	var wmu sync.Mutex
	write := func(f []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		t.WriteFrames([]outbox.Frame{{Data: f}})
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		frame, _, err := t.ReadFrame()
		if err != nil {
			return err
		}
		e.mu.Lock()
		e.frames = append(e.frames, string(frame))
		e.mu.Unlock()
		m, err := jsonrpc.Parse(frame)
		if err != nil || m.Kind != jsonrpc.KindRequest {
			continue
		}
		token := json.RawMessage("null")
		if sp, ok := m.ParamsPath("_meta", "progressToken"); ok {
			token = json.RawMessage(frame[sp.Start:sp.End])
		}
		progress := func(n int) {
			f, _ := jsonrpc.Notification("notifications/progress", map[string]any{"progressToken": token, "progress": n})
			write(f)
		}
		switch m.Method {
		case "initialize":
			write(jsonrpc.Response(m.ID, json.RawMessage(`{"protocolVersion":"2025-06-18"}`)))
		case "progress":
			progress(1)
			write(jsonrpc.Response(m.ID, json.RawMessage(`"done"`)))
		case "gate":
			id := m.ID
			progress(1)
			wg.Go(func() {
				select {
				case <-e.gate:
				case <-ctx.Done():
					return
				}
				progress(2)
				write(jsonrpc.Response(id, json.RawMessage(`"opened"`)))
			})
		case "notify":
			f, _ := jsonrpc.Notification("notifications/tools/list_changed", nil)
			write(f)
			write(jsonrpc.Response(m.ID, json.RawMessage(`{}`)))
		case "ask":
			f, _ := jsonrpc.Request(json.RawMessage(`"s1"`), "sampling/createMessage", map[string]any{})
			write(f)
			write(jsonrpc.Response(m.ID, json.RawMessage(`{}`)))
		default:
			write(jsonrpc.Response(m.ID, m.Params))
		}
	}
}

// httpServer is a web listener with one server, "demo", a hubEndpoint.
type httpServer struct {
	base string // http://ADDR/servers/demo
	hub  *hubEndpoint
}

func startHTTP(t *testing.T, idle time.Duration) *httpServer {
	t.Helper()
	hs := &httpServer{hub: &hubEndpoint{gate: make(chan struct{}), ended: make(chan struct{}, 16)}}
	web, err := socket.ListenWeb(socket.WebConfig{
		Addr:    "127.0.0.1:0",
		Token:   testToken,
		Origins: []string{"https://app.example"},
		Lookup: func(name string) (socket.Endpoint, bool) {
			return hs.hub, name == "demo"
		},
		HTTPSessionIdle: idle,
	})
	require.NoError(t, err)
	hs.base = "http://" + web.Addr().String() + "/servers/demo"
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- web.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "Serve")
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after its context ended")
		}
	})
	return hs
}

// do sends one request with the token, both Accept types and the given
// extra headers ("Key: value").
func (hs *httpServer) do(t *testing.T, method, body string, headers ...string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, hs.base, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
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
	resp, err := http.DefaultClient.Do(req)
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

	// The only POST open gets the server's request.
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
}

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
	}{
		{"no session id", "POST", echo, nil, http.StatusBadRequest},
		{"unknown session id", "POST", echo, []string{"Mcp-Session-Id: nope"}, http.StatusNotFound},
		{"Accept without event-stream", "POST", echo, []string{"Mcp-Session-Id: " + sid, "Accept: application/json"}, http.StatusNotAcceptable},
		{"no Accept", "POST", echo, []string{"Mcp-Session-Id: " + sid, "Accept: "}, http.StatusNotAcceptable},
		{"unsupported protocol version", "POST", echo, []string{"Mcp-Session-Id: " + sid, "MCP-Protocol-Version: 1999-01-01"}, http.StatusBadRequest},
		{"foreign Origin", "POST", echo, []string{"Mcp-Session-Id: " + sid, "Origin: https://evil.example"}, http.StatusForbidden},
		{"no token", "POST", echo, []string{"Mcp-Session-Id: " + sid, "Authorization: "}, http.StatusUnauthorized},
		{"wrong Content-Type", "POST", echo, []string{"Mcp-Session-Id: " + sid, "Content-Type: text/plain"}, http.StatusUnsupportedMediaType},
		{"not JSON", "POST", `{"jsonrpc"`, []string{"Mcp-Session-Id: " + sid}, http.StatusBadRequest},
		{"too large", "POST", `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"x":"` + strings.Repeat("x", 2<<10) + `"}}`, []string{"Mcp-Session-Id: " + sid}, http.StatusRequestEntityTooLarge},
		{"GET without session", "GET", "", []string{"Accept: text/event-stream"}, http.StatusBadRequest},
		{"GET without event-stream", "GET", "", []string{"Mcp-Session-Id: " + sid, "Accept: application/json"}, http.StatusNotAcceptable},
		{"DELETE unknown", "DELETE", "", []string{"Mcp-Session-Id: nope"}, http.StatusNotFound},
		{"PUT", "PUT", echo, []string{"Mcp-Session-Id: " + sid}, http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := hs.do(t, tt.method, tt.body, tt.headers...)
			assert.Equal(t, tt.want, resp.StatusCode)
		})
	}
}

// TestStreamableGETStream: the GET stream carries what belongs to no POST,
// one GET stream per session, and a client resumes it with Last-Event-ID.
func TestStreamableGETStream(t *testing.T) {
	hs := startHTTP(t, 0)
	sid := hs.initialize(t)
	hdr := "Mcp-Session-Id: " + sid
	get := hs.do(t, "GET", "", hdr, "Accept: text/event-stream")
	require.Equal(t, http.StatusOK, get.StatusCode)
	second := hs.do(t, "GET", "", hdr, "Accept: text/event-stream")
	assert.Equal(t, http.StatusConflict, second.StatusCode)

	// Two POSTs open: the server's request goes on the GET stream.
	gate := hs.do(t, "POST", `{"jsonrpc":"2.0","id":"g","method":"gate","params":{"_meta":{"progressToken":"g"}}}`, hdr)
	readEvents(t, gate, 1)
	ask := hs.do(t, "POST", `{"jsonrpc":"2.0","id":"a","method":"ask"}`, hdr)
	evs := readEvents(t, ask, -1)
	require.Len(t, evs, 1)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":"a","result":{}}`, evs[0].data)
	hs.hub.gate <- struct{}{}
	evs = readEvents(t, gate, -1)
	require.Len(t, evs, 2)

	resp := hs.do(t, "POST", `{"jsonrpc":"2.0","id":"n","method":"notify"}`, hdr)
	readEvents(t, resp, -1)
	got := readEvents(t, get, 2)
	assert.Contains(t, got[0].data, `"sampling/createMessage"`)
	assert.JSONEq(t, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, got[1].data)

	// The client drops the GET stream; what comes meanwhile is replayed
	// after the last event it saw.
	get.Body.Close()
	for range 2 {
		resp := hs.do(t, "POST", `{"jsonrpc":"2.0","id":"n","method":"notify"}`, hdr)
		readEvents(t, resp, -1)
	}
	var again *http.Response
	require.Eventually(t, func() bool { // the old connection lets go
		again = hs.do(t, "GET", "", hdr, "Accept: text/event-stream", "Last-Event-ID: "+got[0].id)
		return again.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
	replay := readEvents(t, again, 3)
	assert.Equal(t, got[1].id, replay[0].id, "first the event after Last-Event-ID")
	for _, ev := range replay {
		assert.JSONEq(t, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, ev.data)
	}
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
	require.Eventually(t, func() bool {
		resumed = hs.do(t, "GET", "", hdr, "Accept: text/event-stream", "Last-Event-ID: "+first[0].id)
		return resumed.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
	evs := readEvents(t, resumed, -1)
	require.Len(t, evs, 2)
	assert.JSONEq(t, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":5,"progress":2}}`, evs[0].data)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":"opened"}`, evs[1].data)
}

// TestStreamableCollidingIDs: two sessions may use the same ids; within one
// session an id still waiting is refused.
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
	body, _ := io.ReadAll(dup.Body)
	assert.Contains(t, string(body), `"duplicate_id"`)
	hs.hub.gate <- struct{}{}
	readEvents(t, gate, -1)
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
