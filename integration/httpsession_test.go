package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// restartableWeb is a config whose web listener has a fixed port (a
// restarted daemon listens where the first one did) and a state folder of
// its own, where the HTTP sessions are kept.
func restartableWeb(t *testing.T) *daemonConfig {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	cfg := writeConfig(t, demo("demo", nil), fmt.Sprintf("http = %q\nhttp_token = %q", addr, wsToken))
	cfg.env = append(cfg.env, "XDG_STATE_HOME="+filepath.Join(cfg.dir, "state"))
	return cfg
}

// endsWithin reports whether resp's body ends (EOF or an error) within d.
func endsWithin(resp *http.Response, d time.Duration) bool {
	ended := make(chan struct{})
	go func() { // ends with the body: the stream's end, or the request's timeout
		io.Copy(io.Discard, resp.Body)
		close(ended)
	}()
	select {
	case <-ended:
		return true
	case <-time.After(d):
		return false
	}
}

// TestHTTPSessionOutlivesRestart: after the daemon is stopped and started
// again, a client goes on with its Mcp-Session-Id and is answered; a
// second GET on the session gets 200 and the first stream ends; resuming
// the GET stream with Last-Event-ID gets what came after it.
func TestHTTPSessionOutlivesRestart(t *testing.T) {
	t.Parallel()
	cfg := restartableWeb(t)
	d := serveConfig(t, cfg)
	c := newHTTPClient(t, d, "demo")
	sid := c.initialize(t)
	hdr := []string{"Mcp-Session-Id: " + sid, "MCP-Protocol-Version: 2025-06-18"}
	evs := c.call(t, sid, toolCall("1", "echo", map[string]any{"text": "before"}))
	assert.Contains(t, string(evs[len(evs)-1].msg.Frame), "before")
	get := c.do(t, "GET", "", append(hdr, "Accept: text/event-stream")...)
	require.Equal(t, http.StatusOK, get.StatusCode)

	d.stop()
	assert.True(t, endsWithin(get, 5*time.Second), "the GET stream ends with the daemon")
	d = serveConfig(t, cfg)
	waitWebListener(t, d)
	c = newHTTPClient(t, d, "demo")
	start := time.Now()
	evs = c.call(t, sid, toolCall("2", "echo", map[string]any{"text": "after"}))
	t.Logf("the first request after the restart answered in %v", time.Since(start).Round(time.Millisecond))
	last := evs[len(evs)-1].msg
	assert.Equal(t, `2`, string(last.ID))
	assert.Contains(t, string(last.Frame), "after", "the same session id is answered after the restart")
	assert.Contains(t, d.log(), "HTTP session set up again after a restart")

	first := c.do(t, "GET", "", append(hdr, "Accept: text/event-stream")...)
	require.Equal(t, http.StatusOK, first.StatusCode)
	second := c.do(t, "GET", "", append(hdr, "Accept: text/event-stream")...)
	require.Equal(t, http.StatusOK, second.StatusCode, "a second GET replaces the first")
	assert.True(t, endsWithin(first, 10*time.Second), "the first GET stream ends")

	notify := func(id string) {
		c.call(t, sid, toolCall(id, "notify", map[string]any{"method": "notifications/tools/list_changed"}))
	}
	notify("3")
	got := events(t, second, 1)
	assert.Equal(t, "notifications/tools/list_changed", got[0].msg.Method)
	second.Body.Close()
	notify("4")
	again := c.do(t, "GET", "", append(hdr, "Accept: text/event-stream", "Last-Event-ID: "+got[0].id)...)
	resumed := events(t, again, 1)
	assert.Equal(t, "notifications/tools/list_changed", resumed[0].msg.Method)
	assert.NotEqual(t, got[0].id, resumed[0].id, "the event after Last-Event-ID")

	// DELETE forgets the session for good, across a restart too.
	assert.Equal(t, http.StatusNoContent, c.do(t, "DELETE", "", hdr...).StatusCode)
	d.stop()
	d = serveConfig(t, cfg)
	waitWebListener(t, d)
	c = newHTTPClient(t, d, "demo")
	resp := c.do(t, "POST", string(toolCall("5", "echo", map[string]any{"text": "gone"})), hdr...)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), "a JSON-RPC body")
}

// TestHTTPSessionTypeScriptRestart: the TypeScript SDK's client keeps its
// session across a restart of the daemon: its next call is answered on the
// same session id, and it reconnects its GET stream by itself (200).
func TestHTTPSessionTypeScriptRestart(t *testing.T) {
	rw := needRealWorld(t)
	t.Parallel()
	cfg := restartableWeb(t)
	d := serveConfig(t, cfg)
	url := "http://" + d.webAddr() + "/servers/demo"
	var res struct {
		SessionBefore string `json:"sessionBefore"`
		SessionAfter  string `json:"sessionAfter"`
		Opened        bool   `json:"opened"`
		Changed       bool   `json:"changed"`
		Before        string `json:"before"`
		After         string `json:"after"`
		Reopened      bool   `json:"reopened"`
		Gets          []int  `json:"gets"`
		GetsBefore    int    `json:"getsBefore"`
	}
	rw.runScript(t, "http-restart.mjs", map[string]any{"url": url, "token": wsToken}, &res, func(cp string) {
		if cp == "restart" {
			d.stop()
			d = serveConfig(t, cfg)
			waitWebListener(t, d)
		}
	})
	t.Logf("GET statuses: %v (%d before the restart)", res.Gets, res.GetsBefore)
	assert.True(t, res.Opened, "the SDK opened its GET stream")
	assert.True(t, res.Changed, "the list change came on it")
	assert.Equal(t, "before", res.Before)
	assert.Equal(t, "after", res.After, "answered after the restart")
	assert.NotEmpty(t, res.SessionBefore)
	assert.Equal(t, res.SessionBefore, res.SessionAfter, "the same session")
	assert.True(t, res.Reopened, "the SDK's own GET reconnection got 200")
	assert.Contains(t, d.log(), "HTTP session set up again after a restart")
	assert.NotContains(t, strings.ToLower(d.log()), "level=error")
}

// waitWebListener waits until the daemon's web listener accepts
// connections: serveConfig waits for the servers' sockets only.
func waitWebListener(t *testing.T, d *daemon) {
	t.Helper()
	addr := d.webAddr()
	testutil.Until(t, readyTimeout, "the web listener accepts connections", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}
