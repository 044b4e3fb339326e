package integration

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

const wsToken = "integration-token"

// wsListen is the [listen] lines of a daemon with a web listener on a port
// of the system's choosing and a fixed token.
const wsListen = "http = \"127.0.0.1:0\"\nhttp_token = \"" + wsToken + "\""

var webURL = regexp.MustCompile(`url=ws://([^/\s]+)/servers/NAME`)

// webAddr waits for the daemon to log its web listener and returns its
// host:port.
func (d *daemon) webAddr() string {
	d.tb.Helper()
	var addr string
	testutil.Eventually(d.tb, readyTimeout, "the daemon logs its web listener", func() (bool, error) {
		m := webURL.FindStringSubmatch(d.log())
		if m != nil {
			addr = m[1]
		}
		return m != nil, nil
	})
	return addr
}

// wsURL is the WebSocket URL of server name.
func (d *daemon) wsURL(name string) string {
	return "ws://" + d.webAddr() + "/servers/" + name
}

// dialWebSocket opens a WebSocket with the given headers and subprotocols.
// It returns the handshake's HTTP status; the conn, when there is one, is
// closed at cleanup.
func dialWebSocket(tb testing.TB, url string, header http.Header, protocols ...string) (*websocket.Conn, *http.Response, error) {
	tb.Helper()
	d := websocket.Dialer{HandshakeTimeout: ioTimeout, Subprotocols: protocols}
	c, resp, err := d.Dial(url, header)
	if c != nil {
		tb.Cleanup(func() { c.Close() })
	}
	if resp == nil && err == nil {
		err = errors.New("no handshake response")
	}
	return c, resp, err
}

// wsClient dials server name over WebSocket with the token in the
// Authorization header and wraps the conn as a client, so that the
// socket tests' helpers drive it: each line the client writes is one text
// frame, each frame it reads one line.
func wsClient(tb testing.TB, d *daemon, name string) *client {
	tb.Helper()
	c, resp, err := dialWebSocket(tb, d.wsURL(name), http.Header{"Authorization": {"Bearer " + wsToken}})
	require.NoError(tb, err, "dial %s over WebSocket", name)
	require.Equal(tb, http.StatusSwitchingProtocols, resp.StatusCode)
	return wrapWebSocket(c)
}

func wrapWebSocket(c *websocket.Conn) *client {
	wc := &wsConn{ws: c}
	return &client{conn: wc, r: jsonrpc.NewReader(wc, readLimit)}
}

// wsConn is a WebSocket seen as a byte stream of newline-delimited JSON-RPC.
type wsConn struct {
	ws   *websocket.Conn
	rbuf []byte // the rest of the last message read, with its newline

	wmu  sync.Mutex
	wbuf []byte // a line not yet complete
}

