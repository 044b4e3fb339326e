package socket_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/socket"
)

const testToken = "s3cret-token"

// echoEndpoint is a fake server: each session echoes every frame, and
// answers an oversized one with {"too_large":ID}.
type echoEndpoint struct {
	full  atomic.Bool
	peers chan session.Peer
}

func (e *echoEndpoint) Full() bool           { return e.full.Load() }
func (e *echoEndpoint) MaxMessageBytes() int { return 1 << 10 }

func (e *echoEndpoint) Serve(ctx context.Context, t session.Transport, peer session.Peer) error {
	defer t.Close()
	select {
	case e.peers <- peer:
	default:
	}
	stop := context.AfterFunc(ctx, func() { t.Close() })
	defer stop()
	for {
		frame, _, err := t.ReadFrame()
		var tooLarge *jsonrpc.TooLargeError
		switch {
		case errors.As(err, &tooLarge):
			frame = fmt.Appendf(nil, `{"too_large":%s}`, tooLarge.ID)
		case err != nil:
			return err
		}
		if err := t.WriteFrames([]outbox.Frame{{Data: frame}}); err != nil {
			return err
		}
	}
}

// webServer is a running web listener with one server, "demo".
type webServer struct {
	web  *socket.Web
	demo *echoEndpoint
	log  *socket.LogRecorder
	url  string // ws://ADDR
}

func startWeb(t *testing.T, tweak func(*socket.WebConfig)) *webServer {
	t.Helper()
	ws := &webServer{demo: &echoEndpoint{peers: make(chan session.Peer, 16)}, log: new(socket.LogRecorder)}
	cfg := socket.WebConfig{
		Addr:    "127.0.0.1:0",
		Token:   testToken,
		Origins: []string{"https://app.example"},
		Lookup: func(name string) (socket.Endpoint, bool) {
			if name == "demo" {
				return ws.demo, true
			}
			return nil, false
		},
		Logger: slog.New(ws.log),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	web, err := socket.ListenWeb(cfg)
	require.NoError(t, err)
	ws.web, ws.url = web, "ws://"+web.Addr().String()
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
	return ws
}

// dialWS dials path on ws with extra headers; it returns the HTTP status of
// the handshake (101 on success) and the conn, closed at cleanup.
func (ws *webServer) dialWS(t *testing.T, path string, header http.Header, protocols ...string) (int, *websocket.Conn, *http.Response) {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, Subprotocols: protocols}
	c, resp, err := d.Dial(ws.url+path, header)
	if c != nil {
		t.Cleanup(func() { c.Close() })
	}
	if resp == nil {
		require.NoError(t, err, "dial %s", path)
	}
	return resp.StatusCode, c, resp
}

// warnings keeps the records at Warn and above.
func warnings(recs []socket.Record) []socket.Record {
	var out []socket.Record
	for _, r := range recs {
		if r.Level >= slog.LevelWarn {
			out = append(out, r)
		}
	}
	return out
}

