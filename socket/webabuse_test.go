package socket_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/socket"
)

// TestWebOAuthDiscoveryQuiet: the paths OAuth clients probe get a 404
// with a JSON-RPC body, token or not, and no warning.
func TestWebOAuthDiscoveryQuiet(t *testing.T) {
	ws := startWeb(t, nil)
	base := "http" + strings.TrimPrefix(ws.url, "ws")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, path := range []string{
		"/.well-known/oauth-protected-resource",
		"/.well-known/oauth-protected-resource/servers/demo",
		"/.well-known/oauth-authorization-server",
		"/.well-known/oauth-authorization-server/servers/demo/mcp",
		"/.well-known/openid-configuration",
		"/servers/demo/.well-known/openid-configuration",
	} {
		resp, err := client.Get(base + path)
		require.NoError(t, err)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, path)
		reason, _ := refusalBody(t, resp)
		assert.Equal(t, "not_supported", reason, path)
		resp.Body.Close()
	}
	for _, r := range ws.log.Records() {
		assert.Less(t, r.Level, slog.LevelWarn, "nothing logged at Warn: %v", r)
	}
}

// TestWebRefusalLogLimited: a flood of refusals from one peer logs one
// line (then, later, a count), and what the client sent is cut short.
func TestWebRefusalLogLimited(t *testing.T) {
	ws := startWeb(t, nil)
	base := "http" + strings.TrimPrefix(ws.url, "ws")
	client := &http.Client{Transport: &http.Transport{}}
	host := strings.Repeat("h", 60<<10)
	for range 50 {
		req, err := http.NewRequest("POST", base+"/servers/demo", nil)
		require.NoError(t, err)
		req.Host = host
		resp, err := client.Do(req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)
		resp.Body.Close()
	}
	var refused []string
	for _, r := range ws.log.Records() {
		if strings.HasPrefix(r.Msg, "refused a web request") {
			h, _ := r.Attrs["host"].(string)
			refused = append(refused, h)
		}
	}
	require.Len(t, refused, 1, "one line for the flood")
	assert.Less(t, len(refused[0]), 200, "the Host is cut short")
	assert.Contains(t, refused[0], "(61440 bytes)")
}

// rawRequest sends one request with the token on c and reads its
// response's status line and headers; the connection stays open.
func rawRequest(t *testing.T, c net.Conn, br *bufio.Reader) int {
	t.Helper()
	_, err := fmt.Fprintf(c, "GET /servers/demo HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", testToken)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestWebConnectionCap: beyond MaxConnections connections that passed the
// checks, a connection is not served until one of them closes.
func TestWebConnectionCap(t *testing.T) {
	// The held bodies must outlast the whole test on a loaded machine: a
	// body deadline that closed one would make room on its own.
	ws := startWeb(t, func(c *socket.WebConfig) { c.MaxConnections, c.BodyTimeout = 2, 5*time.Minute })
	addr := strings.TrimPrefix(ws.url, "ws://")
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		assert.Equal(t, http.StatusUpgradeRequired, rawRequest(t, c, bufio.NewReader(c)), "checked, and kept open")
		held = append(held, c)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 500 * time.Millisecond}
	_, err := client.Get("http://" + addr + "/servers/demo")
	require.Error(t, err, "a third connection waits")
	held[0].Close()
	client.Timeout = 10 * time.Second
	testutil.Until(t, 10*time.Second, "served once one closed", func() bool {
		resp, err := client.Get("http://" + addr + "/servers/demo")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusUpgradeRequired || resp.StatusCode == http.StatusUnauthorized
	})
}

// TestWebUncheckedBudget: connections that have passed no check are
// bounded apart: past MaxUnchecked the oldest of them is closed, never one
// that passed the checks, and a token holder's new connection is served
// while hundreds send nothing.
func TestWebUncheckedBudget(t *testing.T) {
	ws := startWeb(t, func(c *socket.WebConfig) { c.MaxConnections = 2; c.MaxUnchecked = 4 })
	addr := strings.TrimPrefix(ws.url, "ws://")
	checked, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer checked.Close()
	cbr := bufio.NewReader(checked)
	require.Equal(t, http.StatusUpgradeRequired, rawRequest(t, checked, cbr))

	var idle []net.Conn
	for range 200 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		c.Write([]byte("GET /servers/demo HTTP/1.1\r\n")) // and nothing more
		idle = append(idle, c)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	req, err := http.NewRequest("GET", "http://"+addr+"/servers/demo", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := client.Do(req)
	require.NoError(t, err, "a new connection with the token is served")
	resp.Body.Close()
	assert.Equal(t, http.StatusUpgradeRequired, resp.StatusCode)

	assert.Equal(t, http.StatusUpgradeRequired, rawRequest(t, checked, cbr), "the checked connection was kept")
	// The first of the idle ones were closed for the newer ones.
	require.NoError(t, idle[0].SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = idle[0].Read(make([]byte, 1))
	var ne net.Error
	require.Error(t, err, "the oldest unchecked connection was closed")
	assert.False(t, errors.As(err, &ne) && ne.Timeout(), "closed (EOF or reset), not still open: %v", err)
	testutil.Until(t, 10*time.Second, "at most MaxUnchecked unchecked connections", func() bool {
		_, unchecked := ws.web.ConnCounts()
		return unchecked <= 4
	})
	evictions := 0
	for _, r := range ws.log.Records() {
		if strings.HasPrefix(r.Msg, "closed the oldest connection not yet checked") {
			evictions++
		}
	}
	assert.Equal(t, 1, evictions, "one line for the flood of one peer")
}

// TestWebSlowHeadersAndBodies: a connection that trickles its headers is
// closed at HeaderTimeout; one that trickles a body, with the token or
// without, is closed at BodyTimeout.
func TestWebSlowHeadersAndBodies(t *testing.T) {
	ws := startWeb(t, func(c *socket.WebConfig) {
		c.HeaderTimeout = 300 * time.Millisecond
		c.BodyTimeout = 300 * time.Millisecond
	})
	addr := strings.TrimPrefix(ws.url, "ws://")
	cases := map[string]string{
		"headers":                "POST /servers/demo HTTP/1.1\r\nHost: 127.0.0.1\r\n",
		"body with the token":    "POST /servers/demo HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + testToken + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{",
		"body without the token": "POST /servers/demo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{",
	}
	for name, start := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer c.Close()
			_, err = c.Write([]byte(start))
			require.NoError(t, err)
			begun := time.Now()
			closed := make(chan struct{})
			go func() { // waited for below
				defer close(closed)
				io.Copy(io.Discard, c) // until the daemon closes it
			}()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-closed:
					t.Logf("closed after %v", time.Since(begun).Round(time.Millisecond))
					return
				case <-tick.C:
					if time.Since(begun) > 10*time.Second {
						c.Close()
						<-closed
						t.Fatal("still open after 10s")
					}
					c.Write([]byte(" ")) // one more byte, never the end
				}
			}
		})
	}
}