func (c *wsConn) Read(p []byte) (int, error) {
	if len(c.rbuf) == 0 {
		typ, msg, err := c.ws.ReadMessage()
		if err != nil {
			return 0, err
		}
		if typ != websocket.TextMessage {
			return 0, fmt.Errorf("the daemon sent a frame of type %d", typ)
		}
		if bytes.IndexByte(msg, '\n') >= 0 {
			return 0, fmt.Errorf("the daemon sent a frame with a newline: %.200q", msg)
		}
		c.rbuf = append(msg, '\n')
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

func (c *wsConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf = append(c.wbuf, p...)
	for {
		i := bytes.IndexByte(c.wbuf, '\n')
		if i < 0 {
			return len(p), nil
		}
		if err := c.ws.WriteMessage(websocket.TextMessage, c.wbuf[:i]); err != nil {
			return 0, err
		}
		c.wbuf = c.wbuf[i+1:]
	}
}

func (c *wsConn) Close() error                       { return c.ws.Close() }
func (c *wsConn) LocalAddr() net.Addr                { return c.ws.LocalAddr() }
func (c *wsConn) RemoteAddr() net.Addr               { return c.ws.RemoteAddr() }
func (c *wsConn) SetReadDeadline(t time.Time) error  { return c.ws.SetReadDeadline(t) }
func (c *wsConn) SetWriteDeadline(t time.Time) error { return c.ws.SetWriteDeadline(t) }
func (c *wsConn) SetDeadline(t time.Time) error {
	return errors.Join(c.ws.SetReadDeadline(t), c.ws.SetWriteDeadline(t))
}

// TestWebSocketChecks: the daemon's web listener refuses a missing or wrong
// token (401), a foreign Origin or Host (403), an unknown server (404), and
// accepts the token in each of its three places, selecting subprotocol mcp
// when offered; every admitted session then works.
func TestWebSocketChecks(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), wsListen+"\nhttp_origins = [\"https://app.example\"]")
	url := d.wsURL("demo")
	auth := http.Header{"Authorization": {"Bearer " + wsToken}}
	with := func(key, value string) http.Header {
		h := auth.Clone()
		h.Set(key, value)
		return h
	}
	tests := []struct {
		name      string
		url       string
		header    http.Header
		protocols []string
		status    int
		protocol  string // selected subprotocol, when admitted
	}{
		{"no token", url, nil, nil, 401, ""},
		{"wrong token", url, http.Header{"Authorization": {"Bearer nope"}}, nil, 401, ""},
		{"wrong token in the query", url + "?token=nope", nil, nil, 401, ""},
		{"foreign Origin", url, with("Origin", "https://evil.example"), nil, 403, ""},
		{"Host evil.example", url, with("Host", "evil.example"), nil, 403, ""},
		{"unknown server", d.wsURL("nope"), auth, nil, 404, ""},
		{"token by header", url, auth, nil, 101, ""},
		{"token by query", url + "?token=" + wsToken, nil, nil, 101, ""},
		{"token by subprotocol", url, nil, []string{"mcp", "mcp.auth." + wsToken}, 101, "mcp"},
		{"subprotocol mcp with the header", url, auth, []string{"mcp"}, 101, "mcp"},
		{"listed Origin", url, with("Origin", "https://app.example"), nil, 101, ""},
		{"Host localhost", url, with("Host", "localhost:1"), nil, 101, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, resp, err := dialWebSocket(t, tt.url, tt.header, tt.protocols...)
			require.NotNil(t, resp, "dial: %v", err)
			assert.Equal(t, tt.status, resp.StatusCode, "%s", tt.name)
			if tt.status != 101 {
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.protocol, c.Subprotocol(), "selected subprotocol")
			cl := wrapWebSocket(c)
			_, err = cl.initialize("2025-06-18")
			require.NoError(t, err)
			require.NoError(t, cl.echo("1", "over "+tt.name))
		})
	}
	assert.NotContains(t, d.log(), wsToken, "the token never reaches the log")
}

// TestWebSocketBinaryFrame: a binary frame closes the connection with 1003.
func TestWebSocketBinaryFrame(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), wsListen)
	c, _, err := dialWebSocket(t, d.wsURL("demo")+"?token="+wsToken, nil)
	require.NoError(t, err)
	require.NoError(t, c.WriteMessage(websocket.BinaryMessage, request("1", "ping", nil)))
	c.SetReadDeadline(time.Now().Add(ioTimeout))
	_, _, err = c.ReadMessage()
	var ce *websocket.CloseError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, websocket.CloseUnsupportedData, ce.Code, "close code")
}

// TestWebSocketOversizedMessage: a 20 MB message (over the default 16 MiB
// limit) is answered message_too_large under its id, and the same session's
// next request is served.
func TestWebSocketOversizedMessage(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), wsListen)
	c := wsClient(t, d, "demo")
	_, err := c.initialize("2025-06-18")
	require.NoError(t, err)

	big := toolCall(`"big"`, "echo", map[string]string{"text": strings.Repeat("x", 20<<20)})
	start := time.Now()
	require.NoError(t, c.send(big))
	m, before, err := c.await(`"big"`)
	require.NoError(t, err)
	assert.Empty(t, before)
	e, err := errorOf(m)
	require.NoError(t, err)
	assert.Equal(t, answer{jsonrpc.CodeInvalidRequest, jsonrpc.ReasonTooLarge, `"big"`}, answer{e.Code, e.Data.Reason, string(m.ID)})
	t.Logf("a %d-byte message answered message_too_large in %v", len(big), time.Since(start).Round(time.Millisecond))
	require.NoError(t, c.echo(`"next"`, "after the big one"), "the session goes on")
}