func bearer(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

func withHeader(h http.Header, key, value string) http.Header {
	h = h.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set(key, value)
	return h
}

// TestWebChecks: each request meets the checks in order, Host and Origin
// (403), then the token (401), then the server name (404), and the token is
// accepted in each of its three places.
func TestWebChecks(t *testing.T) {
	ws := startWeb(t, nil)
	auth := bearer(testToken)
	tests := []struct {
		name      string
		path      string
		header    http.Header
		protocols []string
		want      int
	}{
		{"no token", "/servers/demo", nil, nil, http.StatusUnauthorized},
		{"wrong token", "/servers/demo", bearer("wrong"), nil, http.StatusUnauthorized},
		{"wrong token, longer", "/servers/demo", bearer(testToken + "x"), nil, http.StatusUnauthorized},
		{"wrong token in the query", "/servers/demo?token=wrong", nil, nil, http.StatusUnauthorized},
		{"wrong token as subprotocol", "/servers/demo", nil, []string{"mcp", "mcp.auth.wrong"}, http.StatusUnauthorized},
		{"bare token as subprotocol", "/servers/demo", nil, []string{testToken}, http.StatusUnauthorized},
		{"token by header", "/servers/demo", auth, nil, http.StatusSwitchingProtocols},
		{"token by lowercase scheme", "/servers/demo", http.Header{"Authorization": {"bearer " + testToken}}, nil, http.StatusSwitchingProtocols},
		{"token by query", "/servers/demo?token=" + testToken, nil, nil, http.StatusSwitchingProtocols},
		{"token by subprotocol", "/servers/demo", nil, []string{"mcp", "mcp.auth." + testToken}, http.StatusSwitchingProtocols},
		{"foreign Origin", "/servers/demo", withHeader(auth, "Origin", "https://evil.example"), nil, http.StatusForbidden},
		{"foreign Origin, no token", "/servers/demo", http.Header{"Origin": {"https://evil.example"}}, nil, http.StatusForbidden},
		{"listed Origin", "/servers/demo", withHeader(auth, "Origin", "https://app.example"), nil, http.StatusSwitchingProtocols},
		{"own loopback Origin", "/servers/demo", withHeader(withHeader(auth, "Host", "localhost:7878"), "Origin", "http://localhost:7878"), nil, http.StatusSwitchingProtocols},
		{"own loopback Origin, 127.0.0.1", "/servers/demo", withHeader(withHeader(auth, "Host", "127.0.0.1:7878"), "Origin", "http://127.0.0.1:7878"), nil, http.StatusSwitchingProtocols},
		{"loopback Origin, other port", "/servers/demo", withHeader(withHeader(auth, "Host", "localhost:7878"), "Origin", "http://localhost:9999"), nil, http.StatusForbidden},
		{"loopback Origin, other name", "/servers/demo", withHeader(withHeader(auth, "Host", "localhost:7878"), "Origin", "http://127.0.0.1:7878"), nil, http.StatusForbidden},
		{"loopback Origin, https", "/servers/demo", withHeader(withHeader(auth, "Host", "localhost:7878"), "Origin", "https://localhost:7878"), nil, http.StatusForbidden},
		{"Host evil.example", "/servers/demo", withHeader(auth, "Host", "evil.example"), nil, http.StatusForbidden},
		{"Host evil.example with port, no token", "/servers/demo", http.Header{"Host": {"evil.example:7878"}}, nil, http.StatusForbidden},
		{"Host 127.0.0.1.nip.io", "/servers/demo", withHeader(auth, "Host", "127.0.0.1.nip.io"), nil, http.StatusForbidden},
		{"Host localhost", "/servers/demo", withHeader(auth, "Host", "localhost:7878"), nil, http.StatusSwitchingProtocols},
		{"Host [::1]", "/servers/demo", withHeader(auth, "Host", "[::1]:7878"), nil, http.StatusSwitchingProtocols},
		{"Host 127.0.0.2", "/servers/demo", withHeader(auth, "Host", "127.0.0.2"), nil, http.StatusSwitchingProtocols},
		{"unknown server", "/servers/nope", auth, nil, http.StatusNotFound},
		{"unknown server, no token", "/servers/nope", nil, nil, http.StatusUnauthorized},
		{"not under /servers/", "/demo", auth, nil, http.StatusNotFound},
		{"nested path", "/servers/demo/x", auth, nil, http.StatusNotFound},
		{"the /mcp alias", "/servers/demo/mcp", auth, nil, http.StatusSwitchingProtocols},
		{"the /mcp alias, nested", "/servers/demo/x/mcp", auth, nil, http.StatusNotFound},
		{"the /mcp alias alone", "/servers/mcp", auth, nil, http.StatusNotFound},
	}
	seen, logged := map[string]bool{}, map[int]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(ws.log.Records())
			got, _, resp := ws.dialWS(t, tt.path, tt.header, tt.protocols...)
			assert.Equal(t, tt.want, got, "status of %s", tt.name)
			if tt.want != http.StatusSwitchingProtocols {
				reason, _ := refusalBody(t, resp)
				assert.Equal(t, map[int]string{403: "forbidden", 401: "unauthorized", 404: "no_such_server"}[tt.want], reason, "data.reason of %s", tt.name)
				// One line per kind of refusal and peer; the same again is
				// counted, not logged.
				recs := warnings(ws.log.Records()[before:])
				require.LessOrEqual(t, len(recs), 1, "at most one log record per refusal")
				if len(recs) == 0 {
					assert.True(t, logged[tt.want], "a refusal of a kind not yet logged is logged")
					return
				}
				assert.False(t, seen[recs[0].Msg], "the same refusal from the same peer is logged once")
				seen[recs[0].Msg], logged[tt.want] = true, true
				assert.Contains(t, recs[0].Attrs, "peer", "the refusal names the peer")
				assert.Equal(t, int64(tt.want), recs[0].Attrs["status"])
			}
		})
	}
	// The token never reaches the log.
	for _, r := range ws.log.Records() {
		assert.NotContains(t, fmt.Sprint(r), testToken)
	}
}