// TestWebStreamsBounded: WebSockets count as long-lived streams, bounded
// below MaxConnections (three quarters by default): one more is refused
// 503 too_many_streams, and a short request still has room.
func TestWebStreamsBounded(t *testing.T) {
	ws := startWeb(t, func(c *socket.WebConfig) { c.MaxConnections = 4 })
	for range 3 {
		status, _, _ := ws.dialWS(t, "/servers/demo", bearer(testToken))
		require.Equal(t, http.StatusSwitchingProtocols, status)
	}
	assert.Equal(t, 3, ws.web.StreamsOpen())
	status, _, resp := ws.dialWS(t, "/servers/demo", bearer(testToken))
	require.Equal(t, http.StatusServiceUnavailable, status)
	reason, _ := refusalBody(t, resp)
	assert.Equal(t, "too_many_streams", reason)

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	req, err := http.NewRequest("GET", "http"+strings.TrimPrefix(ws.url, "ws")+"/servers/demo", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	r, err := client.Do(req)
	require.NoError(t, err, "a short request has room")
	r.Body.Close()
	assert.Equal(t, http.StatusUpgradeRequired, r.StatusCode)

	_, err = socket.ListenWeb(socket.WebConfig{Addr: "127.0.0.1:0", Token: testToken, MaxConnections: 4, MaxStreams: 4,
		Lookup: func(string) (socket.Endpoint, bool) { return nil, false }})
	assert.ErrorContains(t, err, "must be fewer than 4 connections")
}

// TestWebListenOutlivesBodyTimeout: the body deadline ends with the body:
// a listen whose body was read stays open long past it.
func TestWebListenOutlivesBodyTimeout(t *testing.T) {
	ws := startWeb(t, func(c *socket.WebConfig) { c.BodyTimeout = 200 * time.Millisecond })
	c, err := net.Dial("tcp", strings.TrimPrefix(ws.url, "ws://"))
	require.NoError(t, err)
	defer c.Close()
	body := `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	_, err = fmt.Fprintf(c, "POST /servers/demo HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\nContent-Length: %d\r\n\r\n%s",
		testToken, len(body), body)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the listen's stream started")
	assert.Equal(t, 1, ws.web.StreamsOpen())
	// Nothing comes on the stream for a while (its keepalive is 25 s): the
	// read times out here, where a connection cut by the body deadline
	// would end.
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Second)))
	_, err = io.Copy(io.Discard, resp.Body)
	var ne net.Error
	require.ErrorAs(t, err, &ne, "still open")
	assert.True(t, ne.Timeout(), "still open: %v", err)
}

// TestWebLateFirstByte: a client that connects and sends its request only
// after several header timeouts (a starved machine) is served: the header
// deadline counts from the request's first byte, not from the accept. One
// that then trickles its headers is still closed at HeaderTimeout.
func TestWebLateFirstByte(t *testing.T) {
	const timeout = 200 * time.Millisecond
	ws := startWeb(t, func(c *socket.WebConfig) { c.HeaderTimeout = timeout })
	addr := strings.TrimPrefix(ws.url, "ws://")
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	<-time.After(3 * timeout) // the client is silent, not a wait for the daemon
	_, err = c.Write([]byte("GET /.well-known/oauth-authorization-server HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
	require.NoError(t, err)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err, "a request sent late is answered, not met with a closed connection")
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)

	// The next request on the connection trickles its headers: closed.
	_, err = c.Write([]byte("GET /servers/demo HTTP/1.1\r\n"))
	require.NoError(t, err)
	begun := time.Now()
	_, err = io.Copy(io.Discard, c)
	require.NoError(t, err, "closed by the daemon, before the read deadline")
	assert.Less(t, time.Since(begun), 5*time.Second)
}