// pipelineClient is TestPipelinedIDsAcrossSessions' session on any client:
// all requests at once under ids, every answer checked against its payload.
func pipelineClient(c *client, session string, ids []string) error {
	want := make(map[string]string, len(ids))
	frames := make([][]byte, len(ids))
	for k, id := range ids {
		want[id] = fmt.Sprintf("%s, id %s", session, id)
		frames[k] = toolCall(id, "echo", map[string]string{"text": want[id]})
	}
	written := make(chan error, 1)
	go func() { written <- c.send(frames...) }() // waited for below
	var firstErr error
	for range ids {
		m, err := c.read()
		if err != nil {
			firstErr = fmt.Errorf("%d answers missing: %w", len(want), err)
			break
		}
		text, err := resultText(m)
		payload, ok := want[string(m.ID)]
		switch {
		case err != nil:
			firstErr = err
		case !ok:
			firstErr = fmt.Errorf("an answer under id %s, which is not due: %s", m.ID, m.Frame)
		case text != payload:
			firstErr = fmt.Errorf("id %s answered with %q, want %q", m.ID, text, payload)
		}
		if firstErr != nil {
			break
		}
		delete(want, string(m.ID))
	}
	if firstErr != nil {
		c.close() // unblocks the writer
	}
	return errors.Join(firstErr, <-written)
}

// collidingIDs are n ids, numbers and strings of the same digits.
func collidingIDs(n int) []string {
	ids := make([]string, n)
	for k := range ids {
		if k%2 == 0 {
			ids[k] = strconv.Itoa(k / 2)
		} else {
			ids[k] = strconv.Quote(strconv.Itoa(k / 2))
		}
	}
	return ids
}

// TestWebSocketAndSocketCollidingIDs: a WebSocket session and a Unix-socket
// session on the same server pipeline 50 requests each under the same ids;
// every answer reaches its own session.
func TestWebSocketAndSocketCollidingIDs(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), wsListen)
	ws := wsClient(t, d, "demo")
	unix := open(t, d.socket("demo"))
	_, err := ws.initialize("2025-06-18")
	require.NoError(t, err)
	ids := collidingIDs(50)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = pipelineClient(ws, "websocket", ids) })
	wg.Go(func() { errs[1] = pipelineClient(unix, "unix", ids) })
	wg.Wait()
	assert.NoError(t, errs[0], "the WebSocket session")
	assert.NoError(t, errs[1], "the Unix-socket session")
	// Both reached the one server.
	assert.Equal(t, ws.mustStats(t).PID, unix.mustStats(t).PID)
}

// TestWebSocketGeneratedToken: with no http_token the daemon makes one,
// keeps it 0600 in $XDG_STATE_HOME/mcpmux/http.token, never logs it, and
// reuses it after a restart.
func TestWebSocketGeneratedToken(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state) // the daemon inherits the environment
	path := filepath.Join(state, "mcpmux", "http.token")
	cfg := writeConfig(t, demo("demo", nil), `http = "127.0.0.1:0"`)

	d := serveConfig(t, cfg)
	url := d.wsURL("demo")
	b, err := os.ReadFile(path)
	require.NoError(t, err, "the token file")
	token := strings.TrimSpace(string(b))
	assert.Regexp(t, `^[0-9a-f]{64}$`, token)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	assert.Contains(t, d.log(), path, "the log says where the token is kept")
	assert.NotContains(t, d.log(), token, "the token never reaches the log")

	_, resp, _ := dialWebSocket(t, url, nil)
	require.NotNil(t, resp)
	assert.Equal(t, 401, resp.StatusCode, "without the token")
	_, resp, err = dialWebSocket(t, url, http.Header{"Authorization": {"Bearer " + token}})
	require.NoError(t, err)
	assert.Equal(t, 101, resp.StatusCode, "with the token")

	d.stop()
	d = serveConfig(t, cfg)
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, token, strings.TrimSpace(string(b)), "the token is kept across restarts")
	_, resp, err = dialWebSocket(t, d.wsURL("demo"), http.Header{"Authorization": {"Bearer " + token}})
	require.NoError(t, err)
	assert.Equal(t, 101, resp.StatusCode, "the same token after a restart")
}

