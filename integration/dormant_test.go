package integration

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// Sessions of clients that are gone: three Inspector-like clients of an
// isolated server (initialize, one call, gone without DELETE) leave no
// process behind once http_session_dormant passes, and one that comes
// back is made again; an editor-like client with a GET stream open keeps
// its session and its process; 300 dormant sessions do not evict it.
func TestDormantHTTPSessions(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	cfg := writeConfig(t, demo("iso", nil, `share = "isolated"`)+demo("shared", nil),
		fmt.Sprintf("http = %q\nhttp_token = %q\nhttp_session_dormant = \"1s\"", addr, wsToken))
	cfg.env = append(cfg.env, "XDG_STATE_HOME="+filepath.Join(cfg.dir, "state"))
	d := serveConfig(t, cfg)
	waitWebListener(t, d)
	c := newHTTPClient(t, d, "iso")

	editor := c.initialize(t)
	get := c.do(t, "GET", "", "Mcp-Session-Id: "+editor, "MCP-Protocol-Version: 2025-06-18", "Accept: text/event-stream")
	require.Equal(t, http.StatusOK, get.StatusCode)
	editorPID := httpStats(t, c, editor, "101").PID

	var gone3 []string
	var pids []int
	for i := range 3 {
		sid := c.initialize(t)
		gone3 = append(gone3, sid)
		pids = append(pids, httpStats(t, c, sid, fmt.Sprint(200+i)).PID)
	}
	start := time.Now()
	testutil.Until(t, 15*time.Second, "the three departed clients' processes stopped", func() bool {
		for _, pid := range pids {
			if !gone(pid) {
				return false
			}
		}
		return true
	})
	t.Logf("three departed clients' processes stopped %v after their last call (http_session_dormant 1s)", time.Since(start).Round(10*time.Millisecond))
	assert.Equal(t, 1, serverSessions(t, d, "iso"), "the editor's session is left, the three are dormant")
	assert.False(t, gone(editorPID), "the editor's process is kept")
	assert.Equal(t, editorPID, httpStats(t, c, editor, "102").PID, "the editor's session goes on, on its process")

	assert.Contains(t, statusVerbose(t, d), "iso: 3 dormant HTTP sessions", "status -v names them")

	back := httpStats(t, c, gone3[0], "300")
	assert.NotContains(t, pids, back.PID, "a departed client that comes back is served by a new process")
	assert.Equal(t, 1, back.Initialize, "its initialize replayed to the new process")
	assert.Contains(t, d.log(), "HTTP session set up again")
	assert.Contains(t, statusVerbose(t, d), "iso: 2 dormant HTTP sessions", "one came back")

	s := newHTTPClient(t, d, "shared")
	for range 300 {
		s.initialize(t)
	}
	testutil.Until(t, 30*time.Second, "300 sessions dormant", func() bool {
		return serverSessions(t, d, "shared") == 0
	})
	assert.Equal(t, editorPID, httpStats(t, c, editor, "103").PID, "300 dormant sessions later, the editor's session and process are there")
	assert.NotContains(t, d.log(), "http_session="+editor+" idle", "the editor's session was never evicted")
}

// serverSessions is how many sessions status counts on server.
func serverSessions(t *testing.T, d *daemon, server string) int {
	t.Helper()
	st := d.status(t)
	for _, s := range st.Servers {
		if s.Name == server {
			return s.Sessions
		}
	}
	t.Fatalf("no server %s in status: %+v", server, st)
	return 0
}