// TestWebSubprotocol: "mcp" is selected when offered; the auth entry never
// is.
func TestWebSubprotocol(t *testing.T) {
	ws := startWeb(t, nil)
	tests := []struct {
		name      string
		protocols []string
		want      string
	}{
		{"mcp with the auth entry", []string{"mcp.auth." + testToken, "mcp"}, "mcp"},
		{"mcp alone", []string{"mcp"}, "mcp"},
		{"the auth entry alone", []string{"mcp.auth." + testToken}, ""},
		{"none", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, c, resp := ws.dialWS(t, "/servers/demo?token="+testToken, nil, tt.protocols...)
			require.Equal(t, http.StatusSwitchingProtocols, status)
			assert.Equal(t, tt.want, c.Subprotocol())
			assert.Equal(t, tt.want, resp.Header.Get("Sec-WebSocket-Protocol"))
		})
	}
}

// TestWebSession: an admitted connection reaches the endpoint as a
// "websocket" session naming the client's address, carries text frames
// both ways, and survives an oversized message.
func TestWebSession(t *testing.T) {
	ws := startWeb(t, nil)
	status, c, _ := ws.dialWS(t, "/servers/demo", bearer(testToken))
	require.Equal(t, http.StatusSwitchingProtocols, status)
	peer := <-ws.demo.peers
	assert.Equal(t, session.Peer{Transport: "websocket", Addr: c.LocalAddr().String()}, peer)

	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	big := `{"id":"big","pad":"` + strings.Repeat("x", 4<<10) + `"}`
	for _, m := range []string{`{"id":1}`, big, `{"id":2}`} {
		require.NoError(t, c.WriteMessage(websocket.TextMessage, []byte(m)))
	}
	var got []string
	for range 3 {
		_, m, err := c.ReadMessage()
		require.NoError(t, err)
		got = append(got, string(m))
	}
	assert.Equal(t, []string{`{"id":1}`, `{"too_large":"big"}`, `{"id":2}`}, got)
}

// TestWebFull: a server with no room answers 503 before any upgrade, and
// the refusal is logged once with the peer.
func TestWebFull(t *testing.T) {
	ws := startWeb(t, nil)
	ws.demo.full.Store(true)
	before := len(ws.log.Records())
	status, _, resp := ws.dialWS(t, "/servers/demo", bearer(testToken))
	assert.Equal(t, http.StatusServiceUnavailable, status)
	reason, server := refusalBody(t, resp)
	assert.Equal(t, []string{"too_many_sessions", "demo"}, []string{reason, server})
	recs := warnings(ws.log.Records()[before:])
	require.Len(t, recs, 1)
	assert.Equal(t, map[string]any{"peer": recs[0].Attrs["peer"], "status": int64(503), "server": "demo"}, recs[0].Attrs)
	assert.NotEmpty(t, recs[0].Attrs["peer"])

	ws.demo.full.Store(false)
	status, _, _ = ws.dialWS(t, "/servers/demo", bearer(testToken))
	assert.Equal(t, http.StatusSwitchingProtocols, status, "once there is room")
}

