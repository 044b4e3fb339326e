package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// projectInstances are the projects whose process the daemon runs for
// server, and how many sessions each has.
func projectInstances(t *testing.T, d *daemon, server string) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, s := range d.status(t).Servers {
		if s.Name == server {
			for _, in := range s.Instances {
				got[in.Project] = in.Sessions
			}
		}
	}
	return got
}

// rssMiB is a process's resident memory.
func rssMiB(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			require.NoError(t, err, "%q", line)
			return float64(kb) / 1024
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// share = "project" within bounds: web clients of 200 projects, one after
// another, never have more than max_projects processes (each new project
// stops the idlest; the one whose client just left may still have its
// session, the others have none), and the daemon stays small; a client whose root is
// outside project_roots is served in the daemon's folder, and nothing is
// started in its root.
func TestProjectsWithinBounds(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("200 project processes")
	}
	top, outside := testutil.ShortDir(t), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(outside, ".git"), 0o700))
	const maxProjects = 4
	d := startDaemon(t, demo("code", nil, `share = "project"`, `idle_timeout = "1h"`,
		fmt.Sprintf("max_projects = %d", maxProjects), fmt.Sprintf("project_roots = [%q]", top)), wsListen)
	statsThroughConnect(t, d.path, top, "code") // describes the server, for the lobby

	var pids []int
	most := 0
	for i := range 200 {
		dir := filepath.Join(top, fmt.Sprintf("p%03d", i))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, ".git"), 0o700))
		st := statsOverWebSocket(t, d, "code", dir)
		require.Equal(t, dir, st.Dir, "project %d runs in its root", i)
		pids = append(pids, st.PID)
		live := 0
		for _, pid := range pids {
			if !gone(pid) {
				live++
			}
		}
		most = max(most, live)
		require.LessOrEqual(t, live, maxProjects, "project processes alive after project %d", i)
	}
	assert.LessOrEqual(t, len(projectInstances(t, d, "code")), maxProjects)
	rss := rssMiB(t, d.cmd.Process.Pid)
	t.Logf("200 projects, max_projects = %d: at most %d project processes alive at once; daemon RSS %.1f MiB", maxProjects, most, rss)
	assert.Less(t, rss, 300.0, "daemon RSS in MiB")

	st := statsOverWebSocket(t, d, "code", outside)
	assert.NotEqual(t, outside, st.Dir, "a root outside project_roots runs nothing there")
	_, started := projectInstances(t, d, "code")[outside]
	assert.False(t, started, "no instance for the outside root")
	assert.Contains(t, d.log(), "outside project_roots")
}

// A project session on Streamable HTTP keeps its project in its record:
// after a daemon restart, the session's first message, whatever it is, is
// served by the process of its project, not the daemon's folder's.
func TestProjectHTTPSessionRestored(t *testing.T) {
	t.Parallel()
	top := testutil.ShortDir(t)
	a, b := filepath.Join(top, "a"), filepath.Join(top, "b")
	for _, dir := range []string{filepath.Join(a, ".git"), filepath.Join(b, ".git")} {
		require.NoError(t, os.MkdirAll(dir, 0o700))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	cfg := writeConfig(t, demo("code", nil, `share = "project"`, fmt.Sprintf("project_roots = [%q]", top)),
		fmt.Sprintf("http = %q\nhttp_token = %q", addr, wsToken))
	cfg.env = append(cfg.env, "XDG_STATE_HOME="+filepath.Join(cfg.dir, "state"))
	d := serveConfig(t, cfg)
	waitWebListener(t, d)
	inA := statsThroughConnect(t, d.path, a, "code") // describes the server, for the lobby

	c := newHTTPClient(t, d, "code")
	resp := c.do(t, "POST", string(request("0", "initialize", map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{"roots": map[string]any{}},
		"clientInfo": map[string]any{"name": "http", "version": "1"},
	})))
	sid := resp.Header.Get("Mcp-Session-Id")
	require.NotEmpty(t, sid)
	require.Equal(t, jsonrpc.KindResult, events(t, resp, -1)[0].msg.Kind)
	hdr := []string{"Mcp-Session-Id: " + sid, "MCP-Protocol-Version: 2025-06-18"}
	get := c.do(t, "GET", "", append(hdr, "Accept: text/event-stream")...)
	require.Equal(t, http.StatusAccepted, c.do(t, "POST", string(notification("notifications/initialized", nil)), hdr...).StatusCode)
	ask := events(t, get, 1)[0].msg
	require.Equal(t, "roots/list", ask.Method, "%s", ask.Frame)
	answer := `{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"result":{"roots":[{"uri":"file://` + b + `"}]}}`
	require.Equal(t, http.StatusAccepted, c.do(t, "POST", answer, hdr...).StatusCode)
	before := httpStats(t, c, sid, "1")
	assert.Equal(t, b, before.Dir, "the session's roots told its project")
	assert.NotEqual(t, inA.PID, before.PID)

	d.stop()
	d = serveConfig(t, cfg)
	waitWebListener(t, d)
	c = newHTTPClient(t, d, "code")
	after := httpStats(t, c, sid, "2")
	assert.Equal(t, b, after.Dir, "restored, its first message is served in its project")
	assert.NotEqual(t, before.PID, after.PID, "by a process of the new daemon")
	assert.Equal(t, map[string]int{b: 1}, projectInstances(t, d, "code"), "nothing started in the daemon's folder")
}

// httpStats calls the demo server's stats on HTTP session sid.
func httpStats(t *testing.T, c *httpClient, sid, id string) demoStats {
	t.Helper()
	evs := c.call(t, sid, toolCall(id, "stats", nil))
	last := evs[len(evs)-1].msg
	var st demoStats
	require.NoError(t, decodeStructured(last, &st), "%s", last.Frame)
	return st
}

// Twenty servers: `mcpmux status` in a terminal 100 columns wide is 22
// lines or fewer, none wider; `status NAME` shows one in full.
func TestStatusOfTwentyServersFits(t *testing.T) {
	t.Parallel()
	var servers strings.Builder
	for i := range 20 {
		servers.WriteString(demo(fmt.Sprintf("server-with-a-long-name-%02d", i), nil, `start = "lazy"`))
	}
	d := startDaemon(t, servers.String(), "")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := mcpmux(ctx, "status", "--config", d.path)
	cmd.Env = append(cmd.Environ(), "COLUMNS=100")
	out, err := cmd.Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	t.Logf("status of twenty servers: %d lines, the widest %d columns", len(lines), widest(lines))
	assert.LessOrEqual(t, len(lines), 22, "%s", out)
	assert.LessOrEqual(t, widest(lines), 100, "%s", out)
	assert.Contains(t, string(out), "server-with-a-long-name-19")

	one, err := mcpmux(ctx, "status", "server-with-a-long-name-07", "--config", d.path).Output()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(one), "server-with-a-long-name-07: idle"), "%s", one)
	assert.NotContains(t, string(one), "server-with-a-long-name-08")
}

func widest(lines []string) int {
	w := 0
	for _, l := range lines {
		w = max(w, len([]rune(l)))
	}
	return w
}