// TestWebSocketRemoteRefused: a non-loopback http address without
// http_allow_remote stops the daemon at startup with an error naming the
// key.
func TestWebSocketRemoteRefused(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, demo("demo", nil), `http = "0.0.0.0:0"`+"\nhttp_token = \"t\"")
	cmd := exec.Command(bins.mcpmux, "serve", "--config", cfg.path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(runTimeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("mcpmux serve is still running after %v", runTimeout)
	}
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "serve must refuse to start")
	assert.Contains(t, stderr.String(), "http_allow_remote", "the error names the key")
	assert.Contains(t, stderr.String(), "not a loopback address")
	assert.Empty(t, stdout.String())
}

// TestMaxSessionsEveryTransport: with max_sessions = 2, a third session is
// refused cleanly on every transport (a JSON-RPC error line on the socket
// and on a yamux stream, HTTP 503 on WebSocket), each refusal is logged
// once with its peer, and the admitted sessions are unaffected.
func TestMaxSessionsEveryTransport(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil, "max_sessions = 2"), wsListen)
	a := open(t, d.socket("demo"))
	b := wsClient(t, d, "demo")
	_, err := b.initialize("2025-06-18")
	require.NoError(t, err)

	// The socket: one error line, id null, then the connection closes.
	c := dial(t, d.socket("demo"))
	require.NoError(t, c.send(request("1", "ping", nil)))
	m, err := c.read()
	require.NoError(t, err)
	e, err := errorOf(m)
	require.NoError(t, err)
	assert.Equal(t, answer{jsonrpc.CodeInternalError, jsonrpc.ReasonTooManySessions, "null"}, answer{e.Code, e.Data.Reason, string(m.ID)}, "over the socket")
	_, err = c.readFrame()
	assert.Error(t, err, "the refused connection is closed")

	// A yamux stream: the same.
	ys := yamuxStreamClient(t, dialYamux(t, d.socket("demo")))
	require.NoError(t, ys.send(request("1", "ping", nil)))
	m, err = ys.read()
	require.NoError(t, err)
	e, err = errorOf(m)
	require.NoError(t, err)
	assert.Equal(t, answer{jsonrpc.CodeInternalError, jsonrpc.ReasonTooManySessions, "null"}, answer{e.Code, e.Data.Reason, string(m.ID)}, "over yamux")

	// WebSocket: 503 before the upgrade.
	_, resp, _ := dialWebSocket(t, d.wsURL("demo"), http.Header{"Authorization": {"Bearer " + wsToken}})
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "over WebSocket")

	// The admitted sessions go on.
	require.NoError(t, a.echo("2", "still here"))
	require.NoError(t, b.echo("2", "still here"))

	log := d.log()
	assert.Equal(t, 2, strings.Count(log, "refused a session: max_sessions reached"), "socket and yamux refusals, once each:\n%s", log)
	assert.Regexp(t, `refused a session: max_sessions reached.*transport=unix peer="pid \d+ uid \d+"`, log)
	assert.Regexp(t, `refused a session: max_sessions reached.*transport=yamux peer="pid \d+ uid \d+ stream \d+"`, log)
	assert.Equal(t, 1, strings.Count(log, "refused a web request: the server has its maximum of sessions"), "the WebSocket refusal, once")
	assert.Regexp(t, `refused a web request: the server has its maximum of sessions"? peer=127\.0\.0\.1:\d+ status=503`, log)

	// Once a session leaves there is room again.
	a.close()
	testutil.Eventually(t, 5*time.Second, "room for a session after one left", func() (bool, error) {
		c, resp, err := dialWebSocket(t, d.wsURL("demo"), http.Header{"Authorization": {"Bearer " + wsToken}})
		if err != nil || resp.StatusCode != 101 {
			return false, err
		}
		_, err = wrapWebSocket(c).initialize("2025-06-18")
		return err == nil, err
	})
}