// refusalBody reads a refusal's body, which must be a JSON-RPC error
// response with id null: its data.reason and data.server.
func refusalBody(t *testing.T, resp *http.Response) (reason, server string) {
	t.Helper()
	require.NotNil(t, resp)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), "a refusal's body is JSON-RPC")
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
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
	require.NoError(t, json.Unmarshal(b, &body), "body %q", b)
	assert.Equal(t, "2.0", body.JSONRPC)
	assert.Equal(t, "null", string(body.ID))
	assert.Less(t, body.Error.Code, 0)
	return body.Error.Data.Reason, body.Error.Data.Server
}

// TestWebPlainHTTP: a GET that is neither an upgrade nor an event stream
// gets 426; the listener's refusals of plain HTTP requests are JSON-RPC
// bodies too, and a request that passes the checks reaches Streamable HTTP.
func TestWebPlainHTTP(t *testing.T) {
	ws := startWeb(t, nil)
	base := "http" + strings.TrimPrefix(ws.url, "ws")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	tests := []struct {
		name    string
		method  string
		path    string
		headers map[string]string
		status  int
		reason  string
		server  string
	}{
		{"plain GET", "GET", "/servers/demo", nil, http.StatusUpgradeRequired, "invalid_request", "demo"},
		{"foreign Host", "POST", "/servers/demo", map[string]string{"Host": "evil.example"}, http.StatusForbidden, "forbidden", "demo"},
		{"foreign Origin", "POST", "/servers/demo/mcp", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden, "forbidden", "demo"},
		{"no token", "POST", "/servers/demo", map[string]string{"Authorization": ""}, http.StatusUnauthorized, "unauthorized", "demo"},
		{"unknown server", "POST", "/servers/nope", nil, http.StatusNotFound, "no_such_server", "nope"},
		{"no server", "POST", "/elsewhere", nil, http.StatusNotFound, "no_such_server", ""},
		{"Streamable HTTP, no session", "POST", "/servers/demo", nil, http.StatusBadRequest, "no_session", "demo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, base+tt.path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+testToken)
			if tt.method == "POST" {
				req.Header.Set("Accept", "application/json, text/event-stream")
			}
			for k, v := range tt.headers {
				if k == "Host" {
					req.Host = v
				} else if v == "" {
					req.Header.Del(k)
				} else {
					req.Header.Set(k, v)
				}
			}
			resp, err := client.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, tt.status, resp.StatusCode)
			reason, server := refusalBody(t, resp)
			assert.Equal(t, tt.reason, reason)
			assert.Equal(t, tt.server, server)
			if tt.status == http.StatusUpgradeRequired {
				assert.Equal(t, "websocket", resp.Header.Get("Upgrade"))
			}
			if tt.status == http.StatusUnauthorized {
				assert.Equal(t, `Bearer realm="mcpmux"`, resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
}

// TestWebAllowRemote: with AllowRemote any Host passes; Origin is still
// checked.
func TestWebAllowRemote(t *testing.T) {
	ws := startWeb(t, func(c *socket.WebConfig) { c.AllowRemote = true })
	auth := bearer(testToken)
	status, _, _ := ws.dialWS(t, "/servers/demo", withHeader(auth, "Host", "mux.lan:7878"))
	assert.Equal(t, http.StatusSwitchingProtocols, status)
	status, _, _ = ws.dialWS(t, "/servers/demo", withHeader(auth, "Origin", "https://evil.example"))
	assert.Equal(t, http.StatusForbidden, status)
}

// TestWebShutdown: ending Serve's context closes the sessions, and Serve
// returns once they have ended.
func TestWebShutdown(t *testing.T) {
	ws := startWeb(t, nil)
	status, c, _ := ws.dialWS(t, "/servers/demo", bearer(testToken))
	require.Equal(t, http.StatusSwitchingProtocols, status)
	<-ws.demo.peers
	// Cleanup order: the Serve check registered by startWeb runs last,
	// after this one has seen the connection closed.
	t.Cleanup(func() {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _, err := c.ReadMessage()
		assert.Error(t, err, "the session must end with the listener")
	})
}

// TestListenWebLoopbackOnly: without AllowRemote only loopback addresses
// are bound.
func TestListenWebLoopbackOnly(t *testing.T) {
	lookup := func(string) (socket.Endpoint, bool) { return nil, false }
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", ":0", "192.0.2.1:0", "example.com:0"} {
		_, err := socket.ListenWeb(socket.WebConfig{Addr: addr, Token: "t", Lookup: lookup})
		assert.ErrorIs(t, err, socket.ErrNotLoopback, "addr %s", addr)
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		w, err := socket.ListenWeb(socket.WebConfig{Addr: addr, Token: "t", Lookup: lookup})
		require.NoError(t, err, "addr %s", addr)
		assert.True(t, w.Addr().(*net.TCPAddr).IP.IsLoopback(), "addr %s bound %s", addr, w.Addr())
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		require.NoError(t, w.Serve(ctx)) // closes the listener
	}
	_, err := socket.ListenWeb(socket.WebConfig{Addr: "127.0.0.1:0", Lookup: lookup})
	assert.ErrorContains(t, err, "token is required")
}

func TestTokenCreatedOnceAndReused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state", "mcpmux", "http.token")
	tok, created, err := socket.LoadOrCreateToken(path)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Regexp(t, `^[0-9a-f]{64}$`, tok)

	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "token file mode")
	di, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), di.Mode().Perm(), "token folder mode")

	again, created, err := socket.LoadOrCreateToken(path)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, tok, again, "the token is reused")
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left behind")
}

