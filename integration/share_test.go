package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// statsThroughConnect runs one `mcpmux connect` in folder dir, as an editor
// starts it in its project: initialize, then the demo server's stats, which
// say which process answered and where it runs.
func statsThroughConnect(t *testing.T, cfg, dir, server string) demoStats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := mcpmux(ctx, "connect", "--config", cfg, server)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(string(request("1", "initialize", map[string]any{"protocolVersion": "2025-11-25"})) + "\n" +
		string(toolCall("2", "stats", nil)) + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "connect in %s: %s", dir, stderr.String())
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Len(t, lines, 2, "two answers: %s", stdout.String())
	m, err := jsonrpc.Parse([]byte(lines[1]))
	require.NoError(t, err)
	var st demoStats
	require.NoError(t, decodeStructured(m, &st), "%s", lines[1])
	return st
}

// share = "project": connects from a repository's root and from a folder
// inside it share one process, which runs in the root; a connect from
// another repository gets another process, in its root; both stop after
// idle_timeout.
func TestShareProject(t *testing.T) {
	top := testutil.ShortDir(t)
	a, b := filepath.Join(top, "a"), filepath.Join(top, "b")
	for _, d := range []string{filepath.Join(a, ".git"), filepath.Join(a, "src", "deep"), filepath.Join(b, ".git")} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	d := startDaemon(t, demo("code", nil, `share = "project"`, `idle_timeout = "1s"`, fmt.Sprintf("project_roots = [%q]", top)), "")

	inA := statsThroughConnect(t, d.path, a, "code")
	inSub := statsThroughConnect(t, d.path, filepath.Join(a, "src", "deep"), "code")
	inB := statsThroughConnect(t, d.path, b, "code")
	assert.Equal(t, inA.PID, inSub.PID, "the root and a folder inside it share one process")
	assert.Equal(t, a, inA.Dir, "which runs in the repository's root")
	assert.Equal(t, a, inSub.Dir)
	assert.NotEqual(t, inA.PID, inB.PID, "another repository, another process")
	assert.Equal(t, b, inB.Dir)

	instances := func() []map[string]any {
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		defer cancel()
		out, err := mcpmux(ctx, "status", "--json", "--config", d.path).Output()
		require.NoError(t, err)
		var st struct {
			Servers []struct {
				Instances []map[string]any `json:"instances"`
			} `json:"servers"`
		}
		require.NoError(t, json.Unmarshal(out, &st), "%s", out)
		require.Len(t, st.Servers, 1)
		return st.Servers[0].Instances
	}
	testutil.Until(t, 10*time.Second, "both instances stop after idle_timeout", func() bool { return len(instances()) == 0 })
	for _, pid := range []int{inA.PID, inB.PID} {
		testutil.Until(t, 5*time.Second, "the process is gone", func() bool { return gone(pid) })
	}
}

// max_concurrency = 1: four sessions' slow calls, sent at once, reach the
// server one at a time (the server counts how many run together); without
// it, they overlap.
func TestMaxConcurrencyOneAtATime(t *testing.T) {
	d := startDaemon(t, demo("one", nil, `max_concurrency = 1`)+demo("many", nil), "")
	for name, want := range map[string]int{"one": 1, "many": 4} {
		clients := make([]*client, 4)
		for i := range clients {
			clients[i] = open(t, d.socket(name))
		}
		errs := make(chan error, len(clients))
		for i, c := range clients {
			go func() { // each waits for its own answer; the errors channel collects them
				_, err := c.tool(strconv.Itoa(100+i), "slow", map[string]any{"ms": 300})
				errs <- err
			}()
		}
		for range clients {
			require.NoError(t, <-errs)
		}
		assert.Equal(t, want, clients[0].mustStats(t).SlowAtOnce, "%s: slow calls at the server at once", name)
	}
}

// statsOverWebSocket opens a WebSocket session that declares roots,
// answers mcpmux's roots/list with root, and returns the demo server's
// stats: which process answered, and where it runs.
func statsOverWebSocket(t *testing.T, d *daemon, server, root string) demoStats {
	t.Helper()
	c := wsClient(t, d, server)
	defer c.close()
	require.NoError(t, c.send(request(`"init"`, "initialize", map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{"roots": map[string]any{}},
		"clientInfo":      map[string]any{"name": "web", "version": "1"},
	})))
	m, err := c.read()
	require.NoError(t, err)
	require.Equal(t, jsonrpc.KindResult, m.Kind, "%s", m.Frame)
	require.NoError(t, c.send(notification("notifications/initialized", nil)))
	ask, err := c.read()
	require.NoError(t, err)
	require.Equal(t, "roots/list", ask.Method, "%s", ask.Frame)
	require.NoError(t, c.sendRaw([]byte(`{"jsonrpc":"2.0","id":`+string(ask.ID)+`,"result":{"roots":[{"uri":"file://`+root+`","name":"p"}]}}`+"\n")))
	m, err = c.tool(`"stats"`, "stats", nil)
	require.NoError(t, err)
	var st demoStats
	require.NoError(t, decodeStructured(m, &st), "%s", m.Frame)
	return st
}

// share = "project" on the web listener: a client there has no folder
// mcpmux can see, so its first file:// root tells its project. Two
// repositories' web clients get a process each, in its root, and a web
// client of a repository that a connect started shares that one's.
func TestShareProjectByRootsOverWebSocket(t *testing.T) {
	top := testutil.ShortDir(t)
	a, b := filepath.Join(top, "a"), filepath.Join(top, "b")
	for _, d := range []string{filepath.Join(a, ".git"), filepath.Join(a, "src"), filepath.Join(b, ".git")} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	d := startDaemon(t, demo("code", nil, `share = "project"`, fmt.Sprintf("project_roots = [%q]", top)), wsListen)
	viaConnect := statsThroughConnect(t, d.path, a, "code")
	webA := statsOverWebSocket(t, d, "code", filepath.Join(a, "src"))
	webB := statsOverWebSocket(t, d, "code", b)
	assert.Equal(t, viaConnect.PID, webA.PID, "a web client of repository a shares the process a connect there started")
	assert.Equal(t, a, webA.Dir)
	assert.NotEqual(t, webA.PID, webB.PID, "repository b: a process of its own")
	assert.Equal(t, b, webB.Dir, "which runs in b's root")
}