func TestTokenConcurrentCreation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "http.token")
	const n = 8
	toks := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { toks[i], _, errs[i] = socket.LoadOrCreateToken(path) })
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, toks[0], toks[i], "caller %d", i)
	}
}

func TestTokenFileRefused(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		content string
		mode    os.FileMode
		want    string
	}{
		{"readable by others", "abc\n", 0o644, "others may read it"},
		{"empty", "\n", 0o600, "does not hold a token"},
		{"two words", "a b\n", 0o600, "does not hold a token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_"))
			require.NoError(t, os.WriteFile(path, []byte(tt.content), 0o600))
			require.NoError(t, os.Chmod(path, tt.mode))
			_, _, err := socket.LoadOrCreateToken(path)
			assert.ErrorContains(t, err, tt.want)
		})
	}
	t.Run("own token kept as written", func(t *testing.T) {
		path := filepath.Join(dir, "own")
		require.NoError(t, os.WriteFile(path, []byte("  my-token\n"), 0o600))
		tok, created, err := socket.LoadOrCreateToken(path)
		require.NoError(t, err)
		assert.Equal(t, "my-token", tok)
		assert.False(t, created)
	})
}

// TestWebTokenRotation: a listener whose token came from a file takes a
// token rotated into it at once, and the rotated-out one for the grace
// time only; a wrong token is refused throughout.
func TestWebTokenRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "http.token")
	first, _, err := socket.LoadOrCreateToken(path)
	require.NoError(t, err)
	ws := startWeb(t, func(c *socket.WebConfig) {
		c.Token, c.TokenFile, c.TokenGrace = first, path, 2*time.Second
	})
	status := func(tok string) int {
		code, _, _ := ws.dialWS(t, "/servers/demo", bearer(tok))
		return code
	}
	require.Equal(t, http.StatusSwitchingProtocols, status(first), "the file's token")

	second, err := socket.RotateToken(path)
	require.NoError(t, err)
	assert.Equal(t, http.StatusSwitchingProtocols, status(second), "the new token, at once")
	assert.Equal(t, http.StatusSwitchingProtocols, status(first), "the old one, within its grace")
	assert.Equal(t, http.StatusUnauthorized, status("wrong"), "a wrong token")
	testutil.Until(t, 10*time.Second, "the old token is refused once its grace is over", func() bool {
		return status(first) == http.StatusUnauthorized
	})

	third, err := socket.RotateToken(path)
	require.NoError(t, err)
	testutil.Until(t, 10*time.Second, "a second rotation is taken too (the file is read again at most once a second)", func() bool {
		return status(third) == http.StatusSwitchingProtocols
	})
	assert.Equal(t, http.StatusSwitchingProtocols, status(second), "the second token, within its grace")
}
